"""The local card catalog: exact lookups, then BM25 ranking with English stemming, over one project.

The index is tantivy's (`_catalog_engine`, the only module that imports it), a cache of the card
files, which stay the truth: every hit is re-read from its file, and a hit whose file is gone or no
longer matches is never returned. `Catalog` holds parsed cards in memory (the demo, tests);
`LocalCatalog` is a project's index kept under the state root (`_catalog_files`).

Ranking: exact matches (experiment id, artifact id, query fingerprint, tag by casefold, source
version) come first with score 1.0, newest first. Lexical hits follow, ranked by BM25 over the
stemmed words of title and tags (counted twice), summary, columns and source; scores are divided
by the best lexical score of the query, so they lie in (0, 1]. Ties go to the most recently updated
card, then to the smaller experiment id. A word ending in `*` also finds the words it begins.

Keeping up (`LocalCatalog.refresh`): an unchanged cards version of the store costs one stat. A
changed one takes the catalog's writer lock (one writer; searches never take it), reads the card
log since the index's mark through the store (`CardSource.read_changed_cards`: only the changed
files are parsed) and commits the changes. Any crash leaves the head naming the last whole commit,
or an index that no longer matches its manifest, which is rebuilt from the card files; so is a
missing, foreign-version or damaged one. A read-only catalog (`save=False`) writes nothing: it uses
the saved index while it is current, and otherwise builds one in memory.
"""

from __future__ import annotations

import heapq
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import msgspec

from cards.errors import ArtifactError, InvalidInput, StoreIOError
from cas import _catalog_files as files
from cas._card_log import LogMark
from cas._catalog_engine import FORMAT, CatalogDamaged, Engine, Writer, order_key
from cas._catalog_files import Head, Row, Table
from cas._layout import CARD_SUFFIX

if TYPE_CHECKING:
    from cards import Limits, ProjectId
    from cards.card import ExperimentCardV1
    from cas._cardfiles import CardChanges, CardRead, CardStamp
    from cas._layout import ProjectLayout

__all__ = [
    "EXACT_KINDS",
    "MAX_QUERY_CHARS",
    "Catalog",
    "CatalogCheck",
    "LocalCatalog",
    "SearchHit",
]

CATALOG_DIR = "catalog"
MAX_QUERY_CHARS = 1_000
EXACT_KINDS = ("experiment_id", "artifact_id", "query_fingerprint", "tag", "source_version")


class SearchHit(msgspec.Struct, frozen=True):
    """One search result.

    Attributes:
        card: The matching card.
        score: In [0, 1]; exact matches score 1.0, the best lexical match at most 1.0.
        exact: The exact-match kinds that hit, in `EXACT_KINDS` order; empty for a lexical hit.
    """

    card: ExperimentCardV1
    score: float
    exact: tuple[str, ...]


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


