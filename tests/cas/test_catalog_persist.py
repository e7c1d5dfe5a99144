"""The persisted catalog: ranks as a fresh build, revalidates cheaply, is never trusted blindly."""

from __future__ import annotations

import json
import os
from pathlib import Path

from catalog_helpers import cards_dir, hit_ids, record_numbered, searchers, settle

from cards import DEFAULT_LIMITS
from cas import Catalog, LocalCatalog
from cas import _catalog_files as files
from cas._catalog_files import Head

WORDS = ["cohort", "response", "treatment", "alpha beta", "gamma", "cohort alpha", "unknown"]


def _populate(ws, store, count: int = 8) -> list:
    titles = ["Alpha cohort", "Beta response", "Gamma treatment", "Alpha beta gamma"]
    return [
        record_numbered(
            ws, store, n, title=titles[n % 4], tags=[f"t{n % 3}"], summary=f"run {n} alpha"
        )
        for n in range(count)
    ]


def _head(catalog: LocalCatalog) -> Head:
    raw = Path(catalog.path or "", files.HEAD).read_bytes()
    head = files.decode(raw, Head)
    assert head is not None
    return head


def test_a_saved_catalog_ranks_exactly_like_a_fresh_build(ws, tmp_path):
    store = ws.store()
    cards = _populate(ws, store)
    state = str(tmp_path / "state")
    first = LocalCatalog.open(store, state)
    reloaded = LocalCatalog(store, state)  # loaded, not refreshed
    fresh = Catalog(store.scan_cards().cards)
    assert len(reloaded) == len(cards)
    for query in [*WORDS, cards[3].experiment_id, cards[2].query_fingerprint, "T1"]:
        expected = fresh.search(query, limit=5)
        assert first.search(query, 5) == expected, query
        assert reloaded.search(query, 5) == expected, query


def test_an_unchanged_cards_version_means_no_scan_and_a_changed_one_catches_up(ws, tmp_path):
    store = ws.store()
    card = record_numbered(ws, store, 1, title="Quokka census")
    settle(ws, store)
    state = str(tmp_path / "state")
    LocalCatalog.open(store, state)
    path = cards_dir(ws, store) / f"{card.experiment_id}.json"
    before = path.stat()
    # Rewritten in place (no rename): the directory's version stays, so nothing is re-read.
    path.write_bytes(path.read_bytes().replace(b"Quokka census", b"Wombat census"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))
    catalog = LocalCatalog.open(store, state)
    assert catalog.refresh() is False and catalog.last_refresh == ""
    # The hit is re-read from its file: it says "Wombat" now, and is still found by "quokka".
    assert hit_ids(catalog.search("quokka", 5)) == [card.experiment_id]
    assert catalog.search("wombat", 5) == []
    # A new card moves the version: the card log names it; a file changed in place without
    # logging keeps its inode, so only a forced refresh (a stat of every file) finds it.
    other = record_numbered(ws, store, 2, title="Platypus count")
    caught_up = LocalCatalog.open(store, state)
    assert caught_up.last_refresh == "log"
    assert hit_ids(caught_up.search("platypus", 5)) == [other.experiment_id]
    assert caught_up.refresh(force=True) and caught_up.last_refresh == "scan"
    assert hit_ids(caught_up.search("wombat", 5)) == [card.experiment_id]
    assert caught_up.search("quokka", 5) == []


def test_a_hit_whose_card_file_vanished_is_never_returned(ws, tmp_path):
    store = ws.store()
    gone, kept = record_numbered(ws, store, 1), record_numbered(ws, store, 2)
    settle(ws, store)
    state = str(tmp_path / "state")
    LocalCatalog.open(store, state)
    cards = cards_dir(ws, store)
    version = cards.stat()
    (cards / f"{gone.experiment_id}.json").unlink()
    os.utime(cards, ns=(version.st_atime_ns, version.st_mtime_ns))  # the version looks unchanged
    catalog = LocalCatalog.open(store, state)
    assert hit_ids(catalog.search("cohort", 5)) == [kept.experiment_id]
    assert catalog.get(gone.experiment_id) is None
    assert len(catalog) == 1  # it caught up
    assert len(LocalCatalog(store, state)) == 1  # and saved it


