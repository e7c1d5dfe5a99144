"""Live local catalogs: built once at start, refreshed cheaply when a project's cards change.

Another process (the CLI, a second worker) may record cards; the cards directory's mtime moves on
every card publication (an atomic rename), so one `stat` per search tells whether to look again,
and then only card files whose (inode, size, mtime) changed are parsed again.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from cards import ExperimentCardV1
from cas import CardStamp, Catalog, ProjectStore, SearchHit


@dataclass
class LiveCatalog:
    """One project's catalog, kept in step with its cards directory."""

    store: ProjectStore
    catalog: Catalog = field(init=False)
    skipped: int = field(default=0, init=False)
    _dir_stamp: int | None = field(default=None, init=False)
    _files: dict[str, CardStamp] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        cards = [card for card in self._read_changed() if card is not None]
        self.catalog = Catalog.build(cards, max_cards=self.store.limits.cards_per_project)

    @property
    def cards_dir(self) -> str:
        """The absolute path of the project's cards directory."""
        return self.store.local_path(self.store.layout.cards_dir)

    def refresh(self) -> None:
        """Parse the card files that changed since the last look (none changed: one stat)."""
        with self._lock:
            for card in self._read_changed():
                if card is not None:
                    self.catalog.put(card)

    def _read_changed(self) -> list[ExperimentCardV1 | None]:
        try:
            stamp = os.stat(self.cards_dir).st_mtime_ns
        except FileNotFoundError:
            return []
        if stamp == self._dir_stamp:
            return []
        self._dir_stamp = stamp
        changed: list[ExperimentCardV1 | None] = []
        for read in self.store.read_cards(self._files):
            if read.stamp is not None:
                self._files[read.name] = read.stamp
            if isinstance(read.card, ExperimentCardV1):
                changed.append(read.card)
            elif read.card is not None:
                self.skipped += 1  # malformed or unsupported: never crashes a search
        return changed

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """Refresh if the cards changed, then search (under the lock: puts may run meanwhile).

        Raises:
            InvalidInput: the query or limit is invalid.
        """
        self.refresh()
        with self._lock:
            return self.catalog.search(query, limit=limit)

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """A card by id, if indexed."""
        with self._lock:
            return self.catalog.get(experiment_id)

    def put(self, card: ExperimentCardV1) -> None:
        """Index a card this process just committed, without waiting for a refresh."""
        with self._lock:
            self.catalog.put(card)