class CardSource(Protocol):
    """What the catalog reads of a store: its cards, their changes and their version."""

    limits: Limits
    layout: ProjectLayout

    @property
    def project_id(self) -> ProjectId:
        """The project the store serves."""
        ...

    def cards_version(self) -> str | None:
        """A token that changes with every card file change; None: look at the files."""
        ...

    def read_cards(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card file; those whose stamp equals `unchanged[name]` are not parsed."""
        ...

    def read_changed_cards(
        self, since: LogMark | None, known: Mapping[str, CardStamp]
    ) -> CardChanges:
        """The card files changed since the card log mark `since` (None: every file)."""
        ...

    def load_cards(self, experiment_ids: Sequence[str]) -> list[ExperimentCardV1 | None]:
        """Read and validate several cards; None for an absent or unusable one."""
        ...


def exact_kinds(card: ExperimentCardV1, text: str) -> tuple[str, ...]:
    """The kinds of exact match `text` makes with `card`, in `EXACT_KINDS` order."""
    folded = text.casefold()
    values = (card.experiment_id, card.artifact.artifact_id, card.query_fingerprint)
    kinds = [kind for kind, value in zip(EXACT_KINDS, values, strict=False) if value == text]
    if any(tag.casefold() == folded for tag in card.tags):
        kinds.append("tag")
    if card.source_version == text:
        kinds.append("source_version")
    return tuple(kinds)


def checked_query(query: str, limit: int) -> str:
    """The query stripped.

    Raises:
        InvalidInput: the query is blank or longer than `MAX_QUERY_CHARS`, or `limit` is
            below 1.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput("limit must be a positive integer")
    if not isinstance(query, str) or len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query must be a string of at most {MAX_QUERY_CHARS} characters")
    text = query.strip()
    if not text:
        raise InvalidInput("query must not be blank")
    return text


def ranked(engine: Engine, text: str, limit: int) -> list[tuple[str, float, bool]]:
    """(experiment id, score, exact) of the best `limit` hits: exact ones first."""
    hits = [(key, 1.0, True) for key in engine.exact(text, limit)]
    if len(hits) < limit:
        lexical = engine.lexical(text, limit - len(hits), skip_exact=bool(hits))
        hits += [(key, score, False) for key, score in lexical]
    return hits


def _hit(card: ExperimentCardV1 | None, score: float, exact: bool, text: str) -> SearchHit | None:
    """The hit, unless its card is gone or no longer makes the exact match it was found by."""
    if card is None:
        return None
    kinds = exact_kinds(card, text) if exact else ()
    return SearchHit(card, score, kinds) if kinds or not exact else None


def newest(cards: Iterable[ExperimentCardV1], count: int) -> list[ExperimentCardV1]:
    """The `count` most recently updated cards (ties: the smaller experiment id)."""
    return heapq.nsmallest(count, cards, key=_recency)


def _recency(card: ExperimentCardV1) -> tuple[int, str]:
    return (-order_key(card)[0], card.experiment_id)


class Catalog:
    """An in-memory index of at most `max_cards` parsed cards of one project."""

    def __init__(self, *, max_cards: int, skipped: int = 0) -> None:
        """Create an empty catalog; `build` is the usual way to get one.

        Raises:
            InvalidInput: `max_cards` is below 1 or `skipped` is negative.
        """
        if max_cards < 1 or skipped < 0:
            raise InvalidInput("max_cards must be positive and skipped not negative")
        self._max_cards = max_cards
        self._skipped = skipped
        self._overflow = 0
        self._cards: dict[str, ExperimentCardV1] = {}
        self._engine = Engine.memory()

    @classmethod
    def build(
        cls, cards: Iterable[ExperimentCardV1], *, max_cards: int, skipped: int = 0
    ) -> Catalog:
        """Index the newest `max_cards` distinct cards; count the rest in `overflow`.

        Of two cards with one experiment id, the later one in `cards` wins, as with `put`.

        Raises:
            InvalidInput: `max_cards` is below 1 or `skipped` is negative.
        """
        catalog = cls(max_cards=max_cards, skipped=skipped)
        latest = {card.experiment_id: card for card in cards}
        kept = newest(latest.values(), max_cards)
        catalog._overflow = len(latest) - len(kept)
        with catalog._engine.writing() as writer:
            for card in kept:
                catalog._cards[card.experiment_id] = card
                writer.put(card)
        return catalog

    @property
    def skipped(self) -> int:
        """Malformed or unsupported card files the caller skipped while reading."""
        return self._skipped

    @property
    def overflow(self) -> int:
        """Cards not indexed because the catalog already held `max_cards` newer ones."""
        return self._overflow

    def __len__(self) -> int:
        return len(self._cards)

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """The indexed card with this experiment id, if any."""
        return self._cards.get(experiment_id)

    def put(self, card: ExperimentCardV1) -> None:
        """Add a card, or replace the card with the same experiment id.

        When the catalog is full, a new card evicts the oldest one if it is newer, and is
        otherwise left out; either way `overflow` counts one more card.
        """
        key = card.experiment_id
        with self._engine.writing() as writer:
            if key not in self._cards and len(self._cards) >= self._max_cards:
                self._overflow += 1
                oldest = max(self._cards.values(), key=_recency)
                if _recency(card) > _recency(oldest):
                    return
                del self._cards[oldest.experiment_id]
                writer.delete(oldest.experiment_id)
            self._cards[key] = card
            writer.put(card)

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """Exact matches first, then BM25 lexical matches, at most `limit` hits in all.

        Raises:
            InvalidInput: the query is blank or longer than `MAX_QUERY_CHARS`, or `limit` is
                below 1.
        """
        text = checked_query(query, limit)
        found = (
            _hit(self._cards.get(key), score, exact, text)
            for key, score, exact in ranked(self._engine, text, limit)
        )
        return [hit for hit in found if hit is not None]


class LocalCatalog:
    """One project's catalog under the state root (not thread-safe: the caller serialises)."""

    def __init__(self, store: CardSource, state_root: str | None, *, save: bool = True) -> None:
        """Open the project's saved index if it is what we wrote; `refresh` brings it up to date.

        Args:
            store: The project's store (the source of truth).
            state_root: The configured state root; None keeps the index in memory only.
            save: Whether the index may be written (False for a notebook: nothing is).
        """
        self.store = store
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
    def open(cls, store: CardSource, state_root: str | None, *, save: bool = True) -> LocalCatalog:
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

    @property
    def overflow(self) -> int:
        """Valid cards not indexed because the catalog holds `cards_per_project` newer ones."""
        return self.cards - len(self)

    def index_states(self) -> dict[str, int]:
        """How many valid cards are in each index state, by state name."""
        return {} if self._head is None else dict(sorted(self._head.states.items()))

    def problems(self) -> dict[str, str]:
        """Skipped card file name -> error code."""
        table = self._loaded_table() or {}
        return {name: row.problem for name, row in table.items() if row.problem is not None}

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
                    self._reload()  # another process may have caught up, or rebuilt
                    if not force and self._current(token):
                        self.last_refresh = ""
                        return False
                    return self._catch_up(token, force)
            except StoreIOError:
                self._writable = False  # a cache that cannot be written still answers
        if self._head is not None and self._head.generation:
            self._engine = self._head = self._table = None  # saved and behind: not ours to fix
        return self._catch_up(token, force)

    def put(self, card: ExperimentCardV1) -> None:
        """Index a card this process just committed (found through the card log)."""
        self.refresh()

    def _current(self, token: str | None) -> bool:
        head = self._head
        return self._engine is not None and head is not None and token == head.token is not None

    def _catch_up(self, token: str | None, force: bool) -> bool:
        table = self._loaded_table()
        if self._engine is None or self._head is None or table is None:
            self._rebuild(token)
            return True
        try:
            return self._apply_changes(self._engine, self._head, table, token, force)
        except CatalogDamaged:
            self._rebuild(token)
            return True

    def _apply_changes(
        self, engine: Engine, head: Head, table: Table, token: str | None, force: bool
    ) -> bool:
        """Index the card files changed since `head` was saved; whether any changed."""
        changes = self.store.read_changed_cards(
            None if force else LogMark.from_plain(head.mark), _stamps(table)
        )
        self.last_refresh = "log" if changes.logged else "scan"
        puts: dict[str, ExperimentCardV1] = {}
        deletes: set[str] = set()
        changed = _apply(table, changes.reads, puts, deletes)
        for name in set(table) - changes.names:
            changed |= _forget(table, name, deletes)
        self._bound(table, puts, deletes)
        mark = None if changes.mark is None else changes.mark.plain()
        if not changed and not puts and not deletes:
            if (token, mark) != (head.token, head.mark):
                self._save(table, token, mark, same_table=True)  # a new version, nothing else
            return False
        with engine.writing() as writer:
            _write(writer, puts, deletes)
        self._save(table, token, mark)
        return True

    def _rebuild(self, token: str | None) -> None:
        """Index every card file afresh (streamed: one parsed card at a time)."""
        self.last_refresh = "build"
        engine, generation = self._new_engine()
        table: Table = {}
        with engine.writing() as writer:
            writer.clear()
            for read in self.store.read_cards():
                _apply(table, (read,), None, set())
                if isinstance(read.card, ArtifactError) or read.card is None:
                    continue
                table[read.name].indexed = True
                writer.put(read.card)
            # Cards changed during the scan, and the log mark the index is true of.
            changes = self.store.read_changed_cards(None, _stamps(table))
            puts: dict[str, ExperimentCardV1] = {}
            deletes: set[str] = set()
            _apply(table, changes.reads, puts, deletes)
            for name in set(table) - changes.names:
                _forget(table, name, deletes)
            self._bound(table, puts, deletes)
            _write(writer, puts, deletes)
        self._engine = engine
        mark = None if changes.mark is None else changes.mark.plain()
        self._save(table, token, mark, generation)

    def _bound(
        self,
        table: Table,
        puts: dict[str, ExperimentCardV1],
        deletes: set[str],
    ) -> None:
        """Index exactly the `cards_per_project` newest valid cards."""
        valid = {name: row for name, row in table.items() if row.problem is None}
        keep = set(heapq.nsmallest(self._identity[2], valid, key=lambda n: _row_order(valid[n])))
        missing = []
        for name, row in valid.items():
            key = name.removesuffix(CARD_SUFFIX)
            if name not in keep and (row.indexed or key in puts):
                puts.pop(key, None)
                deletes.add(key)
                row.indexed = False
            elif name in keep and not row.indexed and key not in puts:
                missing.append(key)
        for key, card in zip(missing, self.store.load_cards(missing), strict=True):
            if card is not None:
                puts[key] = card
        for key in puts:
            table[key + CARD_SUFFIX].indexed = True

    # -- on disk ---------------------------------------------------------------------------

    def _new_engine(self) -> tuple[Engine, str]:
        if not self._writable or self.path is None:
            return Engine.memory(), ""
        generation = files.new_generation(self.path)
        return Engine.create(os.path.join(self.path, generation)), generation

    def _save(
        self,
        table: Table,
        token: str | None,
        mark: object,
        generation: str | None = None,
        *,
        same_table: bool = False,
    ) -> None:
        """Record what the index now holds: the table (unless `same_table`), then the head."""
        valid = [row for row in table.values() if row.problem is None]
        previous = self._head
        if generation is None:
            generation = "" if previous is None else previous.generation
        head = Head(
            *self._identity,
            generation=generation,
            manifest={},
            table="",
            token=token,
            mark=mark,  # type: ignore[arg-type]
            cards=len(valid),
            skipped=len(table) - len(valid),
            states=dict(Counter(str(row.state) for row in valid)),
        )
        self._table = table
        if self._writable and self.path is not None:
            index_dir = os.path.join(self.path, generation)
            old = {} if previous is None or previous.generation != generation else previous.manifest
            head.manifest = files.manifest(index_dir, old)
            if same_table and previous is not None:
                head.table = previous.table
            else:
                raw_table = files.encode(table)
                head.table = self._table_digest = files.digest_of(raw_table)
                files.write_file(os.path.join(self.path, files.TABLE), raw_table)
            self._head_raw = files.encode(head)
            files.write_file(os.path.join(self.path, files.HEAD), self._head_raw)
            if previous is None or previous.generation != generation:
                files.remove_others(self.path, generation)
        self._head = head

    def _load(self) -> bool:
        """Open the saved index if its head and files are what we wrote; whether they are."""
        assert self.path is not None
        raw = files.read_file(os.path.join(self.path, files.HEAD), files.MAX_HEAD_BYTES)
        head = None if raw is None or raw == self._distrust else files.decode(raw, Head)
        if head is None or (head.format, head.project, head.max_cards) != self._identity:
            return False
        if not files.GENERATION.fullmatch(head.generation):
            return False
        index_dir = os.path.join(self.path, head.generation)
        if not files.verify(index_dir, head.manifest):
            return False
        try:
            engine = Engine.open(index_dir)
        except CatalogDamaged:
            return False
        if len(engine) != min(head.cards, head.max_cards):
            return False  # not the index this head was written with
        self._head, self._head_raw, self._engine = head, raw or b"", engine
        if head.table != self._table_digest:
            self._table = None
        return True

    def _reload(self) -> None:
        """Under the lock: follow the head another writer saved since we loaded."""
        assert self.path is not None
        raw = files.read_file(os.path.join(self.path, files.HEAD), files.MAX_HEAD_BYTES)
        if raw == self._head_raw and self._engine is not None:
            return
        if not self._load():
            self._engine = self._head = self._table = None

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
        the index holds differently from their files are. `repair` rebuilds the index then.
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
        if repair and not found.ok:
            self._rebuild_now()
            return msgspec.structs.replace(self.check(), repaired=True)
        return found

    def _expected(self) -> dict[str, int]:
        """Experiment id -> `updated` of the newest `cards_per_project` valid card files."""
        valid = {
            read.card.experiment_id: order_key(read.card)
            for read in self.store.read_cards()
            if read.card is not None and not isinstance(read.card, ArtifactError)
        }
        kept = heapq.nsmallest(self._identity[2], valid, key=lambda k: (-valid[k][0], valid[k][1]))
        return {key: valid[key][0] for key in kept}

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
            if self._engine is None:
                return hits
            try:
                ranking = ranked(self._engine, text, limit)
            except CatalogDamaged:
                if attempt == 2:
                    raise
                self._rebuild_now()
                continue
            cards = self.store.load_cards([key for key, _, _ in ranking])
            found = (
                _hit(card, score, exact, text)
                for (_, score, exact), card in zip(ranking, cards, strict=True)
            )
            hits = [hit for hit in found if hit is not None]
            if len(hits) == len(ranking) or attempt == 2:
                break
            # Behind the card files: catch up; still behind after that: not what we wrote.
            if attempt == 1 or not self.refresh(force=True):
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
        return self.store.load_cards([experiment_id])[0]


def _stamps(table: Table) -> dict[str, CardStamp]:
    return {name: row.stamp for name, row in table.items() if row.stamp is not None}


def _row_order(row: Row) -> tuple[int, int]:
    return (-row.updated, row.rank)


def _apply(
    table: Table,
    reads: Iterable[CardRead],
    puts: dict[str, ExperimentCardV1] | None,
    deletes: set[str],
) -> bool:
    """Record `reads` in `table`, and what the index must put or delete; whether any changed."""
    changed = False
    for read in reads:
        name, card = read.name, read.card
        row = table.get(name)
        if card is None:  # unchanged since its stamp
            continue
        key = name.removesuffix(CARD_SUFFIX)
        if isinstance(card, ArtifactError):
            if row is not None and row.indexed:
                deletes.add(key)
            changed |= row is None or row.problem != str(card.code)
            table[name] = Row(read.stamp, problem=str(card.code))
            if puts is not None:
                puts.pop(key, None)
            continue
        updated, rank = order_key(card)
        indexed = row is not None and row.indexed
        table[name] = Row(read.stamp, None, str(card.index.state), updated, rank, indexed)
        if puts is not None:
            puts[key] = card
            deletes.discard(key)
        changed = True
    return changed


def _forget(table: Table, name: str, deletes: set[str]) -> bool:
    row = table.pop(name)
    if row.indexed:
        deletes.add(name.removesuffix(CARD_SUFFIX))
    return True


def _write(writer: Writer, puts: Mapping[str, ExperimentCardV1], deletes: Iterable[str]) -> None:
    for key in deletes:
        writer.delete(key)
    for card in puts.values():
        writer.put(card)
