"""Live local catalogs: built once at start, refreshed cheaply when a project's cards change.

Another process (the CLI, a second worker) may record cards; the cards directory's mtime moves on
every card publication (an atomic rename), so one `stat` per search tells whether to look again.
Only changed card files are parsed again.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from cards import ArtifactError, ExperimentCardV1, parse_experiment_id
from cas import ProjectStore
from cas._catalog import Catalog, SearchHit

_Stamp = tuple[int, int, int]  # (inode, size, mtime_ns) of one card file


@dataclass
class LiveCatalog:
    """One project's catalog, kept in step with its cards directory."""

    store: ProjectStore
    catalog: Catalog = field(init=False)
    skipped: int = field(default=0, init=False)
    _dir_stamp: int | None = field(default=None, init=False)
    _files: dict[str, _Stamp] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.catalog = Catalog(max_cards=self.store.limits.cards_per_project)
        self.refresh()

    @property
    def cards_dir(self) -> str:
        """The absolute path of the project's cards directory."""
        layout = self.store.layout
        return os.path.join(self.store.artifact_root, *layout.root, *layout.cards_dir)

    def refresh(self) -> None:
        """Parse the card files that changed since the last refresh (none: one stat)."""
        with self._lock:
            try:
                stamp = os.stat(self.cards_dir).st_mtime_ns
            except FileNotFoundError:
                return
            if stamp == self._dir_stamp:
                return
            self._dir_stamp = stamp
            for entry in os.scandir(self.cards_dir):
                self._consider(entry)

    def _consider(self, entry: os.DirEntry[str]) -> None:
        if not entry.name.endswith(".json") or not entry.is_file(follow_symlinks=False):
            return
        st = entry.stat(follow_symlinks=False)
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self._files.get(entry.name) == stamp:
            return
        self._files[entry.name] = stamp
        try:
            card = self.store.load_card(parse_experiment_id(entry.name.removesuffix(".json")))
        except ArtifactError:
            self.skipped += 1  # malformed or unsupported: never crashes a search
            return
        self.catalog.put(card)

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
