"""A local S3 server (moto's server mode) for the bucket store tests, and a recording worker.

The server runs in this process on 127.0.0.1, on a port it binds itself; every test gets its
own bucket. Dummy credentials are put into the environment by the fixture only (restored
afterwards), and shared AWS files and the instance metadata service are switched off: nothing
reaches AWS.

Run as a script (`python bucket_helpers.py JOB.json`), this is one "host": it records one
export into the bucket with its own state root, printing a line per part read.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Synthetic, assembled at run time so the repository holds no key shape (secret scan).
ACCESS_KEY = "AKIA" + "ARTMEMTESTONLY0001"
SECRET_KEY = "-".join(("artmem", "test", "secret", "0123456789", "never", "printed"))
_ENV = {
    "AWS_ACCESS_KEY_ID": ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


class ServedBytes:
    """A WSGI wrapper counting the body bytes the server sent for each GET, by request path.

    The path is `/<bucket>/<key>`: what a client (in any process) fetched of each key.
    """

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._conditional = threading.Lock()
        self._lock = threading.Lock()
        self.sent: Counter[str] = Counter()

    def __call__(self, environ: dict[str, object], start_response: Callable[..., object]):  # type: ignore[no-untyped-def]
        body = self._app(environ, start_response)
        if environ.get("REQUEST_METHOD") != "GET":
            return body
        path = str(environ.get("PATH_INFO", ""))
        return self._counted(path, body)

    def _counted(self, path: str, body: Iterable[bytes]) -> Iterator[bytes]:
        try:
            for part in body:
                with self._lock:
                    self.sent[path] += len(part)
                yield part
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()

    def of(self, bucket: str, key: str) -> int:
        """Bytes sent of `key` in `bucket` so far."""
        with self._lock:
            return self.sent[f"/{bucket}/{key}"]


SERVED: ServedBytes | None = None  # set once the session's server runs

QUIRKY = "artmem-quirky-"  # buckets named so behave as a real service did (`Quirks`)
BLIND = "artmem-blind-"  # buckets named so ignore `If-Match` on PUT altogether
CARELESS = "artmem-careless-"  # buckets named so ignore `If-None-Match` on PUT too
_REFUSED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>'
    b"<Message>At least one of the pre-conditions you specified did not hold</Message>"
    b"<Condition>If-Match</Condition></Error>"
)


class Quirks:
    """A WSGI wrapper giving buckets named `artmem-quirky-*` a real service's S3 behaviours.

    As a Ceph RGW 16.2 did: a `PUT` whose `If-Match` holds a quoted ETag (as HEAD, GET and LIST
    return it) is refused with 412 even when it matches (unquoted, it works); completing a
    multipart upload ignores `If-None-Match: *` and replaces an existing key. Declared checksums
    are ignored (stored unverified): moto does that for every bucket already. For every bucket,
    conditional requests are serialised, as a real service makes them atomic. Buckets named
    `artmem-blind-*` ignore `If-Match` on `PUT` altogether (no conditional replace at all);
    buckets named `artmem-careless-*` ignore `If-None-Match` on `PUT` as well (no conditional
    create either).
    """

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._conditional = threading.Lock()

    def __call__(self, environ: dict[str, object], start_response: Callable[..., object]):  # type: ignore[no-untyped-def]
        path = str(environ.get("PATH_INFO", "")).lstrip("/")
        if path.startswith((BLIND, CARELESS)) and environ.get("REQUEST_METHOD") == "PUT":
            environ.pop("HTTP_IF_MATCH", None)
            if path.startswith(CARELESS):
                environ.pop("HTTP_IF_NONE_MATCH", None)
        if path.startswith(QUIRKY):
            method = environ.get("REQUEST_METHOD")
            if method == "PUT" and str(environ.get("HTTP_IF_MATCH", "")).startswith('"'):
                length = int(str(environ.get("CONTENT_LENGTH") or 0))
                environ["wsgi.input"].read(length)  # type: ignore[attr-defined]
                start_response("412 Precondition Failed", [("Content-Type", "application/xml")])
                return [_REFUSED]
            if method == "POST" and "uploadId=" in str(environ.get("QUERY_STRING", "")):
                environ.pop("HTTP_IF_NONE_MATCH", None)
        conditional = "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
        if conditional and environ.get("REQUEST_METHOD") in ("PUT", "POST"):
            # moto checks a condition, then writes, unlocked: two racing requests can both
            # pass. A real service's conditional write is atomic; so is this one's.
            with self._conditional:
                return list(self._app(environ, start_response))
        return self._app(environ, start_response)


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A local port that refuses connections for the block: bound here, never listening.

    Held, not closed: a port closed after it was picked is free for any other socket to take
    (and listen on) before it is used.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server for the whole session, with dummy credentials in the environment."""
    pytest.importorskip("moto")
    from moto.server import ThreadedMotoServer

    saved = {name: os.environ.get(name) for name in _ENV}
    os.environ.update(_ENV)
    # Port 0: the server binds a free port itself (a port picked first and bound later may be
    # taken meanwhile, and `start` would then wait for ever on a server thread that died).
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    global SERVED
    wsgi = server._server  # werkzeug's server reads `.app` per request
    assert wsgi is not None
    SERVED = ServedBytes(Quirks(wsgi.app))
    wsgi.app = SERVED
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def raw_client(endpoint: str):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket."""
    name = f"artmem-test-{secrets.token_hex(6)}"
    raw_client(s3_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture
def quirky_bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket with a real service's quirks (`Quirks`)."""
    name = f"{QUIRKY}{secrets.token_hex(6)}"
    raw_client(s3_endpoint).create_bucket(Bucket=name)
    return name


