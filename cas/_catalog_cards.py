"""Parsed hit cards kept by their file's stamp, so a long-lived host re-reads only changed files.

A search's hits are served as their card files hold them now. Reading and validating a card
costs ~90 µs and a stat ~5 µs, so a host that keeps the cards it has read (`HIT_CARDS`, one per
process, at most `MAX_CARDS`, least recently used out) stats each hit and reads only those whose
stamp changed, or that it has not seen.

The stamp is (device, inode, size, mtime_ns, ctime_ns), taken before the file is read. Any
write to a file, or rename over its name, sets the ctime of the inode found there to the
current time. A card is kept only if its ctime was more than `RACY_NS` in the past before the
stat: any later change then stamps a newer ctime, even within one tick of the filesystem's coarse
clock (Git's "racily clean" rule), and the card is read again. A card that changed between the
stat and the read is kept under a stamp no stat will show again. A removed file fails its stat,
and the hit is dropped as the store's read drops it. Only a local store's files are kept: a
bucket's cards have no cheap stamp, and are read each time.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cas._layout import CARD_SUFFIX

if TYPE_CHECKING:
    from cards.card import ExperimentCardV1
    from cas._store import Store

__all__ = ["HIT_CARDS", "MAX_CARDS", "HitCards"]

# ~3 KB each in memory: at most ~12 MB.
MAX_CARDS = 4096

Stamp = tuple[int, int, int, int, int]


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class HitCards:
    """Cards read from their files, kept by path and stamp (thread-safe)."""

    def __init__(self, max_cards: int = MAX_CARDS, clock: Callable[[], int] = time.time_ns) -> None:
        """Keep at most `max_cards`; `clock` is the wall clock in ns (tests move it on)."""
        self._max = max_cards
        self._clock = clock
        self._kept: OrderedDict[str, tuple[Stamp, ExperimentCardV1]] = OrderedDict()
        self._lock = threading.Lock()
        self.reads = 0  # cards read from their files (the rest were kept)

    def __len__(self) -> int:
        return len(self._kept)

    def load(self, store: Store, ids: Sequence[str]) -> list[ExperimentCardV1 | None]:
        """Each card as its file holds it now; None for one absent or unusable."""
        from cas._local_store import RACY_NS, ProjectStore  # loaded already for a local store

        if not self._max or not isinstance(store, ProjectStore):
            return store.load_cards(ids)
        cards_dir = store.local_path(store.layout.cards_dir)
        settled = self._clock() - RACY_NS  # before the stats
        paths = [f"{cards_dir}/{key}{CARD_SUFFIX}" for key in ids]
        stamps = [_stamp(path) for path in paths]
        found: list[ExperimentCardV1 | None] = []
        with self._lock:
            for path, stamp in zip(paths, stamps, strict=True):
                kept = self._kept.get(path)
                if kept is not None and kept[0] == stamp:
                    self._kept.move_to_end(path)
                    found.append(kept[1])
                else:
                    found.append(None)
        unread = [n for n, card in enumerate(found) if card is None and stamps[n] is not None]
        if not unread:
            return found
        self.reads += len(unread)
        for n, card in zip(unread, store.load_cards([ids[n] for n in unread]), strict=True):
            found[n] = card
            stamp = stamps[n]
            if card is not None and stamp is not None and stamp[4] < settled:
                self._keep(paths[n], stamp, card)
        return found

    def _keep(self, path: str, stamp: Stamp, card: ExperimentCardV1) -> None:
        with self._lock:
            self._kept[path] = (stamp, card)
            self._kept.move_to_end(path)
            while len(self._kept) > self._max:
                self._kept.popitem(last=False)


HIT_CARDS = HitCards()
