"""Live local catalogs: opened once at start, refreshed cheaply when a project's cards change.

Each is the project's catalog (`cas.LocalCatalog`, a tantivy index under the configured state
root): a start opens it and indexes only card files that changed since it was last written.
Another process (the CLI, a second worker) may record cards; the store's cards version moves on
every card publication, so one `stat` per search tells whether to look again, and then only the
card files the card log names are parsed. Hits are re-read from their card files.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from cards import ExperimentCardV1
from cas import LocalCatalog, SearchHit, Store


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
        """Index the card files that changed since the last look (none changed: one stat)."""
        with self._lock:
            self.catalog.refresh()

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """Refresh if the cards changed, then search; hits are read from their card files.

        Raises:
            InvalidInput: the query or limit is invalid.
        """
        with self._lock:
            self.catalog.refresh()
            return self.catalog.search(query, limit)

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """A card by id, if indexed, as its file holds it now."""
        with self._lock:
            return self.catalog.get(experiment_id)

    def put(self, card: ExperimentCardV1) -> None:
        """Index a card this process just committed, without waiting for the next search."""
        self.refresh()  # found through the card log
