"""The card log: a catalog finds changed cards without a stat each, and never trusts a bad log."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest
from catalog_helpers import cards_dir, hit_ids, record_numbered, settle
from conftest import SESSION, Workspace
from hypothesis import given, settings
from hypothesis import strategies as st

from cards import IndexState, IndexStatus
from cards.errors import StoreIOError
from cas import Catalog, LocalCatalog
from cas._card_log import HEADER_BYTES, MAX_LOG_BYTES, MAX_READ_BYTES, log_change, record
from cas._layout import CARDS_LOG
from cas._project import open_project

QUERIES = ["cohort", "quokka", "wombat", "alpha", "census", "beta gamma", "unknown"]

_WRITER = """
import sys
from cards import IndexState, IndexStatus, parse_metadata
from cas import ProjectStore, Provenance
root, rlm, session, worker, count = sys.argv[1:6]
store = ProjectStore(root, "trial-analysis")
for n in range(int(count)):
    fp = f"{int(worker):02d}{n:062d}"
    for title in ("Alpha cohort", "Wombat census"):  # a new card, then its rewrite
        meta = parse_metadata({"title": f"{title} w{worker}", "summary": "run", "source": "t",
                               "source_version": "v1", "query_fingerprint": fp})
        card = store.record(rlm, Provenance(session_id=session), meta, f"w{worker}-{n}.bin").card
    store.update_index_status(card.experiment_id, lambda _: IndexStatus(state=IndexState.PENDING))
"""


def _record(ws, store, n: int, **meta: object):
    meta.setdefault("title", "Alpha cohort")
    return record_numbered(ws, store, n, **meta)


def _log(ws, store) -> Path:
    return ws.project_dir(store) / CARDS_LOG


def _assert_equals_a_full_scan(catalog: LocalCatalog, store) -> None:
    """The catalog answers exactly as one built by listing and reading every card file."""
    full = LocalCatalog(store, None)
    full.refresh(force=True)
    fresh = Catalog(store.scan_cards().cards)
    assert (catalog.cards, catalog.skipped, len(catalog)) == (full.cards, full.skipped, len(full))
    assert catalog.index_states() == full.index_states()
    ids = [card.experiment_id for card in store.scan_cards().cards]
    for query in [*QUERIES, *ids]:
        assert catalog.search(query, 10) == fresh.search(query, limit=10), query


def _opened(ws, store, tmp_path) -> LocalCatalog:
    """A saved catalog of two cards, holding a mark in the store's card log."""
    _record(ws, store, 1, title="Quokka census")
    _record(ws, store, 2, title="Beta cohort")
    settle(ws, store)
    catalog = LocalCatalog.open(store, str(tmp_path / "state"))
    assert catalog.last_refresh == "build"  # the first look has no mark: every file
    return catalog


def test_a_record_by_another_process_is_found_through_the_log(ws, tmp_path):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    ws.export("w1-0.bin", b"from another process")
    argv = [str(ws.artifact_root), str(ws.rlm_root), SESSION, "1", "1"]
    subprocess.run([sys.executable, "-c", _WRITER, *argv], check=True, cwd=_repo())
    assert catalog.refresh() and catalog.last_refresh == "log"
    [hit] = catalog.search("wombat", 5)
    assert hit.card.index.state == IndexState.PENDING
    _assert_equals_a_full_scan(catalog, store)
    reloaded = LocalCatalog.open(store, str(tmp_path / "state"))  # its mark was saved
    assert reloaded.last_refresh in {"", "log"}  # "log" while the version is racily fresh
    assert hit_ids(reloaded.search("wombat", 5)) == hit_ids([hit])


def test_a_reused_inode_with_the_old_stamp_is_still_caught_through_the_log(ws, tmp_path):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    [card] = [hit.card for hit in catalog.search("quokka", 5)]
    path = cards_dir(ws, store) / f"{card.experiment_id}.json"
    before = path.stat()
    keep = ws.project_dir(store) / "keep"
    os.link(path, keep)  # the old inode lives on under another name
    with open_project(str(ws.artifact_root), store.layout, create=False) as project:
        assert project is not None
        with project.locked(), project.staging() as tmp_fd:
            # A logged writer whose published file gets the old inode, size and mtime.
            log_change(project.fd, path.name, tmp_fd)
            os.unlink(path)
            with open(keep, "r+b") as file:
                raw = file.read()
                file.seek(0)
                file.write(raw.replace(b"Quokka census", b"Wombat census"))
            os.utime(keep, ns=(before.st_atime_ns, before.st_mtime_ns))
            os.rename(keep, path)
    after = path.stat()
    stamp = (after.st_ino, after.st_size, after.st_mtime_ns)
    assert stamp == (before.st_ino, before.st_size, before.st_mtime_ns)
    # A stat of every file cannot tell; the log can.
    [read] = [read for read in store.read_cards({path.name: stamp}) if read.name == path.name]
    assert read.card is None
    assert catalog.refresh() and catalog.last_refresh == "log"
    assert hit_ids(catalog.search("wombat", 5)) == [card.experiment_id]
    assert catalog.search("quokka", 5) == []


