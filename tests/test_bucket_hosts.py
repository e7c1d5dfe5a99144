"""Many hosts, one bucket: real processes with separate state roots recording concurrently.

A "host" is a process running `bucket_helpers.py` with its own state root (its own cache).
"""

from __future__ import annotations

import hashlib
import os
import random
import signal

import pytest
from bucket_helpers import (
    Host,
    bucket,
    keys_below,
    open_uploads,
    quirky_bucket,
    race,
    raw_client,
    s3_endpoint,
    spawn_host,
)
from conftest import PROJECT, Workspace

from cards import artifact_id_for_digest
from cas import fsck

__all__ = ["bucket", "quirky_bucket", "s3_endpoint"]  # fixtures, imported for pytest


def _objects(endpoint: str, bucket_name: str, root: str) -> dict[str, int]:
    return {
        key: size
        for key, size in keys_below(endpoint, bucket_name, root + "objects/").items()
        if not key.endswith(".chunks")
    }


@pytest.mark.slow
@pytest.mark.parametrize("service", ["moto", "quirky"])
def test_eight_hosts_recording_the_same_file_converge(
    ws: Workspace, s3_endpoint: str, service: str, request: pytest.FixtureRequest
):
    """One object, one card, and exactly one host that reports storing the bytes.

    On the quirky double multipart completion ignores `If-None-Match`: the claim decides.
    """
    bucket = request.getfixturevalue("bucket" if service == "moto" else "quirky_bucket")
    data = os.urandom(10 * 1024 * 1024 + 7)  # multipart: completion decides who stored it
    ws.export("same.bin", data)
    hosts = [Host(s3_endpoint, bucket, ws.root / f"host{i}") for i in range(8)]
    outcomes = race(ws, hosts, "same.bin")
    artifact_id = artifact_id_for_digest(hashlib.sha256(data).digest())
    assert {o["artifact_id"] for o in outcomes} == {artifact_id}
    assert sorted(o["deduplicated"] for o in outcomes) == [False] + [True] * 7
    store = hosts[0].store(PROJECT)
    root = store.objects.keys.root
    assert list(_objects(s3_endpoint, bucket, root)) == [store.objects.keys.object(artifact_id)]
    assert len(store.scan_cards().cards) == 1
    assert keys_below(s3_endpoint, bucket, root + "tmp/") == {}
    assert open_uploads(s3_endpoint, bucket) == []
    assert fsck(store).ok


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_kill_during_upload_leaves_no_visible_invalid_object(
    ws: Workspace, s3_endpoint: str, bucket: str, seed: int
):
    data = os.urandom(40 * 1024 * 1024)  # ten 4 MiB chunks, five parts
    ws.export("big.bin", data)
    host = Host(s3_endpoint, bucket, ws.root / "victim")
    proc = spawn_host(ws, host, "big.bin", ticks=True)
    assert proc.stdout is not None
    # Ticks: ten 4 MiB chunks hashed, then five 8 MiB parts sent; a kill lands in either pass.
    kill_after = random.Random(seed).randrange(1, 16)
    seen = 0
    for line in proc.stdout:
        seen += line.startswith("part")
        if seen >= kill_after:
            break
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    store = Host(s3_endpoint, bucket, ws.root / "inspector").store(
        PROJECT, settings={"stale_after_s": 0}
    )
    s3 = raw_client(s3_endpoint)
    for key in _objects(s3_endpoint, bucket, store.objects.keys.root):
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert key.endswith(artifact_id_for_digest(hashlib.sha256(body).digest()))
    report = fsck(store, repair=True)
    assert report.invalid_objects == [] and report.quarantined == []
    assert fsck(store).ok
    assert keys_below(s3_endpoint, bucket, store.objects.keys.root + "tmp/") == {}
    assert open_uploads(s3_endpoint, bucket) == []
