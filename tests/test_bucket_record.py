"""A bucket record hashes the export in place, then reads it again to send it.

What the second pass sends is proven against the first pass's SHA-256 digests (of every part,
or of the whole) before the object is created, so an export that changes between the passes
(even with its mtime put back, which the identity check cannot see) fails the record: nothing
becomes visible, no upload stays open, no card is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from bucket_helpers import Host, bucket, keys_below, open_uploads, s3_endpoint
from conftest import PROJECT, SESSION, Workspace, make_metadata

from cards.errors import SourceChanged
from cas import BucketStore, Provenance

__all__ = ["bucket", "s3_endpoint"]  # fixtures, imported for pytest

MIB = 1 << 20


class ChangeAfterHashing:
    """A progress seam that rewrites one byte of the export once the first pass has read it."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.offset = path, offset
        self.total = self.done = 0
        self.changed = False

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, done: int) -> None:
        self.done += done
        if not self.changed and self.done >= self.total // 2:  # the hashing pass is over
            st = self.path.stat()
            with open(self.path, "r+b") as handle:
                handle.seek(self.offset)
                old = handle.read(1)
                handle.seek(self.offset)
                handle.write(bytes([old[0] ^ 0xFF]))
            os.utime(self.path, ns=(st.st_atime_ns, st.st_mtime_ns))
            self.changed = True


@pytest.mark.parametrize("size", [MIB, 20 * MIB + 3], ids=["one-put", "multipart"])
def test_an_export_changed_between_the_passes_is_refused(
    ws: Workspace, s3_endpoint: str, bucket: str, size: int
):
    path = ws.export("a.bin", os.urandom(size))
    store = Host(s3_endpoint, bucket, ws.root / "state").store(PROJECT)
    progress = ChangeAfterHashing(path, size - 10)
    with pytest.raises(SourceChanged):
        store.record(
            str(ws.rlm_root), Provenance(session_id=SESSION), make_metadata(), "a.bin", progress
        )
    assert progress.changed
    _nothing_visible(store, s3_endpoint, bucket)
    recorded = store.record(
        str(ws.rlm_root), Provenance(session_id=SESSION), make_metadata(), "a.bin"
    )  # the export as it is now
    assert recorded.card.artifact.bytes == size and not recorded.deduplicated


def test_a_record_writes_nothing_locally_and_a_resolve_downloads(
    ws: Workspace, s3_endpoint: str, bucket: str
):
    data = os.urandom(9 * MIB)
    ws.export("a.bin", data)
    store = Host(s3_endpoint, bucket, ws.root / "state").store(PROJECT)
    ticks = Ticks()
    recorded = store.record(
        str(ws.rlm_root), Provenance(session_id=SESSION), make_metadata(), "a.bin", ticks
    )
    assert ticks.total == ticks.done == 2 * len(data)  # hashed, then sent
    artifact_id = recorded.card.typed_artifact_id
    assert not store.objects.copies.has(artifact_id)
    resolved = store.resolve(recorded.card.experiment_id)
    assert resolved.hashed and Path(resolved.path).read_bytes() == data
    again = Host(s3_endpoint, bucket, ws.root / "state2").store(PROJECT)
    ticks = Ticks()
    dedup = again.record(
        str(ws.rlm_root), Provenance(session_id=SESSION), make_metadata(title="Again"), "a.bin",
        ticks,
    )  # fmt: skip
    assert dedup.deduplicated and ticks.total == ticks.done  # nothing sent, progress complete


class Ticks:
    """A progress seam that only counts."""

    def __init__(self) -> None:
        self.total = self.done = 0

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, done: int) -> None:
        self.done += done


@pytest.mark.parametrize("checksums", [True, False], ids=["part-checksums", "whole-sha256"])
@pytest.mark.parametrize("size", [MIB, 20 * MIB + 3], ids=["one-put", "multipart"])
def test_chunks_that_collide_with_the_first_pass_are_still_refused(
    ws: Workspace,
    s3_endpoint: str,
    bucket: str,
    size: int,
    checksums: bool,
    monkeypatch: pytest.MonkeyPatch,
):
    """xxh3 is no cryptographic hash: what is sent is proven by SHA-256 before it shows.

    With `part_checksums` each part is proven against its declared SHA-256 as it is sent;
    without (a service refusing S3 checksums), no checksum is declared and the SHA-256 of all
    that was sent is checked before the object is created.
    """
    from cas import _hashing
    from cas._bucket import _publish
    from cas._bucket._client import BucketClient

    store = Host(s3_endpoint, bucket, ws.root / "state").store(
        PROJECT, settings={"part_checksums": checksums}
    )
    store.capabilities()  # the probe sends a wrong checksum on purpose: before the spy
    declared: list[bytes | None] = []
    for name in ("put", "upload_part"):
        send = getattr(BucketClient, name)

        def spy(*args, _send=send, **kwargs):  # type: ignore[no-untyped-def]
            # put(self, key, body, ..., checksum=...); upload_part(self, key, id, n, body, checksum)
            declared.append(kwargs.get("checksum", args[5] if len(args) > 5 else None))
            return _send(*args, **kwargs)

        monkeypatch.setattr(BucketClient, name, spy)

    collide = SimpleNamespace(xxh3_128_digest=lambda data: b"\0" * 16)  # every chunk "equal"
    monkeypatch.setattr(_hashing, "xxhash", collide)  # the first pass, by parts or not
    monkeypatch.setattr(_publish, "xxhash", collide)
    path = ws.export("a.bin", os.urandom(size))
    # The change comes after the first pass and its unchanged-check (which now sees any write
    # by its ctime): at the HEAD the store sends before publishing.
    flip = ChangeAfterHashing(path, 10)
    head = BucketClient.head

    def change_then_head(*args, **kwargs):  # type: ignore[no-untyped-def]
        flip.start(2)
        flip.advance(1)  # the byte flips (its mtime put back)
        return head(*args, **kwargs)

    monkeypatch.setattr(BucketClient, "head", change_then_head)
    with pytest.raises(SourceChanged):
        store.record(
            str(ws.rlm_root), Provenance(session_id=SESSION), make_metadata(), "a.bin", Ticks()
        )
    assert flip.changed
    _nothing_visible(store, s3_endpoint, bucket)
    assert declared, "nothing was sent"
    assert any(d is not None for d in declared) is checksums  # a declared part SHA-256, or none


def _nothing_visible(store: BucketStore, s3_endpoint: str, bucket: str) -> None:
    """No object (a manifest may stay), no card and no open upload in the bucket."""
    visible = keys_below(s3_endpoint, bucket, store.objects.keys.objects)
    assert not [key for key in visible if not key.endswith(".chunks")]
    assert keys_below(s3_endpoint, bucket, store.objects.keys.root + "cards/") == {}
    assert open_uploads(s3_endpoint, bucket) == []