@dataclass
class Host:
    """One host of a bucket store: its own state root, the shared bucket."""

    endpoint: str
    bucket: str
    state_root: Path
    prefix: str = "lab"

    def settings(self, **overrides: object):  # type: ignore[no-untyped-def]
        from cas import BucketSettings

        fields: dict[str, object] = {
            "bucket": self.bucket,
            "cache_root": str(self.state_root / "bucket-cache"),
            "prefix": self.prefix,
            "endpoint_url": self.endpoint,
            "region": "us-east-1",
        }
        fields.update(overrides)
        return BucketSettings(**fields)  # type: ignore[arg-type]

    def store(self, project: str, settings: dict[str, object] | None = None, **kwargs: object):  # type: ignore[no-untyped-def]
        from cas import BucketStore, VerificationCache

        kwargs.setdefault("cache", VerificationCache())
        return BucketStore(self.settings(**(settings or {})), project, **kwargs)  # type: ignore[arg-type]


def keys_below(endpoint: str, bucket: str, prefix: str = "") -> dict[str, int]:
    """Every key (and its size) below `prefix`."""
    pages = (
        raw_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    )
    return {item["Key"]: item["Size"] for page in pages for item in page.get("Contents", ())}


def open_uploads(endpoint: str, bucket: str) -> list[str]:
    reply = raw_client(endpoint).list_multipart_uploads(Bucket=bucket)
    return [upload["Key"] for upload in reply.get("Uploads", ())]


def spawn_host(ws: Any, host: Host, name: str, *, ticks: bool = False) -> subprocess.Popen[str]:
    """Another host (a process running this file) recording `name` from `ws`'s exports."""
    from conftest import PROJECT, SESSION, metadata_fields

    settings = host.settings()
    job = {
        "settings": {
            "bucket": settings.bucket,
            "cache_root": settings.cache_root,
            "prefix": settings.prefix,
            "endpoint_url": settings.endpoint_url,
            "region": settings.region,
        },
        "project": PROJECT,
        "rlm_root": str(ws.rlm_root),
        "session": SESSION,
        "name": name,
        "metadata": metadata_fields(),
        "ticks": ticks,
    }
    path = host.state_root.parent / f"job-{host.state_root.name}.json"
    path.write_text(json.dumps(job))
    worker = Path(__file__)
    return subprocess.Popen(
        [sys.executable, str(worker), str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=worker.parent.parent,
    )  # fmt: skip


def race(ws: Any, hosts: list[Host], name: str) -> list[dict[str, Any]]:
    """Every host records `name` at once (real processes); each one's outcome, in host order."""
    procs = [spawn_host(ws, host, name) for host in hosts]
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    return outcomes


def _main(job_path: str) -> int:
    """Record one export as a separate host; print `part` per chunk read, then the outcome."""
    sys.path.insert(0, str(Path(__file__).parent.parent))
    from cards import parse_metadata
    from cas import BucketSettings, BucketStore, Provenance

    job = json.loads(Path(job_path).read_text())

    class Ticks:
        def start(self, total: int) -> None:
            print("start", flush=True)

        def advance(self, n: int) -> None:
            print("part", flush=True)

    store = BucketStore(BucketSettings(**job["settings"]), job["project"])
    recorded = store.record(
        job["rlm_root"],
        Provenance(session_id=job["session"]),
        parse_metadata(job["metadata"]),
        job["name"],
        Ticks() if job.get("ticks") else None,
    )
    print(json.dumps({"artifact_id": recorded.card.artifact.artifact_id,
                      "deduplicated": recorded.deduplicated,
                      "created": recorded.card_created}), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1]))