def test_an_index_of_another_format_project_or_bound_is_rebuilt_not_read(ws, tmp_path):
    store, other = ws.store(), ws.store("other-project")
    card = record_numbered(ws, store, 1)
    record_numbered(ws, other, 9)
    state = tmp_path / "state"
    catalog = LocalCatalog.open(store, str(state))
    good = _head(catalog)
    foreign = LocalCatalog.open(other, str(tmp_path / "foreign"))
    heads = [
        files.encode(_head(foreign)),  # another project's head, under our name
        files.encode(Head(**{**_fields(good), "format": "artmem-catalog 7 tantivy 0.22.0"})),
        files.encode(Head(**{**_fields(good), "max_cards": 5})),
    ]
    for raw in heads:
        Path(catalog.path or "", files.HEAD).write_bytes(raw)
        assert len(LocalCatalog(store, str(state))) == 0  # not trusted
        reopened = LocalCatalog.open(store, str(state))
        assert reopened.last_refresh == "build"
        assert hit_ids(reopened.search(card.experiment_id, 5)) == [card.experiment_id]
        assert len(LocalCatalog(store, str(state))) == 1  # and saved whole again


def _fields(head: Head) -> dict[str, object]:
    return {name: getattr(head, name) for name in head.__struct_fields__}


def test_status_counts_come_from_the_catalog_with_bad_files_skipped(ws, tmp_path):
    store = ws.store()
    _populate(ws, store, 3)
    cards = cards_dir(ws, store)
    (cards / "not-a-card.json").write_text("{}")
    (cards / f"exp_{'a' * 52}.json").write_text("{broken")
    catalog = LocalCatalog.open(store, str(tmp_path / "state"))
    assert (catalog.cards, catalog.skipped, catalog.index_states()) == (3, 2, {"disabled": 3})
    (cards / "not-a-card.json").unlink()
    assert LocalCatalog.open(store, str(tmp_path / "state")).skipped == 1


def test_the_catalog_is_bounded_and_a_removal_lets_the_next_newest_in(ws, tmp_path):
    store = ws.store()
    first, second, third = (record_numbered(ws, store, n) for n in range(3))
    small = ws.store(limits=DEFAULT_LIMITS.lowered(cards_per_project=2))  # lowered afterwards
    state = str(tmp_path / "state")
    catalog = LocalCatalog.open(small, state)
    assert (len(catalog), catalog.cards, catalog.cards - len(catalog)) == (2, 3, 1)
    assert sorted(hit_ids(catalog.search("cohort", 5))) == sorted(
        [second.experiment_id, third.experiment_id]
    )
    (cards_dir(ws, store) / f"{third.experiment_id}.json").unlink()
    after = LocalCatalog.open(small, state)
    assert (len(after), after.cards, after.cards - len(after)) == (2, 2, 0)
    assert sorted(hit_ids(after.search("cohort", 5))) == sorted(
        [first.experiment_id, second.experiment_id]
    )


def test_a_read_only_catalog_writes_nothing(ws, tmp_path):
    store = ws.store()
    card = record_numbered(ws, store, 1)
    state = tmp_path / "state"
    catalog = LocalCatalog.open(store, str(state), save=False)
    assert hit_ids(catalog.search("cohort", 5)) == [card.experiment_id]
    assert not state.exists()
    LocalCatalog.open(store, str(state))  # saved by a writer, then a card it has not seen
    newer = record_numbered(ws, store, 2, title="Echidna survey")
    before = sorted((p, p.stat().st_mtime_ns) for p in state.rglob("*"))
    reader = LocalCatalog.open(store, str(state), save=False)
    assert hit_ids(reader.search("echidna", 5)) == [newer.experiment_id]
    assert sorted((p, p.stat().st_mtime_ns) for p in state.rglob("*")) == before


def test_a_recorded_card_is_found_once_refreshed_and_by_a_new_catalog(ws, tmp_path):
    store = ws.store()
    catalog = LocalCatalog.open(store, str(tmp_path / "state"))
    card = record_numbered(ws, store, 1, title="Echidna survey")
    catalog.refresh()
    assert hit_ids(catalog.search("echidna", 5)) == [card.experiment_id]
    assert LocalCatalog(store, str(tmp_path / "state")).get(card.experiment_id) == card


def test_a_state_root_that_cannot_be_written_still_answers(ws, tmp_path):
    store = ws.store()
    card = record_numbered(ws, store, 1)
    state = tmp_path / "state"
    state.write_text("not a directory")
    catalog = LocalCatalog.open(store, str(state))
    assert hit_ids(catalog.search("cohort", 5)) == [card.experiment_id]


