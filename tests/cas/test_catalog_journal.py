"""The catalog's journal: a start appends what changed; a torn or stale journal is never trusted."""

from __future__ import annotations

from pathlib import Path

from catalog_helpers import record_numbered, searchers, settle

from cas import Catalog, LocalCatalog
from cas._catalog_journal import JOURNAL_SUFFIX, read

QUERIES = ["cohort", "alpha", "beta gamma", "run 3", "t1", "unknown", "alpha cohort treatment"]


def _record(ws, store, n: int, **meta: object):
    meta.setdefault("title", ["Alpha cohort", "Beta response", "Gamma treatment"][n % 3])
    meta.setdefault("summary", f"run {n} alpha")
    meta.setdefault("tags", [f"t{n % 3}"])
    return record_numbered(ws, store, n, **meta)


def _paths(store, state: str) -> tuple[Path, Path]:
    path = Path(LocalCatalog(store, state).path or "")
    return path, Path(str(path) + JOURNAL_SUFFIX)


def _assert_ranks_like_a_fresh_build(catalog: LocalCatalog, store) -> None:
    fresh = Catalog.build(store.scan_cards().cards, max_cards=100)
    assert len(catalog) == len(fresh)
    for query in QUERIES:
        assert catalog.search(query, 5) == fresh.search(query, limit=5), query


def test_a_start_after_changes_appends_to_the_journal_and_leaves_the_file(ws, tmp_path):
    store = ws.store()
    for n in range(4):
        _record(ws, store, n)
    settle(ws, store)
    state = str(tmp_path / "state")
    LocalCatalog.open(store, state)
    path, journal = _paths(store, state)
    before = path.stat()
    assert not journal.exists()
    _record(ws, store, 4, title="Quokka census")
    (ws.project_dir(store) / "cards" / f"{_record(ws, store, 5).experiment_id}.json").unlink()
    settle(ws, store)
    LocalCatalog.open(store, state)
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert journal.stat().st_size < before.st_size
    loaded = LocalCatalog(store, state)  # the file and the journal, no look at the cards
    assert loaded.refresh() is False  # the journal's cards version is the directory's
    _assert_ranks_like_a_fresh_build(loaded, store)


def test_a_torn_journal_is_applied_up_to_its_last_whole_record(ws, tmp_path):
    store = ws.store()
    _record(ws, store, 0)
    state = str(tmp_path / "state")
    LocalCatalog.open(store, state)
    for n in (1, 2):  # two starts, two records
        _record(ws, store, n)
        LocalCatalog.open(store, state)
    path, journal = _paths(store, state)
    base, whole = path.read_bytes(), journal.read_bytes()
    sizes = set()
    for cut in range(len(whole) + 1):
        journal.write_bytes(whole[:cut])
        sizes.add(len(LocalCatalog(store, state)))
        if cut % 11 == 0 or cut == len(whole):  # a start mends it (and rewrites the file)
            _assert_ranks_like_a_fresh_build(LocalCatalog.open(store, state), store)
            path.write_bytes(base)
    assert sizes == {1, 2, 3}  # the file alone, then each whole record in turn
    flipped = bytearray(whole)
    flipped[-3] ^= 0xFF  # the last record fails its CRC: the first one still applies
    journal.write_bytes(bytes(flipped))
    assert len(LocalCatalog(store, state)) == 2
    catalog = LocalCatalog.open(store, state)  # caught up, and the journal folded in
    _assert_ranks_like_a_fresh_build(catalog, store)
    assert not journal.exists()


def test_a_journal_of_another_catalog_file_is_ignored(ws, tmp_path):
    store = ws.store()
    _record(ws, store, 0)
    state = str(tmp_path / "state")
    LocalCatalog.open(store, state)
    path, journal = _paths(store, state)
    gone = _record(ws, store, 1, title="Wombat survey")
    LocalCatalog.open(store, state)
    old_file, old_journal = path.read_bytes(), journal.read_bytes()
    assert [h.card.experiment_id for h in LocalCatalog(store, state).search("wombat", 5)] == [
        gone.experiment_id
    ]
    (ws.project_dir(store) / "cards" / f"{gone.experiment_id}.json").unlink()
    catalog = LocalCatalog.open(store, state)
    assert catalog.save()  # a whole new file: a new generation, and no journal
    assert not journal.exists()
    journal.write_bytes(old_journal)  # the journal of the older file, which added the card
    assert len(LocalCatalog(store, state)) == 1
    path.write_bytes(old_file)  # with its own file it applies again
    assert len(LocalCatalog(store, state)) == 2
    assert read(str(journal), b"\x00" * 8) == ([], 0, 0)


def test_processes_appending_together_leave_a_journal_of_whole_records(ws, tmp_path):
    store = ws.store()
    _record(ws, store, 100)
    state = str(tmp_path / "state")
    LocalCatalog.open(store, state)  # a file, so the workers append
    workers = searchers(ws.artifact_root, state, 12)
    cards = [_record(ws, store, n) for n in range(10)]  # while they load, append and search
    for card in cards[:3]:
        (ws.project_dir(store) / "cards" / f"{card.experiment_id}.json").unlink()
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0]
    path, journal = _paths(store, state)
    loaded = LocalCatalog(store, state)
    if journal.exists() and loaded._generation is not None:
        _, intact, size = read(str(journal), loaded._generation)
        assert intact == size  # no torn or interleaved record
    loaded.refresh()
    _assert_ranks_like_a_fresh_build(loaded, store)
    assert len(loaded) == 8
