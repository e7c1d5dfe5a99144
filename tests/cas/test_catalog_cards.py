"""Hit cards kept by their file stamp: a replaced, edited or removed card is never served stale."""

from __future__ import annotations

import os
import time
from pathlib import Path

from catalog_helpers import cards_dir, hit_ids, record_numbered, settle

from cas import LocalCatalog
from cas._catalog_cards import HitCards

LATER_NS = 60 * 10**9  # a clock a minute ahead: every file already written looks settled


def _later() -> int:
    return time.time_ns() + LATER_NS


def _catalog(ws, tmp_path, hit_cards: HitCards):
    store = ws.store()
    card = record_numbered(ws, store, 1, title="Quokka census", summary="counted at dawn")
    settle(ws, store)
    catalog = LocalCatalog(store, str(tmp_path / "state"), hit_cards=hit_cards)
    catalog.refresh()
    return catalog, card, cards_dir(ws, store) / f"{card.experiment_id}.json"


def _summaries(catalog: LocalCatalog) -> list[str]:
    return [hit.card.summary for hit in catalog.search("quokka", 5)]


def _tick_past(path: Path) -> None:
    """Return once the filesystem's clock stamps a ctime after `path`'s (a tick or two)."""
    probe = path.with_name("probe")
    while True:
        probe.write_bytes(b"")
        if probe.stat().st_ctime_ns > path.stat().st_ctime_ns:
            probe.unlink()
            return


def _rewrite_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Change the file's bytes without a rename (same inode), at the same size and mtime."""
    assert len(old) == len(new)
    before = path.stat()
    with path.open("r+b") as file:  # not truncated: the size never changes
        file.write(path.read_bytes().replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)


def test_a_settled_card_is_read_once_then_served_from_memory(ws, tmp_path):
    kept = HitCards(clock=_later)
    catalog, _, _ = _catalog(ws, tmp_path, kept)
    assert _summaries(catalog) == ["counted at dawn"] and kept.reads == 1
    assert _summaries(catalog) == ["counted at dawn"] and kept.reads == 1
    assert hit_ids(catalog.search("census", 5)) == hit_ids(catalog.search("quokka", 5))
    assert kept.reads == 1


def test_a_card_replaced_by_rename_is_read_again(ws, tmp_path):
    kept = HitCards(clock=_later)
    catalog, card, path = _catalog(ws, tmp_path, kept)
    assert _summaries(catalog) == ["counted at dawn"]
    replacement = path.with_name("staged")
    replacement.write_bytes(path.read_bytes().replace(b"at dawn", b"at dusk"))
    os.utime(replacement, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    os.replace(replacement, path)  # same size and mtime; another inode
    assert _summaries(catalog) == ["counted at dusk"] and kept.reads == 2


def test_a_same_size_rewrite_in_place_with_its_mtime_put_back_is_read_again(ws, tmp_path):
    kept = HitCards(clock=_later)
    catalog, _, path = _catalog(ws, tmp_path, kept)
    assert _summaries(catalog) == ["counted at dawn"]
    _tick_past(path)  # as a settled file is: the rewrite stamps a later ctime
    _rewrite_in_place(path, b"at dawn", b"at dusk")
    assert _summaries(catalog) == ["counted at dusk"] and kept.reads == 2


def test_a_card_written_within_the_racy_window_is_never_kept(ws, tmp_path):
    """A file just written may change again in the same clock tick without its stamp
    changing: it is read on every search until it has settled.

    The clock stands at the moment before the record, so every search happens "just after" the
    writes however slowly this runs (the wall clock would let a card settle after `RACY_NS`).
    """
    now = time.time_ns()
    kept = HitCards(clock=lambda: now)
    catalog, _, path = _catalog(ws, tmp_path, kept)
    assert _summaries(catalog) == ["counted at dawn"] and len(kept) == 0
    _rewrite_in_place(path, b"at dawn", b"at dusk")  # ctime may not move
    assert _summaries(catalog) == ["counted at dusk"]
    _rewrite_in_place(path, b"at dusk", b"at noon")
    assert _summaries(catalog) == ["counted at noon"] and kept.reads == 3


def test_a_card_rewritten_through_the_store_is_served_as_written(ws, tmp_path):
    kept = HitCards(clock=_later)
    catalog, card, _ = _catalog(ws, tmp_path, kept)
    assert [hit.card.index for hit in catalog.search("quokka", 5)] == [card.index]
    from cards import IndexState, IndexStatus

    status = IndexStatus(state=IndexState.QUEUED, attempts=3)
    catalog.store.update_index_status(card.experiment_id, lambda _: status)
    assert [hit.card.index for hit in catalog.search("quokka", 5)] == [status]


def test_a_removed_card_is_never_served(ws, tmp_path):
    kept = HitCards(clock=_later)
    catalog, card, path = _catalog(ws, tmp_path, kept)
    assert catalog.get(card.experiment_id) == card
    path.unlink()
    assert catalog.search("quokka", 5) == []
    assert catalog.get(card.experiment_id) is None


def test_a_symlink_in_place_of_a_kept_card_is_not_served(ws, tmp_path):
    kept = HitCards(clock=_later)
    catalog, _, path = _catalog(ws, tmp_path, kept)
    assert _summaries(catalog) == ["counted at dawn"]
    target = tmp_path / "elsewhere.json"
    os.replace(path, target)
    path.symlink_to(target)
    assert catalog.search("quokka", 5) == []


def test_the_kept_cards_are_bounded_least_recently_used_out(ws, tmp_path):
    kept = HitCards(max_cards=2, clock=_later)
    store = ws.store()
    cards = [record_numbered(ws, store, n, title=f"Numbat {n}") for n in range(3)]
    catalog = LocalCatalog(store, None, hit_cards=kept)
    catalog.refresh()
    for card in cards:
        assert catalog.get(card.experiment_id) == card
    assert len(kept) == 2 and kept.reads == 3
    assert catalog.get(cards[2].experiment_id) == cards[2] and kept.reads == 3
    assert catalog.get(cards[0].experiment_id) == cards[0] and kept.reads == 4
