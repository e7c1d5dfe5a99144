"""fsck finds every kind of damage; repair removes only leftovers and quarantines corruption."""

from __future__ import annotations

import fcntl
import os

from cas._fsck import fsck
from fsedge._fs import STAGE_PREFIX, STAGE_SUFFIX


def _setup(ws, n=2):
    store = ws.store()
    cards = []
    for i in range(n):
        ws.export(f"r{i}.bin", os.urandom(1000 + i))
        cards.append(ws.record(store, f"r{i}.bin").card)
    return store, cards


def _object(ws, store, card):
    return ws.artifact_root.joinpath(
        *store.layout.root, *store.layout.object_path(card.typed_artifact_id)
    )


def test_a_clean_store_is_ok(ws):
    store, cards = _setup(ws)
    report = fsck(store)
    assert report.ok and report.objects == 2 and report.cards == 2
    assert report.orphans == [] and report.live_stages == 0


def test_an_empty_or_missing_project_is_ok(ws):
    assert fsck(ws.store()).ok


def test_corrupt_object_is_found_and_quarantined_never_deleted(ws):
    store, cards = _setup(ws)
    path = _object(ws, store, cards[0])
    path.chmod(0o600)
    path.write_bytes(b"garbage")
    report = fsck(store)
    assert report.invalid_objects == [cards[0].artifact.artifact_id]
    assert report.dangling_cards == [cards[0].experiment_id]
    assert not report.ok
    repaired = fsck(store, repair=True)
    assert repaired.quarantined == [cards[0].artifact.artifact_id]
    quarantine = ws.project_dir(store) / "quarantine"
    kept = list(quarantine.iterdir())
    assert len(kept) == 1 and kept[0].read_bytes() == b"garbage"
    after = fsck(store)
    assert after.invalid_objects == [] and after.dangling_cards == [cards[0].experiment_id]
    assert _object(ws, store, cards[1]).exists()


def test_orphan_objects_are_reported_but_kept(ws):
    store, cards = _setup(ws)
    (ws.project_dir(store) / "cards" / f"{cards[0].experiment_id}.json").unlink()
    report = fsck(store, repair=True)
    assert report.orphans == [cards[0].artifact.artifact_id]
    assert report.ok  # a valid unreferenced object is kept for the operator, not a failure
    assert _object(ws, store, cards[0]).exists()


def test_dangling_card_is_reported(ws):
    store, cards = _setup(ws)
    _object(ws, store, cards[1]).unlink()
    report = fsck(store)
    assert report.dangling_cards == [cards[1].experiment_id] and not report.ok


def test_invalid_card_is_reported(ws):
    store, cards = _setup(ws)
    (ws.project_dir(store) / "cards" / f"{cards[0].experiment_id}.json").write_text("{}")
    report = fsck(store)
    assert [p.name for p in report.invalid_cards] == [f"{cards[0].experiment_id}.json"]
    assert not report.ok


def test_manifest_mismatch_is_reported(ws):
    store, cards = _setup(ws)
    obj = _object(ws, store, cards[0])
    manifest = obj.with_name(obj.name + ".chunks")
    manifest.write_bytes(manifest.read_bytes().replace(b'"size"', b'"size" '))
    report = fsck(store)
    assert report.manifest_mismatches == [cards[0].experiment_id]


def _stage(ws, store, name="object-1-abc"):
    path = ws.project_dir(store) / "tmp" / f"{STAGE_PREFIX}{name}{STAGE_SUFFIX}"
    path.write_bytes(b"partial")
    return path


def test_stale_stage_is_removed_by_repair_but_a_fresh_one_is_left(ws):
    store, _ = _setup(ws)
    stale = _stage(ws, store, "object-1-old")
    os.utime(stale, (1_000_000_000, 1_000_000_000))
    fresh = _stage(ws, store, "object-2-new")
    report = fsck(store)
    assert report.stale_stages == [stale.name] and report.live_stages == 1 and not report.ok
    repaired = fsck(store, repair=True)
    assert repaired.removed_stages == [stale.name] and repaired.ok
    assert not stale.exists() and fresh.exists()


def test_a_locked_stage_is_never_stale(ws):
    store, _ = _setup(ws)
    live = _stage(ws, store)
    os.utime(live, (1_000_000_000, 1_000_000_000))
    fd = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        report = fsck(store, repair=True)
        assert report.live_stages == 1 and report.removed_stages == []
        assert live.exists()
    finally:
        os.close(fd)


def test_unknown_entries_are_reported_not_touched(ws):
    store, _ = _setup(ws)
    project = ws.project_dir(store)
    (project / "tmp" / "notes.txt").write_text("hi")
    # "99" can never be a shard: shards are base32 (a-z, 2-7), so no recorded object lands here.
    (project / "objects" / "99").mkdir()
    (project / "objects" / "99" / "random").write_text("x")
    report = fsck(store, repair=True)
    assert sorted(report.unknown_entries) == ["objects/99/random", "tmp/notes.txt"]
    assert (project / "tmp" / "notes.txt").exists()