def test_a_crash_between_the_intent_and_the_rename_leaves_a_correct_catalog(ws, tmp_path):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    [card] = [hit.card for hit in catalog.search("quokka", 5)]
    with open_project(str(ws.artifact_root), store.layout, create=False) as project:
        assert project is not None
        with project.locked(), project.staging() as tmp_fd:
            log_change(project.fd, card.experiment_id + ".json", tmp_fd)  # and then it dies
            log_change(project.fd, "exp_" + "b" * 52 + ".json", tmp_fd)  # never created
    _record(ws, store, 3, title="Platypus count")
    assert catalog.refresh() and catalog.last_refresh == "log"
    assert hit_ids(catalog.search("quokka", 5)) == [card.experiment_id]
    _assert_equals_a_full_scan(catalog, store)
    _record(ws, store, 1, title="Wombat census")  # the same card, rewritten for real
    assert catalog.refresh() and catalog.last_refresh == "log"
    assert hit_ids(catalog.search("wombat", 5)) == [card.experiment_id]
    _assert_equals_a_full_scan(catalog, store)


def _torn(log: Path) -> None:
    log.write_bytes(log.read_bytes()[:-1])


def _flipped(log: Path) -> None:
    raw = bytearray(log.read_bytes())
    raw[-5] ^= 0x01
    log.write_bytes(bytes(raw))


def _hostile(log: Path) -> None:
    body = b"../../../etc/passwd.json " + b"0" * 16
    with open(log, "ab") as file:
        file.write(body + b" %08x\n" % zlib.crc32(body))


def _not_a_card_name(log: Path) -> None:
    with open(log, "ab") as file:
        file.write(record("exp_" + "a" * 51 + ".json"))


def _truncated(log: Path) -> None:
    os.truncate(log, HEADER_BYTES)


def _replaced(log: Path) -> None:
    copy = log.with_name("copy")
    copy.write_bytes(log.read_bytes())
    os.replace(copy, log)  # the same bytes, another file


def _missing(log: Path) -> None:
    log.unlink()


def _symlink(log: Path) -> None:
    target = log.with_name("elsewhere")
    target.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(target)


def _oversized(log: Path) -> None:
    os.truncate(log, MAX_READ_BYTES + 1)


DAMAGES = [_torn, _flipped, _hostile, _not_a_card_name, _truncated, _replaced, _missing,
           _symlink, _oversized]  # fmt: skip


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda damage: damage.__name__.strip("_"))
def test_a_damaged_log_falls_back_to_a_full_scan_with_the_same_result(ws, tmp_path, damage):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    _record(ws, store, 3, title="Wombat census")
    damage(_log(ws, store))
    assert catalog.refresh() and catalog.last_refresh == "scan"
    assert len(hit_ids(catalog.search("wombat", 5))) == 1
    _assert_equals_a_full_scan(catalog, store)
    _record(ws, store, 4, title="Platypus count")  # a healthy log again from here
    assert catalog.refresh() and catalog.last_refresh in {"log", "scan"}
    _record(ws, store, 5, title="Echidna survey")
    assert catalog.refresh() and catalog.last_refresh == "log"
    _assert_equals_a_full_scan(catalog, store)


def test_a_log_truncated_and_written_again_past_the_mark_is_not_trusted(ws, tmp_path):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    log = _log(ws, store)
    os.truncate(log, log.stat().st_size - len(record("exp_" + "a" * 52 + ".json")))
    for n in (3, 4):  # as after a crash lost the last record: new records past the old mark
        _record(ws, store, n, title="Wombat census")
    assert catalog.refresh() and catalog.last_refresh == "scan"
    _assert_equals_a_full_scan(catalog, store)


