"""`LocalCatalog`: one project's search index, kept under the state root, caught up with the cards.

Keeping up (`refresh`): an unchanged cards version of the store costs one stat. A changed one
takes the catalog's writer lock (one writer; searches never take it), reads the card log since the
index's mark through the store (`Store.read_changed_cards`: only the changed files are parsed)
and commits the changes. Any crash leaves the head naming the last whole commit, or an index that
no longer matches its manifest, which is rebuilt from the card files; so is a missing,
foreign-version or damaged one (`_catalog_files`). Hits are served as their card files hold them
now (`_catalog_cards`); one that is gone or no longer matches makes the catalog catch up and rank
again. A read-only catalog (`save=False`) writes nothing: it uses the saved index while it is
current, and otherwise builds one in memory.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from cards.errors import ArtifactError, StoreIOError
from cas import _catalog_files as files
from cas import _catalog_table as card_table
from cas._catalog import SearchHit, checked_query, confirmed
from cas._catalog_cards import HIT_CARDS, HitCards
from cas._catalog_engine import BUILD_HEAP, FORMAT, CatalogDamaged, Engine, Writer
from cas._catalog_files import Head
from cas._catalog_table import Changes, Table
from cas._layout import CARD_SUFFIX

if TYPE_CHECKING:
    from cards.card import ExperimentCardV1
    from cas._card_log import LogMark
    from cas._cardfiles import CardChanges
    from cas._store import Store

__all__ = ["CATALOG_DIR", "CatalogCheck", "LocalCatalog"]

CATALOG_DIR = "catalog"


class CatalogCheck(msgspec.Struct, frozen=True):
    """What `fsck` found comparing the index with the card files (experiment ids only)."""

    indexed: int
    missing: list[str]  # valid cards the index lacks
    extra: list[str]  # indexed cards no valid card file holds
    stale: list[str]  # indexed as another version than their file's
    rebuilt: bool = False  # the saved index was missing or damaged, and was built afresh
    repaired: bool = False

    @property
    def ok(self) -> bool:
        """Whether the index holds exactly what the card files say."""
        return not (self.missing or self.extra or self.stale)


class LocalCatalog:
    """One project's catalog under the state root (not thread-safe: the caller serialises)."""

    def __init__(
        self,
        store: Store,
        state_root: str | None,
        *,
        save: bool = True,
        hit_cards: HitCards | None = HIT_CARDS,
    ) -> None:
        """Open the project's saved index if it is what we wrote; `refresh` brings it up to date.

        Args:
            store: The project's store (the source of truth).
            state_root: The configured state root; None keeps the index in memory only.
            save: Whether the index may be written (False for a notebook: nothing is).
            hit_cards: Where hits read from their card files are kept (the process's); None
                reads every hit from its file.
        """
        self.store = store
        self._hit_cards = HitCards(max_cards=0) if hit_cards is None else hit_cards
        self.path: str | None = None
        if state_root is not None:
            self.path = os.path.join(state_root, CATALOG_DIR, store.layout.key)
        self._writable = save and self.path is not None
        self._identity = (FORMAT, str(store.project_id), store.limits.cards_per_project)
        self._head: Head | None = None
        self._head_raw = b""
        self._engine: Engine | None = None
        self._table: Table | None = None
        self._table_digest = ""
        self._distrust = b""  # the head whose index failed to answer: rebuilt, never reopened
        self.last_refresh = ""  # how the last refresh looked: "log", "scan", "build" or ""
        if self.path is not None:
            self._load()

    @classmethod
    def open(cls, store: Store, state_root: str | None, *, save: bool = True) -> LocalCatalog:
        """The project's catalog, brought up to date."""
        catalog = cls(store, state_root, save=save)
        catalog.refresh()
        return catalog

    # -- what it knows ---------------------------------------------------------------------

    def __len__(self) -> int:
        return 0 if self._engine is None else len(self._engine)

    @property
    def cards(self) -> int:
        """Valid cards (indexed or beyond the bound)."""
        return 0 if self._head is None else self._head.cards

    @property
    def skipped(self) -> int:
        """Card files that are malformed, unsupported or misplaced."""
        return 0 if self._head is None else self._head.skipped

    def index_states(self) -> dict[str, int]:
        """How many valid cards are in each index state, by state name."""
        return {} if self._head is None else dict(sorted(self._head.states.items()))

    # -- keeping up ------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> bool:
        """Catch up with the card files; whether the index changed.

        Raises:
            StoreIOError: the index could not be written (or rebuilt).
        """
        token = self.store.cards_version()  # before any read: a change during it moves it
        if not force and self._current(token):
            self.last_refresh = ""
            return False
        if self._writable and self.path is not None:
            try:
                files.make_dir(self.path)
                with files.locked(self.path):
                    self._load()  # another process may have caught up, or rebuilt
                    return self._catch_up(token, force)
            except StoreIOError:
                self._writable = False  # a cache that cannot be written still answers
        if self._head is not None and self._head.generation:
            self._engine = self._head = self._table = None  # saved and behind: not ours to fix
        return self._catch_up(token, force)

    def _current(self, token: str | None) -> bool:
        head = self._head
        return self._engine is not None and head is not None and token == head.token is not None

    def _catch_up(self, token: str | None, force: bool) -> bool:
        """Index the card files changed since the head's log mark; whether the index changed."""
        self.last_refresh = ""
        if not force and self._current(token):
            return False
        table, head, engine = self._loaded_table(), self._head, self._engine
        if table is None or head is None or engine is None:
            return self._rebuild(token)
        changes, found = self._changes(table, None if force else head.mark)
        self.last_refresh = "log" if found.logged else "scan"
        try:
            if changes.puts or changes.deletes:
                with engine.writing() as writer:
                    _write(writer, changes)
        except CatalogDamaged:
            return self._rebuild(token)
        if changes.changed or (token, found.mark) != (head.token, head.mark):
            self._save(table, token, found.mark)
        return changes.changed

    def _rebuild(self, token: str | None) -> bool:
        """Index every card file afresh (streamed: one parsed card at a time)."""
        self.last_refresh = "build"
        generation = files.new_generation(self.path) if self._writable and self.path else ""
        index_dir = os.path.join(self.path or "", generation)
        engine = Engine.create(index_dir if generation else None)
        table: Table = {}
        with engine.writing(BUILD_HEAP) as writer:
            for read in self.store.read_cards():
                card_table.record(table, (read,), Changes())
                if read.card is not None and not isinstance(read.card, ArtifactError):
                    table[read.name].indexed = True
                    writer.add(read.card)
            # The cards changed during the scan, and the log mark the index is true of.
            changes, found = self._changes(table, None)
            _write(writer, changes)
        self._engine = engine
        self._save(table, token, found.mark, generation)
        return True

    def _changes(self, table: Table, since: LogMark | None) -> tuple[Changes, CardChanges]:
        """Record the card files changed since `since` in `table`; what the index must do."""
        found = self.store.read_changed_cards(since, card_table.stamps(table))
        changes = Changes()
        card_table.record(table, found.reads, changes)
        card_table.forget(table, set(table) - found.names, changes)
        missing = card_table.bound(table, self._identity[2], changes)
        for key, card in zip(missing, self.store.load_cards(missing), strict=True):
            if card is None:
                table[key + CARD_SUFFIX].indexed = False
            else:
                changes.puts[key] = card
        return changes, found

    # -- on disk ---------------------------------------------------------------------------

    def _save(
        self, table: Table, token: str | None, mark: LogMark | None, generation: str | None = None
    ) -> None:
        """Record what the index now holds: the table (if it changed), then the head."""
        previous = self._head
        if generation is None:
            generation = "" if previous is None else previous.generation
        cards, skipped, states = card_table.counts(table)
        head = Head(*self._identity, generation, {}, "", token, mark, cards, skipped, states)
        self._table = table
        if self._writable and self.path is not None:
            index_dir = os.path.join(self.path, generation)
            old = {} if previous is None or previous.generation != generation else previous.manifest
            head.manifest = files.manifest(index_dir, old)
            raw_table = files.encode(table)
            head.table = files.digest_of(raw_table)
            if head.table != self._table_digest:  # not what the table file holds, as we know it
                files.write_file(os.path.join(self.path, files.TABLE), raw_table)
                self._table_digest = head.table
            self._head_raw = files.encode(head)
            files.write_file(os.path.join(self.path, files.HEAD), self._head_raw)
            if previous is None or previous.generation != generation:
                files.remove_others(self.path, generation)
        self._head = head

    def _load(self) -> None:
        """Open the saved index, unless it is open already, if its head and files are ours."""
        assert self.path is not None
        raw = files.read_file(os.path.join(self.path, files.HEAD), files.MAX_HEAD_BYTES)
        if raw == self._head_raw and self._engine is not None:
            return
        self._engine = self._head = self._table = None
        head = None if raw is None or raw == self._distrust else files.decode(raw, Head)
        if head is None or (head.format, head.project, head.max_cards) != self._identity:
            return
        if not files.GENERATION.fullmatch(head.generation):
            return
        index_dir = os.path.join(self.path, head.generation)
        if not files.verify(index_dir, head.manifest):
            return
        try:
            engine = Engine.open(index_dir)
        except CatalogDamaged:
            return
        if len(engine) != min(head.cards, head.max_cards):
            return  # not the index this head was written with
        self._head, self._head_raw, self._engine = head, raw or b"", engine
        if head.table != self._table_digest:
            self._table = None

    def _loaded_table(self) -> Table | None:
        """The table the head names (read from disk once); None if it is not that one."""
        if self._table is not None or self._head is None or self.path is None:
            return self._table
        raw = files.read_file(os.path.join(self.path, files.TABLE), files.MAX_TABLE_BYTES)
        if raw is None or files.digest_of(raw) != self._head.table:
            return None
        table = files.decode(raw, Table)
        if table is None or not files.valid_table(table):
            return None
        self._table, self._table_digest = table, self._head.table
        return self._table

    # -- fsck ------------------------------------------------------------------------------

    def check(self, *, repair: bool = False) -> CatalogCheck:
        """Compare the index, caught up as a search would, with every card file read afresh.

        A damaged saved index is rebuilt by the catch-up (reported, not a problem); cards
        the index holds differently from their files are. `repair` rebuilds the index from
        the card files whatever was found (it also mends what a comparison of ids cannot see,
        such as postings of an index damaged and given matching checksums); the findings are
        those from before.
        """
        rebuilt = self.refresh() and self.last_refresh == "build"
        expected = self._expected()
        actual = {} if self._engine is None else self._engine.all_ids()
        found = CatalogCheck(
            indexed=len(actual),
            missing=sorted(expected.keys() - actual.keys()),
            extra=sorted(actual.keys() - expected.keys()),
            stale=sorted(k for k in expected.keys() & actual.keys() if expected[k] != actual[k]),
            rebuilt=rebuilt,
        )
        if repair:
            self._rebuild_now()
            return msgspec.structs.replace(found, repaired=True, indexed=len(self))
        return found

    def _expected(self) -> dict[str, int]:
        """Experiment id -> `updated` of the newest `cards_per_project` valid card files."""
        table: Table = {}
        for read in self.store.read_cards():
            card_table.record(table, (read,), Changes())
        card_table.bound(table, self._identity[2], Changes())
        return {k.removesuffix(CARD_SUFFIX): row.updated for k, row in table.items() if row.indexed}

    # -- search ----------------------------------------------------------------------------

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """Exact matches, then BM25 matches, each re-read from its card file.

        Call `refresh` first to see other processes' changes. A hit whose file is gone or no
        longer matches means the index is behind: it catches up and ranks again, once; an index
        that fails to answer is rebuilt from the card files.

        Raises:
            InvalidInput: the query is blank or too long, or `limit` is below 1.
            StoreIOError: the index could not be rebuilt.
        """
        text = checked_query(query, limit)
        hits: list[SearchHit] = []
        for attempt in range(3):
            try:
                ranking = [] if self._engine is None else self._engine.ranked(text, limit)
            except CatalogDamaged:
                if attempt == 2:
                    raise
                self._rebuild_now()
                continue
            cards = self._hit_cards.load(self.store, [key for key, _, _ in ranking])
            hits = confirmed(ranking, cards, text)
            if len(hits) == len(ranking) or attempt == 2:
                break
            # Behind the card files: catch up; still behind after that: not what we wrote.
            if attempt == 0 and self.refresh(force=True):
                continue
            self._rebuild_now()
        return hits

    def _rebuild_now(self) -> None:
        """Distrust the current index: the next refresh builds one from the card files."""
        self._distrust, self._engine = self._head_raw or b"-", None
        self.refresh(force=True)

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """The indexed card with this id, as its file holds it now; None if not indexed."""
        if self._engine is None or not self._engine.has(experiment_id):
            return None
        return self._hit_cards.load(self.store, [experiment_id])[0]


def _write(writer: Writer, changes: Changes) -> None:
    for key in changes.deletes:
        writer.delete(key)
    for card in changes.puts.values():
        writer.put(card)
