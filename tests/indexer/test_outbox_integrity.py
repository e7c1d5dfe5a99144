"""Corrupt outbox documents: detected, never delivered, moved aside whole, never blocking."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from outbox_helpers import make_entry

from indexer import Outbox
from indexer._outbox_files import CORRUPT, Corrupt, inspect, set_aside


@pytest.fixture
def outbox(tmp_path):
    return Outbox(str(tmp_path / "state"))


def _path(outbox, where, name):
    return Path(outbox.state_root, "outbox", where, name)


def _edited(field):
    def edit(raw: bytes) -> bytes:
        doc = json.loads(raw)
        if field == "content":
            doc["messages"][0]["content"] += " (edited)"
        elif field == "turn":
            doc["conversation"]["turn"] += 1
        elif field == "session":
            doc["target"]["session_id"] = "sess-other"
        elif field == "message_delivery_id":
            doc["messages"][0]["metadata"]["delivery_id"] = "0" * 64
        elif field == "schema_version":
            doc["schema_version"] = 99
        elif field == "kind":
            doc["target"]["kind"] = "cards"
        return json.dumps(doc).encode()

    return edit


CORRUPTIONS = {
    "garbage": lambda raw: b"\x00\xff garbage \x9c" * 10,
    "empty": lambda raw: b"",
    "truncated": lambda raw: raw[: len(raw) // 2],
    "one byte short": lambda raw: raw[:-1],
    "not an object": lambda raw: b"[1, 2, 3]",
    "edited content": _edited("content"),
    "edited identity": _edited("turn"),
    "edited target": _edited("session"),
    "edited message delivery id": _edited("message_delivery_id"),
    "unknown schema version": _edited("schema_version"),
    "edited kind": _edited("kind"),
}


def _corrupt(outbox, entry, corruption) -> bytes:
    path = _path(outbox, "pending", entry.delivery_id + ".json")
    damaged = corruption(path.read_bytes())
    path.write_bytes(damaged)
    return damaged


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_corrupt_document_is_detected_and_moved_aside_whole(outbox, kind):
    entry, other = make_entry(1), make_entry(2)
    outbox.admit(entry)
    outbox.admit(other)
    damaged = _corrupt(outbox, entry, CORRUPTIONS[kind])

    assert outbox.pending() == [other]  # never parsed into a delivery
    assert outbox.stats().invalid == 1  # status only counts it
    found = outbox.check()
    assert (found.valid, found.corrupt, found.moved, found.ok) == (1, 1, 0, False)
    assert _path(outbox, "pending", entry.delivery_id + ".json").exists()  # no repair asked

    repaired = outbox.check(repair=True)
    assert (repaired.valid, repaired.corrupt, repaired.moved, repaired.ok) == (1, 1, 1, True)
    assert not _path(outbox, "pending", entry.delivery_id + ".json").exists()
    kept = _path(outbox, "dead-letter", entry.delivery_id + ".corrupt")
    assert kept.read_bytes() == damaged  # never silently dropped, never rewritten
    assert outbox.dead_reason(entry.delivery_id) == CORRUPT == "indexer.outbox_corrupt"
    stats = outbox.stats()
    assert (stats.pending, stats.invalid, stats.set_aside, stats.dead_letter) == (1, 0, 1, 0)
    assert outbox.check().ok

    assert outbox.admit(entry).created  # the evidence blocks nothing
    assert outbox.pending() == [entry, other]


def test_is_pending_sets_a_corrupt_document_aside(outbox):
    entry = make_entry(1)
    outbox.admit(entry)
    assert outbox.is_pending(entry.delivery_id)
    _corrupt(outbox, entry, CORRUPTIONS["truncated"])
    assert not outbox.is_pending(entry.delivery_id)
    assert outbox.dead_reason(entry.delivery_id) == CORRUPT
    assert not outbox.is_pending(entry.delivery_id)
    assert not outbox.is_pending(make_entry(2).delivery_id)  # missing: not pending either


def test_admitting_over_a_corrupt_document_replaces_it(outbox):
    entry = make_entry(1)
    outbox.admit(entry)
    damaged = _corrupt(outbox, entry, CORRUPTIONS["garbage"])
    assert outbox.admit(entry).created
    assert outbox.pending() == [entry]
    assert _path(outbox, "dead-letter", entry.delivery_id + ".corrupt").read_bytes() == damaged
    assert not outbox.admit(entry).created  # a valid pending document still wins


def test_a_valid_document_under_another_name_is_corrupt(outbox):
    entry, other = make_entry(1), make_entry(2)
    outbox.admit(entry)
    raw = _path(outbox, "pending", entry.delivery_id + ".json").read_bytes()
    _path(outbox, "pending", other.delivery_id + ".json").write_bytes(raw)
    assert not outbox.is_pending(other.delivery_id)
    assert outbox.dead_reason(other.delivery_id) == CORRUPT
    assert outbox.pending() == [entry]


def test_symlinks_and_directories_in_place_of_documents_are_moved_not_followed(outbox, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_bytes(b"{}")
    outbox.admit(make_entry(0))  # creates the directories
    link, folder = make_entry(1), make_entry(2)
    os.symlink(target, _path(outbox, "pending", link.delivery_id + ".json"))
    os.mkdir(_path(outbox, "pending", folder.delivery_id + ".json"))
    report = outbox.check(repair=True)
    assert (report.valid, report.corrupt, report.moved) == (1, 2, 2)
    moved_link = _path(outbox, "dead-letter", link.delivery_id + ".corrupt")
    assert moved_link.is_symlink() and target.read_bytes() == b"{}"
    assert _path(outbox, "dead-letter", folder.delivery_id + ".corrupt").is_dir()


def test_foreign_files_are_reported_and_left_alone(outbox):
    outbox.admit(make_entry(1))
    notes = _path(outbox, "pending", "notes.txt")
    notes.write_text("operator notes")
    report = outbox.check(repair=True)
    assert (report.valid, report.corrupt, report.foreign, report.ok) == (1, 0, 1, False)
    assert notes.read_text() == "operator notes"


def test_a_corrupt_dead_letter_is_set_aside_too(outbox):
    entry = make_entry(1)
    outbox.admit(entry)
    outbox.dead_letter(entry, "indexer.remote_rejected")
    path = _path(outbox, "dead-letter", entry.delivery_id + ".json")
    path.write_bytes(b"{")
    assert outbox.dead_reason(entry.delivery_id) == CORRUPT
    assert not path.exists()
    assert _path(outbox, "dead-letter", entry.delivery_id + ".corrupt").read_bytes() == b"{"
    assert outbox.admit(entry).created


def test_a_document_replaced_after_it_was_judged_is_not_moved(outbox):
    entry = make_entry(1)
    outbox.admit(entry)
    _corrupt(outbox, entry, CORRUPTIONS["empty"])
    name = entry.delivery_id + ".json"
    pending = os.open(_path(outbox, "pending", ""), os.O_RDONLY | os.O_DIRECTORY)
    dead = os.open(_path(outbox, "dead-letter", ""), os.O_RDONLY | os.O_DIRECTORY)
    try:
        judged = inspect(pending, name)
        assert isinstance(judged, Corrupt)
        outbox.update(entry)  # a valid document takes its place (atomic replace)
        assert not set_aside(pending, name, dead, judged)
    finally:
        os.close(pending)
        os.close(dead)
    assert outbox.pending() == [entry]
    assert os.listdir(_path(outbox, "dead-letter", "")) == []


def test_check_of_an_unused_state_root_creates_nothing(tmp_path):
    report = Outbox(str(tmp_path / "state")).check(repair=True)
    assert report.ok and (report.valid, report.corrupt, report.moved, report.foreign) == (0,) * 4
    assert not (tmp_path / "state").exists()


def test_check_reports_modes_that_are_not_private(outbox):
    entry = make_entry(1)
    outbox.admit(entry)
    assert outbox.check().permission_problems == ()
    os.chmod(_path(outbox, "pending", ""), 0o755)
    os.chmod(_path(outbox, "pending", entry.delivery_id + ".json"), 0o644)
    os.chmod(outbox.state_root, 0o750)
    problems = outbox.check().permission_problems
    assert problems == (
        ".: mode 0750, expected 0700",
        "outbox/pending: mode 0755, expected 0700",
        f"outbox/pending/{entry.delivery_id}.json: mode 0644, expected 0600",
    )
    assert not outbox.check().ok
    repaired = outbox.check(repair=True)  # issue 30: --repair fixes what it reports
    assert repaired.permission_problems == () and repaired.permissions_repaired == 3
    assert repaired.ok and outbox.check().ok
    assert os.stat(outbox.state_root).st_mode & 0o777 == 0o700


def test_repair_gives_a_state_root_made_by_a_bucket_cache_its_mode(tmp_path):
    # A bucket host's cache below the state root used to create the state root 0755 (makedirs
    # gives parents the default mode), and fsck failed ever after.
    from fsedge import make_root

    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    report = Outbox(str(state)).check()
    assert report.permission_problems == (".: mode 0755, expected 0700",) and not report.ok
    repaired = Outbox(str(state)).check(repair=True)
    assert repaired.ok and repaired.permissions_repaired == 1
    fresh = tmp_path / "fresh" / "state"
    make_root(str(fresh / "bucket-cache"))
    assert {os.stat(p).st_mode & 0o777 for p in (fresh.parent, fresh)} == {0o700}
    assert Outbox(str(fresh)).check().ok


def test_repair_leaves_an_owner_it_cannot_change_reported(outbox, monkeypatch):
    outbox.admit(make_entry(1))
    owner = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    report = outbox.check(repair=True)
    assert report.permissions_repaired == 0 and not report.ok


def test_check_reports_files_owned_by_another_user(outbox, monkeypatch):
    entry = make_entry(1)
    outbox.admit(entry)
    owner = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)  # as another user sees the outbox
    problems = outbox.check().permission_problems
    expected = f"owned by uid {owner}, expected {owner + 1}"
    for label in (".", "outbox", "outbox/pending", f"outbox/pending/{entry.delivery_id}.json"):
        assert f"{label}: {expected}" in problems


def test_check_reports_a_state_root_that_is_not_a_directory(tmp_path):
    state = tmp_path / "state"
    state.write_text("not a directory")
    os.chmod(state, 0o700)
    report = Outbox(str(state)).check(repair=True)
    assert report.permission_problems == (".: not a directory",) and not report.ok


def test_check_reports_an_outbox_that_is_a_symlink(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.symlink(elsewhere, state / "outbox")
    report = Outbox(str(state)).check(repair=True)
    assert report.permission_problems == ("outbox: not a directory",) and not report.ok
    assert os.listdir(elsewhere) == []  # nothing created through the link