def test_processes_that_read_and_write_one_catalog_together_leave_it_whole(ws, tmp_path):
    store = ws.store()
    state = str(tmp_path / "state")
    workers = searchers(ws.artifact_root, state, 15)
    cards = [record_numbered(ws, store, n) for n in range(12)]  # while they search and write
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0]
    saved = LocalCatalog(store, state)  # one whole index, as some process wrote it
    head = _head(saved)
    assert files.verify(os.path.join(saved.path or "", head.generation), head.manifest)
    assert set(os.listdir(saved.path or "")) == {
        files.HEAD,
        files.TABLE,
        files.LOCK,
        head.generation,
    }
    catalog = LocalCatalog.open(store, state)
    assert catalog.last_refresh in {"", "log"}
    assert sorted(hit_ids(catalog.search("cohort", 20))) == sorted(c.experiment_id for c in cards)


def test_fsck_finds_an_index_that_differs_from_the_cards_and_repair_rebuilds_it(ws, tmp_path):
    store = ws.store()
    changed, gone, _ = (record_numbered(ws, store, n, title="Quokka census") for n in range(3))
    settle(ws, store)
    state = str(tmp_path / "state")
    assert LocalCatalog.open(store, state).check().ok
    cards = cards_dir(ws, store)
    version = cards.stat()
    path = cards / f"{changed.experiment_id}.json"
    before = path.stat()
    # Behind the store's back: rewritten in place, and removed, the version left as it was.
    document = json.loads(path.read_bytes())
    document["updated_at"] = "2099-01-01T00:00:00Z"
    path.write_text(json.dumps(document))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    (cards / f"{gone.experiment_id}.json").unlink()
    os.utime(cards, ns=(version.st_atime_ns, version.st_mtime_ns))
    found = LocalCatalog.open(store, state).check()
    assert not found.ok
    assert (found.missing, found.extra) == ([], [gone.experiment_id])
    assert found.stale == [changed.experiment_id]
    repaired = LocalCatalog.open(store, state).check(repair=True)
    assert repaired.repaired and repaired.indexed == 2 and repaired.extra == [gone.experiment_id]
    assert LocalCatalog.open(store, state).check().ok


def test_fsck_rebuilds_a_damaged_index_and_says_so(ws, tmp_path):
    store = ws.store()
    record_numbered(ws, store, 1)
    state = str(tmp_path / "state")
    catalog = LocalCatalog.open(store, state)
    (Path(catalog.path or "") / files.HEAD).write_bytes(b"junk")
    found = LocalCatalog(store, state).check()
    assert found.ok and found.rebuilt and found.indexed == 1
    assert LocalCatalog(store, state).check().rebuilt is False


def test_a_crash_between_the_index_commit_and_its_head_means_a_rebuild(ws, tmp_path, monkeypatch):
    store = ws.store()
    first = record_numbered(ws, store, 1, title="Quokka census")
    state = str(tmp_path / "state")
    LocalCatalog.open(store, state)
    second = record_numbered(ws, store, 2, title="Wombat census")
    write = files.write_file

    def dies_before_the_head(path: str, data: bytes) -> None:
        if os.path.basename(path) == files.HEAD:
            raise SystemExit("killed")  # as a kill -9 would: the index is committed, no head
        write(path, data)

    monkeypatch.setattr(files, "write_file", dies_before_the_head)
    try:
        LocalCatalog.open(store, state)
    except SystemExit:
        pass
    monkeypatch.undo()
    assert len(LocalCatalog(store, state)) == 0  # the index is not the one its head names
    catalog = LocalCatalog.open(store, state)
    assert catalog.last_refresh == "build"
    assert hit_ids(catalog.search("census", 5)) == [second.experiment_id, first.experiment_id]


def test_a_damaged_table_means_one_rebuild_which_writes_it_again(ws, tmp_path):
    store = ws.store()
    _populate(ws, store, 3)
    state = str(tmp_path / "state")
    table = Path(LocalCatalog.open(store, state).path or "", files.TABLE)
    raw = bytearray(table.read_bytes())
    raw[-1] ^= 0xFF
    table.write_bytes(bytes(raw))
    settle(ws, store)  # a new cards version, the same cards: the rebuilt table is the same
    assert LocalCatalog.open(store, state).last_refresh == "build"
    card = record_numbered(ws, store, 11, title="Quoll dens")
    caught_up = LocalCatalog.open(store, state)
    assert caught_up.last_refresh == "log" and len(caught_up) == 4
    assert hit_ids(caught_up.search("quoll", 5)) == [card.experiment_id]
