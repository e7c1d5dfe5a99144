"""A record's first pass by parts, and a second pass that proves every part by its SHA-256.

`hash_export` by parts takes, besides the address and the chunk manifest, the SHA-256 of every part
the upload will send, from the same buffers. `publish` then sends each part declaring that
digest; the client proves the body against it just before it is sent. xxh3 plays no part in
the proof: with every xxh3 forced to collide, a byte changed between the passes still fails
the record and nothing becomes visible.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from bucket_helpers import Host, bucket, keys_below, open_uploads, raw_client, s3_endpoint
from conftest import PROJECT, Workspace

from cards import artifact_id_for_digest
from cards.errors import SourceChanged
from cas import _hashing
from cas._bucket import _body_check
from cas._bucket._body_check import ChecksumMismatch
from cas._bucket._publish import Publisher
from cas._hashing import PartDigests, hash_export, hash_fd

__all__ = ["bucket", "s3_endpoint"]  # fixtures, imported for pytest

MIB = 1 << 20
PART = 8 * MIB


def _hashed(path: Path, size: int | None = None, part_bytes: int = PART) -> PartDigests:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = path.stat().st_size if size is None else size
        digests = hash_export(fd, size, part_bytes=part_bytes)
        assert isinstance(digests, PartDigests)
        return digests
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", [0, 1, 4 * MIB, PART - 1, PART, PART + 1, 20 * MIB + 3, 3 * PART])
def test_the_first_pass_by_parts_measures_what_the_one_hasher_does(tmp_path: Path, size: int):
    data = os.urandom(size)
    path = tmp_path / "a.bin"
    path.write_bytes(data)
    digests = _hashed(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert (digests.size, digests.sha256, digests.chunk_digests) == (
            (plain := hash_fd(fd)).size,
            plain.sha256,
            plain.chunk_digests,
        )
    finally:
        os.close(fd)
    parts = [data[start : start + PART] for start in range(0, size, PART)]
    assert digests.part_bytes == PART
    assert digests.part_sha256 == tuple(hashlib.sha256(part).digest() for part in parts)


def test_a_growing_export_is_read_at_most_one_part_past_its_size(tmp_path: Path):
    path = tmp_path / "a.bin"
    path.write_bytes(os.urandom(3 * PART))
    assert _hashed(path, size=1).size == PART  # larger than it was: the caller refuses it
    with pytest.raises(ValueError, match="whole chunks"):
        _hashed(path, part_bytes=PART + 1)


class Ticks:
    """A progress seam that only counts."""

    def __init__(self) -> None:
        self.done = 0

    def advance(self, done: int) -> None:
        self.done += done


def _publisher(store) -> Publisher:  # type: ignore[no-untyped-def]
    made = store.objects.publisher()
    return Publisher(made.client, made.keys, made.caps, made.proofs, part_bytes=PART, in_flight=2)


@pytest.mark.parametrize(
    "size", [0, MIB, PART, 20 * MIB + 3], ids=["empty", "one-put", "one-part", "multipart"]
)
def test_parts_proven_by_their_sha256_are_published(
    ws: Workspace, s3_endpoint: str, bucket: str, size: int
):
    data = os.urandom(size)
    path = ws.export("a.bin", data)
    store = Host(s3_endpoint, bucket, ws.root / "state").store(PROJECT)
    digests = _hashed(path)
    artifact_id = artifact_id_for_digest(digests.sha256)
    ticks = Ticks()
    fd = os.open(path, os.O_RDONLY)
    try:
        present, _ = _publisher(store).publish(artifact_id, digests, fd, ticks)  # type: ignore[arg-type]
        again, _ = _publisher(store).publish(artifact_id, digests, fd)
    finally:
        os.close(fd)
    assert not present and again and ticks.done == size
    key = store.objects.keys.object(artifact_id)
    assert raw_client(s3_endpoint).get_object(Bucket=bucket, Key=key)["Body"].read() == data
    assert store.objects.client.head(key).sha256 == digests.sha256.hex()  # type: ignore[union-attr]
    assert open_uploads(s3_endpoint, bucket) == []


@pytest.mark.parametrize(
    ("size", "offset"),
    [(MIB, 10), (20 * MIB + 3, 10), (20 * MIB + 3, 20 * MIB), (20 * MIB + 3, PART)],
    ids=["one-put", "first-part", "last-part", "second-part"],
)
def test_a_part_changed_after_the_first_pass_is_refused_even_if_xxh3_collides(
    ws: Workspace,
    s3_endpoint: str,
    bucket: str,
    size: int,
    offset: int,
    monkeypatch: pytest.MonkeyPatch,
):
    """xxh3 is no cryptographic hash and no part of the proof: SHA-256 per part is."""
    collide = SimpleNamespace(xxh3_128_digest=lambda data: b"\0" * 16)  # every chunk "equal"
    monkeypatch.setattr(_hashing, "xxhash", collide)
    path = ws.export("a.bin", os.urandom(size))
    store = Host(s3_endpoint, bucket, ws.root / "state").store(PROJECT)
    digests = _hashed(path)
    with open(path, "r+b") as handle:  # the kernel swaps a byte between the passes
        handle.seek(offset)
        old = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([old[0] ^ 0xFF]))
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(SourceChanged):
            _publisher(store).publish(artifact_id_for_digest(digests.sha256), digests, fd)
    finally:
        os.close(fd)
    visible = keys_below(s3_endpoint, bucket, store.objects.keys.objects)
    assert [key for key in visible if not key.endswith(".chunks")] == []
    assert open_uploads(s3_endpoint, bucket) == []


def test_a_body_that_is_not_its_declared_sha256_is_never_sent(
    ws: Workspace, s3_endpoint: str, bucket: str
):
    client = Host(s3_endpoint, bucket, ws.root / "state").store(PROJECT).objects.client
    with pytest.raises(ChecksumMismatch):
        client.put("k", b"abc", checksum=hashlib.sha256(b"abd").digest())
    assert client.head("k") is None
    upload_id = client.start_upload("m", checksums=True)
    with pytest.raises(ChecksumMismatch):
        client.upload_part("m", upload_id, 1, bytearray(b"abc"), hashlib.sha256(b"x").digest())
    client.abort("m", upload_id)
    client.put("k", bytearray(b"abc"), checksum=hashlib.sha256(b"abc").digest())
    assert client.get_range("k", 0, 10)[0] == b"abc"


def _request(body: object, signed: object = None, declared: bytes = b"") -> SimpleNamespace:
    headers: dict[str, object] = {"x-amz-checksum-sha256": base64.b64encode(declared)}
    if signed is not None:
        headers["X-Amz-Content-SHA256"] = signed
    return SimpleNamespace(headers=headers, body=body)


def test_the_body_check_hashes_the_body_itself_when_the_payload_is_unsigned():
    good = hashlib.sha256(b"abc").digest()
    stream = io.BytesIO(b"abc")
    _body_check.check_body(_request(stream, b"UNSIGNED-PAYLOAD", good))  # type: ignore[arg-type]
    assert stream.tell() == 0  # left where the sender starts
    _body_check.check_body(_request(b"abc", None, good))  # type: ignore[arg-type]
    _body_check.check_body(_request(b"zzz", good.hex(), good))  # type: ignore[arg-type]  # signed
    for request in (
        _request(io.BytesIO(b"abd"), "UNSIGNED-PAYLOAD", good),
        _request(b"abc", "0" * 64, good),  # the signer hashed other bytes
        _request(bytearray(b"abd"), "z" * 64, good),  # not hex: hashed here
    ):
        with pytest.raises(ChecksumMismatch):
            _body_check.check_body(request)  # type: ignore[arg-type]
    _body_check.check_body(SimpleNamespace(headers={}, body=b"x"))  # type: ignore[arg-type]


def test_clients_share_the_process_session_until_the_credential_chain_changes(
    s3_endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    from cas import BucketSettings
    from cas._bucket._client import BucketClient

    settings = BucketSettings(bucket=bucket, cache_root=str(tmp_path), endpoint_url=s3_endpoint)
    first, second = BucketClient(settings), BucketClient(settings)
    assert first._session is second._session  # the service model is loaded once
    second.put("k", b"v")
    assert first.head("k") is not None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "another-key")
    other = BucketClient(settings)
    assert other._session is not first._session
    assert other._session.get_credentials().access_key == "another-key"
