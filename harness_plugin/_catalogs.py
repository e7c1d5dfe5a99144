"""Live local catalogs: loaded once at start, refreshed cheaply when a project's cards change.

Each is the project's persisted catalog (`cas.LocalCatalog`, under the configured state root):
a start loads it and looks only at card files that changed since it was saved. Another process
(the CLI, a second worker) may record cards; the store's cards version moves on every card
publication, so one `stat` per search tells whether to look again, and then only card files
whose stamp changed are parsed again. Hits are re-read from their card files.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from cards import ExperimentCardV1
from cas import LocalCatalog, SearchHit, Store

# A long-lived worker saves its catalog at most this often; a catalog saved late only costs the
# next start a re-stat. A save appends the changed cards to the catalog's journal, and folds
# the journal into the catalog file once it reaches this share of the file's size (a start
# never waits for that: it appends).
SAVE_INTERVAL_S = 60.0


@dataclass
class LiveCatalog:
    """One project's catalog, kept in step with its cards directory."""

    store: Store
    state_root: str | None = None  # None: kept in memory only
    catalog: LocalCatalog = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.catalog = LocalCatalog.open(self.store, self.state_root)

    @property
    def skipped(self) -> int:
        """Card files that are malformed, unsupported or misplaced."""
        return self.catalog.skipped

    def refresh(self) -> None:
        """Parse the card files that changed since the last look (none changed: one stat)."""
        with self._lock:
            self.catalog.refresh()
            self.catalog.save_if_changed(SAVE_INTERVAL_S, compact_share=LocalCatalog.COMPACT_SHARE)

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """Refresh if the cards changed, then search; hits are read from their card files.

        Raises:
            InvalidInput: the query or limit is invalid.
        """
        with self._lock:
            self.catalog.refresh()
            hits = self.catalog.search(query, limit)
            self.catalog.save_if_changed(SAVE_INTERVAL_S, compact_share=LocalCatalog.COMPACT_SHARE)
            return hits

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """A card by id, if indexed, as its file holds it now."""
        with self._lock:
            return self.catalog.get(experiment_id)

    def put(self, card: ExperimentCardV1) -> None:
        """Index a card this process just committed, without waiting for a refresh."""
        with self._lock:
            self.catalog.put(card)

    def save(self) -> bool:
        """Save the catalog now if it changed (e.g. at shutdown)."""
        with self._lock:
            return self.catalog.save_if_changed(compact_share=LocalCatalog.COMPACT_SHARE)
