"""A read-only `ProjectStore` (what the notebook API opens): it proves, and writes nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cards import IndexState, IndexStatus
from cards.errors import IntegrityError, StoreIOError
from cas import VerificationCache


def _tree(root: Path) -> dict[str, tuple[int, int, str | None]]:
    return {
        str(p.relative_to(root)): (
            p.lstat().st_mtime_ns,
            p.lstat().st_mode,
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None,
        )
        for p in [root, *root.rglob("*")]
    }


@pytest.fixture
def recorded(ws):
    ws.export("r.bin", b"exact result bytes" * 1000)
    card = ws.record(ws.store(), "r.bin").card
    return card.experiment_id


def test_a_read_only_resolve_proves_the_bytes_and_writes_no_record(ws, recorded):
    for record in ws.artifact_root.rglob("*.verified"):  # as for an object stored long ago
        record.unlink()
    before = _tree(ws.artifact_root)
    reader = ws.store(read_only=True)
    first = reader.resolve(recorded)
    again = reader.resolve(recorded)
    assert first.hashed and not again.hashed  # remembered in the process, not on disk
    assert not list(ws.artifact_root.rglob("*.verified"))
    assert _tree(ws.artifact_root) == before


def test_a_read_only_resolve_trusts_the_record_a_writer_left(ws, recorded):
    [record] = list(ws.artifact_root.rglob("*.verified"))
    before = _tree(ws.artifact_root)
    resolved = ws.store(read_only=True, cache=VerificationCache()).resolve(recorded)
    assert not resolved.hashed and record.exists()
    assert _tree(ws.artifact_root) == before


def test_a_read_only_resolve_still_refuses_changed_bytes(ws, recorded):
    reader = ws.store(read_only=True)
    path = Path(reader.resolve(recorded).path)
    path.chmod(0o600)
    path.write_bytes(b"Exact result bytes" + b"exact result bytes" * 999)
    with pytest.raises(IntegrityError):
        reader.resolve(recorded)


def test_a_read_only_store_refuses_to_write(ws, recorded):
    reader = ws.store(read_only=True)
    with pytest.raises(StoreIOError, match="read-only"):
        ws.record(reader, "r.bin", query_fingerprint="b" * 64)
    status = IndexStatus(state=IndexState.PENDING)
    with pytest.raises(StoreIOError, match="read-only"):
        reader.update_index_status(recorded, lambda _: status)
