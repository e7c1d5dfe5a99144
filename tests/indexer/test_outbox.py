"""The outbox: durable, atomic, idempotent admission; validated documents; safe file names."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from outbox_helpers import T0, make_entry

from cards import OutboxError
from indexer import Outbox


@pytest.fixture
def outbox(tmp_path):
    return Outbox(str(tmp_path / "state"))


def _dir(outbox, name):
    return os.path.join(outbox.state_root, "outbox", name)


def test_admission_is_durable_and_idempotent(outbox, tmp_path):
    entry = make_entry(1)
    assert outbox.admit(entry).created
    assert not outbox.admit(entry).created
    assert outbox.pending() == [entry]
    # a new process (a new Outbox object) recovers it
    assert Outbox(outbox.state_root).pending() == [entry]


def test_files_and_directories_are_private(outbox):
    outbox.admit(make_entry(1))
    pending = _dir(outbox, "pending")
    assert stat.S_IMODE(os.stat(pending).st_mode) == 0o700
    for name in os.listdir(pending):
        assert stat.S_IMODE(os.stat(os.path.join(pending, name)).st_mode) == 0o600
    assert os.listdir(_dir(outbox, "tmp")) == []


def test_pending_is_in_admission_order(outbox):
    entries = [make_entry(n, seq=100 - n) for n in range(5)]
    for entry in entries:
        outbox.admit(entry)
    assert [e.seq for e in outbox.pending()] == sorted(e.seq for e in entries)


def test_next_seq_is_strictly_increasing(outbox):
    values = [outbox.next_seq() for _ in range(1000)]
    assert values == sorted(set(values))


def test_ack_update_dead_letter_and_revive(outbox):
    a, b = make_entry(1), make_entry(2)
    outbox.admit(a)
    outbox.admit(b)
    outbox.update(a.changed(attempts=3))
    assert outbox.pending()[0].attempts == 3
    outbox.ack(a.delivery_id)
    outbox.ack(a.delivery_id)  # idempotent
    outbox.dead_letter(b, "indexer.remote_rejected")
    assert outbox.pending() == []
    assert outbox.dead_reason(b.delivery_id) == "indexer.remote_rejected"
    assert not outbox.admit(b).created  # a dead letter is not silently re-admitted
    assert outbox.revive(b.delivery_id)
    assert outbox.admit(b).created
    stats = outbox.stats()
    assert (stats.pending, stats.dead_letter) == (1, 0)


def test_invalid_and_foreign_documents_are_counted_not_loaded(outbox):
    entry = make_entry(1)
    outbox.admit(entry)
    pending = _dir(outbox, "pending")
    other = make_entry(2)
    with open(os.path.join(pending, other.delivery_id + ".json"), "w") as handle:
        handle.write("{not json")
    doc = json.loads(Path(pending, entry.delivery_id + ".json").read_text())
    with open(os.path.join(pending, "f" * 64 + ".json"), "w") as handle:
        json.dump(doc, handle)  # valid content under the wrong name
    os.symlink("/etc/passwd", os.path.join(pending, "e" * 64 + ".json"))
    with open(os.path.join(pending, "notes.txt"), "w") as handle:
        handle.write("x")
    assert outbox.pending() == [entry]
    assert outbox.stats().invalid == 4


def test_unknown_schema_version_is_not_loaded(outbox):
    entry = make_entry(1)
    outbox.admit(entry)
    path = os.path.join(_dir(outbox, "pending"), entry.delivery_id + ".json")
    doc = json.loads(Path(path).read_text())
    doc["schema_version"] = 2
    with open(path, "w") as handle:
        json.dump(doc, handle)
    assert outbox.pending() == []


def test_temp_leftovers_are_reported(outbox):
    outbox.admit(make_entry(1))
    with open(os.path.join(_dir(outbox, "tmp"), "stage-outbox-1-dead.tmp"), "w") as handle:
        handle.write("partial")
    stats = outbox.stats()
    assert stats.temp_leftovers == 1 and stats.pending == 1


def test_failed_write_admits_nothing(outbox, monkeypatch):
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OutboxError):
        outbox.admit(make_entry(1))
    monkeypatch.undo()
    assert outbox.pending() == []
    assert os.listdir(_dir(outbox, "tmp")) == []


def test_delivery_ids_are_validated_before_becoming_file_names(outbox):
    with pytest.raises(ValueError):
        outbox.ack("../../etc/passwd")
    with pytest.raises(ValueError):
        make_entry(1).changed(delivery_id="../x")


def test_entry_round_trip_and_due(outbox):
    entry = make_entry(1, parts=3)
    assert entry.due(T0)
    later = entry.schedule_retry(now=T0, delay_s=10, error="indexer.remote_unavailable")
    assert not later.due(T0) and later.last_error == "indexer.remote_unavailable"
    outbox.admit(later)
    assert outbox.pending() == [later]


def test_a_relative_state_root_is_a_configuration_error_not_a_retryable_one():
    from cards import ConfigError

    with pytest.raises(ConfigError) as caught:
        Outbox("relative/state")
    assert not caught.value.retryable and "relative/state" in caught.value.message