def test_a_full_log_is_replaced_by_a_new_generation(ws, tmp_path):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    log = _log(ws, store)
    line = record("exp_" + "c" * 52 + ".json")
    with open(log, "ab") as file:  # nearly full (of a card that does not exist)
        file.write(line * ((MAX_LOG_BYTES - log.stat().st_size) // len(line)))
    before = log.stat()
    _record(ws, store, 3, title="Wombat census")
    after = log.stat()
    assert after.st_ino != before.st_ino and after.st_size == HEADER_BYTES + len(line)
    assert catalog.refresh() and catalog.last_refresh == "scan"  # once, for the new log
    _record(ws, store, 4, title="Platypus count")
    assert catalog.refresh() and catalog.last_refresh == "log"
    _assert_equals_a_full_scan(catalog, store)


def test_a_symlinked_log_is_replaced_never_written_through(ws, tmp_path):
    store = ws.store()
    _opened(ws, store, tmp_path)
    target = tmp_path / "outside"
    target.write_bytes(b"precious")
    log = _log(ws, store)
    log.unlink()
    log.symlink_to(target)
    _record(ws, store, 3)
    assert target.read_bytes() == b"precious"
    assert not log.is_symlink() and log.stat().st_size > HEADER_BYTES


def test_a_card_is_not_written_when_its_change_cannot_be_logged(ws, tmp_path):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    [card] = [hit.card for hit in catalog.search("quokka", 5)]
    log = _log(ws, store)
    log.unlink()
    log.mkdir()
    (log / "x").write_bytes(b"")  # neither appendable, replaceable nor removable
    before = (cards_dir(ws, store) / f"{card.experiment_id}.json").read_bytes()
    with pytest.raises(StoreIOError):
        store.update_index_status(
            card.experiment_id, lambda _: IndexStatus(state=IndexState.PENDING)
        )
    assert (cards_dir(ws, store) / f"{card.experiment_id}.json").read_bytes() == before


def test_writers_in_three_processes_and_a_refreshing_reader_end_equal_to_a_full_scan(ws, tmp_path):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    for worker in range(3):
        for n in range(6):
            ws.export(f"w{worker}-{n}.bin", f"worker {worker} result {n}".encode())
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER,
                str(ws.artifact_root),
                str(ws.rlm_root),
                SESSION,
                str(worker),
                "6",
            ],
            cwd=_repo(),
        )  # fmt: skip
        for worker in range(3)
    ]
    ways = set()
    while any(writer.poll() is None for writer in writers):
        catalog.refresh()
        ways.add(catalog.last_refresh)
    assert [writer.wait() for writer in writers] == [0, 0, 0]
    catalog.refresh()
    assert "log" in ways | {catalog.last_refresh} and catalog.cards == 2 + 18
    _assert_equals_a_full_scan(catalog, store)


def _repo() -> Path:
    return Path(__file__).parents[2]


OPS = st.lists(
    st.tuples(
        st.sampled_from(["record", "replace", "delete", "corrupt", "rotate", "refresh"]),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=30)
@given(OPS)
def test_a_log_driven_refresh_always_equals_a_forced_full_refresh(ops):
    with tempfile.TemporaryDirectory() as root:
        ws = Workspace(Path(root), Path(root) / "artifacts", Path(root) / "rlm")
        ws.rlm_root.mkdir()
        store = ws.store()
        _record(ws, store, 0, title="Quokka census")
        catalog = LocalCatalog.open(store, str(Path(root) / "state"))
        for step, (op, n) in enumerate(ops):
            if op == "record" or (op == "replace" and n % 2):
                _record(ws, store, n, title=f"Wombat census {step}")
            elif op == "replace":  # the indexer's rewrite of a card that exists
                for card in store.scan_cards().cards[:1]:
                    store.update_index_status(
                        card.experiment_id, lambda _: IndexStatus(state=IndexState.QUEUED)
                    )
            elif op == "delete":
                for path in sorted(cards_dir(ws, store).glob("*.json"))[n : n + 1]:
                    path.unlink()
            elif op == "corrupt" and _log(ws, store).exists():
                [_torn, _flipped, _hostile, _truncated, _replaced, _missing][n](_log(ws, store))
            elif op == "rotate" and _log(ws, store).exists():
                line = record("exp_" + "d" * 52 + ".json")
                with open(_log(ws, store), "ab") as file:
                    file.write(line * ((MAX_LOG_BYTES - file.tell()) // len(line)))
            catalog.refresh()
            _assert_equals_a_full_scan(catalog, store)


def test_a_short_append_starts_a_new_log_of_a_new_generation(ws, tmp_path, monkeypatch):
    store = ws.store()
    catalog = _opened(ws, store, tmp_path)
    before = _log(ws, store).stat()
    real_write = os.write
    torn: list[bytes] = []

    def disk_full_once(fd: int, data) -> int:  # fakes the OS: the first record half-written
        if not torn and bytes(data[:4]) == b"exp_" and bytes(data[-1:]) == b"\n":
            torn.append(bytes(data))
            return real_write(fd, bytes(data[: len(data) // 2]))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", disk_full_once)
    _record(ws, store, 3, title="Wombat census")
    monkeypatch.undo()
    after = _log(ws, store).stat()
    assert torn and after.st_ino != before.st_ino
    assert _log(ws, store).read_bytes().endswith(torn[0])  # the record, whole, in the new log
    assert catalog.refresh() and catalog.last_refresh == "scan"
    _assert_equals_a_full_scan(catalog, store)
