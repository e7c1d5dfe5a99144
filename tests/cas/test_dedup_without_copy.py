"""Recording bytes already stored copies nothing: they are hashed, proven stored, and referenced."""

from __future__ import annotations

import os

import pytest

import cas._record as record_module
from cards.errors import IntegrityError

BIG = 5 << 20  # over the size from which a same-size object makes a record hash first


@pytest.fixture
def no_copy(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("bytes were copied into the store")

    monkeypatch.setattr(record_module, "copy_and_hash", refuse)


def _object(ws, store, card):
    shard = card.artifact.artifact_id[4:6]
    return ws.project_dir(store) / "objects" / shard / card.artifact.artifact_id


def test_a_stored_file_recorded_again_writes_no_object_bytes(ws, monkeypatch):
    data = os.urandom(BIG)
    ws.export("a.bin", data)
    store = ws.store()
    first = ws.record(store, "a.bin", title="First").card
    stat_before = _object(ws, store, first).stat()

    def refuse(*args, **kwargs):
        raise AssertionError("bytes were copied into the store")

    monkeypatch.setattr(record_module, "copy_and_hash", refuse)
    ws.export("b.bin", data)  # the same bytes under another name, another experiment
    again = ws.record(ws.store(), "b.bin", title="Second", source_version="v2")
    assert again.deduplicated and again.card.artifact.artifact_id == first.artifact.artifact_id
    assert _object(ws, store, first).stat().st_ino == stat_before.st_ino
    tmp = ws.project_dir(store) / "tmp"
    assert not [p for p in tmp.iterdir() if p.name.startswith("stage-object")]


def test_same_size_other_bytes_are_copied(ws):
    ws.export("a.bin", os.urandom(BIG))
    store = ws.store()
    ws.record(store, "a.bin")
    ws.export("b.bin", os.urandom(BIG))
    other = ws.record(store, "b.bin", title="Other")
    assert not other.deduplicated and store.usage().objects == 2
    assert store.resolve(other.card.experiment_id).path


def test_a_corrupt_stored_copy_is_healed_not_trusted(ws):
    data = os.urandom(BIG)
    ws.export("a.bin", data)
    store = ws.store()
    card = ws.record(store, "a.bin").card
    path = _object(ws, store, card)
    path.chmod(0o600)
    with open(path, "r+b") as handle:
        handle.seek(BIG // 2)
        handle.write(b"\x00" * 8)
    path.chmod(0o400)
    with pytest.raises(IntegrityError):
        ws.store().resolve(card.experiment_id)
    again = ws.record(ws.store(), "a.bin", title="Again")
    assert any("healed" in warning for warning in again.warnings)
    with open(ws.store().resolve(card.experiment_id).path, "rb") as handle:
        assert handle.read() == data


def test_small_files_are_simply_copied(ws, no_copy):
    ws.export("s.bin", b"small")
    with pytest.raises(AssertionError, match="copied"):
        ws.record(ws.store(), "s.bin")
