"""A project's catalog kept under the state root, so a start or a search re-reads no card.

`<state_root>/catalog/<project_key>.catalog` holds the catalog's index (`_catalog_index`), the
stamp of every card file it has seen, the skipped files and each card's index state, as of one
"cards version" of the store (`ProjectStore.cards_version`) and one mark in the store's card log
(`_card_log`). Opening it costs one load and one stat: an unchanged version means no directory
scan at all. A changed one means, for a local store, a read of the card log's tail under the
shared commit lock and one listing of the card files' names and inodes, no stat: the files logged
since the mark, new names and names whose inode moved are parsed again, vanished ones dropped.
When the log cannot be trusted (missing, replaced, truncated, torn, hostile: `_card_log`), on
`refresh(force=True)` and for a bucket store, the files are listed and stat'ed, and only files
whose stamp changed are parsed again. The card files stay the source of truth: every hit is
re-read from its file (only the hits are parsed), and a hit whose file is gone or no longer
valid is never returned.

Why `marshal` and our own index (not SQLite FTS5): measured at 100,000 cards, FTS5's `bm25()`
ranks every row that matches a common word (p50 0.5 s, p95 0.9-1.6 s), while the packed index
loads without per-posting work and scores only the cards that can rank: a single word by the
heads of its impact-ordered runs, several words by MaxScore or by impact bounds packed into
integers (`_catalog_rank`, `benchmarks/bench_catalog`).

Saving: a start that found changed cards appends their entries to a journal beside the file
(`_catalog_journal`), a few kilobytes instead of the whole catalog, so it answers without
waiting for a large write; the journal is folded into a new catalog file (a compaction) once it
grows past a share of the file (`LocalCatalog.COMPACT_SHARE`), by a long-lived host's periodic
save or at its shutdown, and by any process when it is as large as the file itself.

Safety: the file is written whole beside its name and renamed over it (`_fs.write_new`), so a
reader sees an old or a new catalog, never a mix; each carries a checksum (xxh3-64) of its
payload and a random generation, and a journal applies only to the generation it names.
Journal records carry a CRC and are appended by single `O_APPEND` writes; reading stops at the
first torn one. Two processes that save together leave a catalog true of some version: a record
applied on top of a state its writer did not see drops the cards version and the card log mark
(the next start re-stats the files). A file that is torn, corrupt (its checksum), of another
format, another project, another bound or owner is ignored and rebuilt, never trusted. Writing
is best effort: a catalog that cannot be saved still answers.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import xxhash

from cards.errors import ArtifactError
from cas import _catalog_journal, _fs
from cas._card_log import LogMark
from cas._catalog import SearchHit, entry_of, put_entry, ranked
from cas._catalog_index import PACK_SHAPE, Entry, TermIndex
from cas._layout import CARD_SUFFIX

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from cards import Limits, ProjectId
    from cards.card import ExperimentCardV1
    from cas._cardfiles import CardChanges, CardRead, CardStamp
    from cas._layout import ProjectLayout

CATALOG_DIR = "catalog"
CATALOG_SUFFIX = ".catalog"
_MAGIC = b"artmem-catalog\x00\x02"  # then the payload's xxh3-64 digest, then the payload
_FORMAT = 7
CHECKSUM_AT = len(_MAGIC)
_CHECKSUM_BYTES = 8
_COMPACT_MIN_BYTES = 1 << 20
# Replaying a journaled change at load costs an index update (~1.5-2 ms at 100,000 cards, where
# the file takes ~0.5 s to load): a host folds the journal after this many changes times its
# compaction share (256 at `COMPACT_SHARE`), any process after this many, whatever their bytes.
COMPACT_CHANGES = 1024
# A catalog of the largest project (cards_per_project) stays far below this.
MAX_CATALOG_BYTES = 1 << 30


class CardSource(Protocol):
    """What the catalog reads of a store (`ProjectStore` and every `Store`)."""

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

    def load_cards(self, experiment_ids: Sequence[str]) -> list[ExperimentCardV1 | None]:
        """Read and validate several cards; None for an absent or unusable one."""
        ...


@runtime_checkable
class LoggedCardSource(Protocol):
    """A store that logs its card writes (`ProjectStore`): changes found without a stat each."""

    def read_changed_cards(
        self, since: LogMark | None, known: Mapping[str, CardStamp]
    ) -> CardChanges:
        """The card files changed since the log mark `since` (None: scan them all)."""
        ...


class LocalCatalog:
    """One project's persisted catalog (not thread-safe: the caller serialises calls)."""

    # A long-lived host folds the journal into the file once it is this share of the file's
    # size; any process does when it is as large as the file (`save_if_changed`).
    COMPACT_SHARE: ClassVar[float] = 0.25

    def __init__(self, store: CardSource, state_root: str | None, *, save: bool = True) -> None:
        """Load the project's saved catalog, if any; `refresh` brings it up to date.

        Args:
            store: The project's store (the source of truth).
            state_root: The configured state root; None keeps the catalog in memory only.
            save: Whether `save` writes (False for read-only callers such as a notebook).
        """
        self.store = store
        self.path = None
        if state_root is not None:
            name = store.layout.key + CATALOG_SUFFIX
            self.path = os.path.join(state_root, CATALOG_DIR, name)
        self._writable = save and self.path is not None
        self._max_cards = store.limits.cards_per_project
        self._token: str | None = None
        self._files: dict[str, CardStamp] = {}
        self._problems: dict[str, str] = {}
        self._states: dict[str, str] = {}  # card file name -> index state, every valid card
        self._index = TermIndex()
        self._dirty = False
        self._mark: LogMark | None = None  # how far the store's card log is read
        self.last_refresh = ""  # how the last refresh looked: "log", "scan" or "" (not at all)
        self.saved_at = 0.0
        # What the saved file and journal hold, and what changed since (name -> its entry).
        self._generation: bytes | None = None
        self._saved_token: str | None = None
        self._saved_mark: LogMark | None = None
        self._saved_bytes = 0
        self._journal_bytes = 0
        self._journal_changes = 0  # card changes the journal holds: each costs an index update
        self._changes: dict[str, Entry | None] = {}
        self._rewrite = False  # the journal cannot describe the change: write the whole file
        if self.path is not None:
            self._load(self.path)

    @classmethod
    def open(cls, store: CardSource, state_root: str | None, *, save: bool = True) -> LocalCatalog:
        """The project's catalog, brought up to date and saved if that changed it."""
        catalog = cls(store, state_root, save=save)
        catalog.refresh()
        catalog.save_if_changed()
        return catalog

    # -- what it knows ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._index)

    @property
    def cards(self) -> int:
        """Valid cards (indexed or beyond the bound)."""
        return len(self._states)

    @property
    def skipped(self) -> int:
        """Card files that are malformed, unsupported or misplaced."""
        return len(self._problems)

    @property
    def overflow(self) -> int:
        """Valid cards not indexed because the catalog holds `cards_per_project` newer ones."""
        return len(self._states) - len(self._index)

    def problems(self) -> dict[str, str]:
        """Skipped card file name -> error code."""
        return dict(self._problems)

    def index_states(self) -> dict[str, int]:
        """How many valid cards are in each index state, by state name."""
        return dict(sorted(Counter(self._states.values()).items()))

    # -- keeping up ------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> bool:
        """Catch up with the card files; whether anything changed.

        An unchanged cards version costs one stat (unless `force`); otherwise the card log says
        which files changed (module docstring), or with `force`, a bucket store or a log that
        cannot be trusted, the files are listed and stat'ed; only the changed ones are parsed.
        """
        token = self.store.cards_version()  # before the scan: a change during it moves it
        if token is not None and token == self._token and not force:
            self.last_refresh = ""
            return False
        found = self._read_changes(None if force else self._mark)
        self.last_refresh = "log" if found.logged else "scan"
        changed = False
        for read in found.reads:
            changed |= self._apply(read)
        tables = (self._files, self._problems, self._states)
        vanished = set().union(*(table.keys() - found.names for table in tables))
        for name in vanished:
            changed |= self._forget(name)
        if vanished and self.overflow:  # a card beyond the bound may now belong in
            self._reset()
            return self.refresh(force=True)
        self._dirty |= changed or token != self._token or found.mark != self._mark
        self._token, self._mark = token, found.mark
        return changed

    def _read_changes(self, since: LogMark | None) -> CardChanges:
        if isinstance(self.store, LoggedCardSource):
            return self.store.read_changed_cards(since, self._files)
        from cas._cardfiles import CardChanges

        return CardChanges.scanned(self.store.read_cards(self._files), None)

    def put(self, card: ExperimentCardV1) -> None:
        """Index a card this process just committed (its file is re-read at the next refresh)."""
        name = card.experiment_id + CARD_SUFFIX
        self._problems.pop(name, None)
        self._states[name] = str(card.index.state)
        entry = entry_of(card)
        put_entry(self._index, entry, self._max_cards)
        self._changed(name, entry)
        self._dirty = True

    def _changed(self, name: str, entry: Entry | None) -> None:
        self._changes.pop(name, None)  # re-inserted last: replayed in the order applied
        self._changes[name] = entry

    def _apply(self, read: CardRead) -> bool:
        name, card = read.name, read.card
        if card is None and read.stamp is not None and self._files.get(name) == read.stamp:
            return False  # unchanged since last seen
        if read.stamp is None:
            self._files.pop(name, None)
        else:
            self._files[name] = read.stamp
        if isinstance(card, ArtifactError):
            known = self._problems.get(name) == str(card.code)
            self._drop_card(name)
            self._problems[name] = str(card.code)
            self._changed(name, None)
            return not known
        if card is None:  # pragma: no cover - a scan yields None only with the known stamp
            return False
        self._problems.pop(name, None)
        self._states[name] = str(card.index.state)
        entry = entry_of(card)
        put_entry(self._index, entry, self._max_cards)
        self._changed(name, entry)
        return True

    def _forget(self, name: str) -> bool:
        self._files.pop(name, None)
        self._problems.pop(name, None)
        self._drop_card(name)
        self._changed(name, None)
        return True

    def _drop_card(self, name: str) -> None:
        self._states.pop(name, None)
        key = name.removesuffix(CARD_SUFFIX)
        if key in self._index:
            self._index.remove(key)

    def _reset(self) -> None:
        self._token, self._files, self._problems, self._states = None, {}, {}, {}
        self._mark = None
        self._index = TermIndex()
        self._changes, self._rewrite = {}, True

    # -- search ----------------------------------------------------------------------------

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """Exact matches, then BM25 matches, each re-read from its card file.

        Call `refresh` first to see other processes' changes. A hit whose file is gone or no
        longer valid means the catalog is behind: it catches up and ranks again, once.

        Raises:
            InvalidInput: the query is blank or too long, or `limit` is below 1.
        """
        hits: list[SearchHit] = []
        for attempt in range(2):
            ranking = ranked(self._index, query, limit)
            cards = self.store.load_cards([key for key, _, _ in ranking])
            hits = [
                SearchHit(card, score, exact)
                for (_, score, exact), card in zip(ranking, cards, strict=True)
                if card is not None
            ]
            if len(hits) == len(ranking) or attempt or not self.refresh(force=True):
                break
        return hits

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """The indexed card with this id, as its file holds it now; None if not indexed."""
        if experiment_id not in self._index:
            return None
        return self.store.load_cards([experiment_id])[0]

    # -- on disk ---------------------------------------------------------------------------

    def save_if_changed(self, min_interval_s: float = 0.0, *, compact_share: float = 1.0) -> bool:
        """Save what changed since loaded or saved, if `min_interval_s` has passed since.

        Appends to the journal; writes the whole file instead when the journal cannot say it
        (a reset, a torn journal, none of this file's generation), or when the journal would
        exceed `compact_share` of the file's size or hold more than `compact_share` times
        `COMPACT_CHANGES` card changes (each replayed at every load). A start passes the
        default (appending unless the journal is as large as the file or holds 1,024 changes);
        a long-lived host `COMPACT_SHARE`.
        """
        if not self._dirty or time.monotonic() - self.saved_at < min_interval_s:
            return False
        limit = max(self._saved_bytes * compact_share, _COMPACT_MIN_BYTES)
        replay = self._journal_changes + len(self._changes) > COMPACT_CHANGES * compact_share
        if self._rewrite or self._generation is None or self._journal_bytes > limit or replay:
            return self.save()
        return self._append() or self.save()

    def save(self) -> bool:
        """Write the whole catalog atomically (a new generation, which retires the journal).

        Returns False if it could not be written (the catalog is a cache, and still answers).
        """
        if not self._writable or self.path is None:
            return False
        generation = os.urandom(_catalog_journal.GENERATION_BYTES)
        payload = marshal.dumps(self._state(generation))
        header = _MAGIC + xxhash.xxh3_64_digest(payload)
        try:
            _make_private_dirs(os.path.dirname(self.path))
            _fs.write_new(self.path, [header, payload], replace=True)
        except (OSError, ArtifactError):
            return False
        with contextlib.suppress(OSError):  # stale now whatever happens to it
            os.unlink(self.path + _catalog_journal.JOURNAL_SUFFIX)
        self._generation, self._saved_bytes, self._journal_bytes = generation, len(payload), 0
        self._journal_changes = 0
        self._saved(rewritten=True)
        return True

    def _append(self) -> bool:
        """Append the changes since the last save to the journal; False if it could not."""
        if not self._writable or self.path is None or self._generation is None:
            return False
        plain = [
            (name, self._files.get(name), self._problems.get(name), self._states.get(name),
             None if entry is None else _catalog_journal.plain(entry))
            for name, entry in self._changes.items()
        ]  # fmt: skip
        marks = (_plain(self._saved_mark), _plain(self._mark))
        record = _catalog_journal.encode((self._saved_token, self._token, plain, *marks))
        path = self.path + _catalog_journal.JOURNAL_SUFFIX
        try:
            if not self._journal_bytes or not _catalog_journal.append(
                path, self._generation, record, self._journal_bytes
            ):
                _catalog_journal.start(path, self._generation, record)
                self._journal_bytes, self._journal_changes = _catalog_journal.HEADER_BYTES, 0
        except (OSError, ArtifactError):
            return False
        self._journal_bytes += len(record)
        self._journal_changes += len(plain)
        self._saved(rewritten=False)
        return True

    def _saved(self, *, rewritten: bool) -> None:
        self._dirty, self.saved_at = False, time.monotonic()
        self._saved_token, self._saved_mark, self._changes = self._token, self._mark, {}
        self._rewrite &= not rewritten

    def _identity(self) -> tuple[object, ...]:
        """What a saved catalog must match to be this one's: format, project and bound."""
        return (_FORMAT, PACK_SHAPE, str(self.store.project_id), self._max_cards)

    def _state(self, generation: bytes) -> tuple[Any, ...]:  # plain values for marshal
        tables = (generation, self._token, self._files, self._problems, self._states)
        return (*self._identity(), *tables, _plain(self._mark), self._index.pack())

    def _load(self, path: str) -> None:
        raw = _catalog_journal.read_owned(path, MAX_CATALOG_BYTES)
        if raw is None or not raw.startswith(_MAGIC):
            return
        # A view, not a slice: the payload is most of a file of up to ~150 MB at 100,000 cards.
        payload = memoryview(raw)[CHECKSUM_AT + _CHECKSUM_BYTES :]
        if xxhash.xxh3_64_digest(payload) != raw[CHECKSUM_AT : CHECKSUM_AT + _CHECKSUM_BYTES]:
            return  # torn or corrupt (xxh3: ~8x faster than CRC-32 over the whole file)
        try:
            state = marshal.loads(payload)
            self._restore(state)
        except (ValueError, EOFError, TypeError):
            self._reset()
            return
        self._saved_bytes = len(payload)
        self._replay(path + _catalog_journal.JOURNAL_SUFFIX)

    def _restore(self, state: object) -> None:
        if not isinstance(state, tuple) or len(state) != 11 or state[:4] != self._identity():
            raise ValueError("a catalog of another format, project or bound")
        generation, token, files, problems, states, mark, packed = state[4:]
        if not isinstance(token, str | None) or not all(
            isinstance(table, dict) for table in (files, problems, states)
        ):
            raise ValueError("a malformed catalog")
        if not isinstance(generation, bytes):
            raise ValueError("a catalog without a generation")
        index = TermIndex.unpack(packed)
        self._token, self._files, self._problems, self._states = token, files, problems, states
        self._index, self._generation, self._saved_token = index, generation, token
        self._mark = self._saved_mark = LogMark.from_plain(mark)

    def _replay(self, path: str) -> None:
        """Apply the journal's intact records; anything unreadable asks for a rewrite."""
        assert self._generation is not None
        records, intact, size = _catalog_journal.read(path, self._generation)
        self._journal_bytes, self._rewrite = size, intact < size
        try:
            for record in records:
                self._journal_changes += self._apply_record(record)
        except (ValueError, TypeError):
            # Applied halfway: what is in memory is no longer true of any version.
            self._reset()
            return
        self._saved_token, self._saved_mark = self._token, self._mark

    def _apply_record(self, record: object) -> int:
        if not isinstance(record, tuple) or len(record) != 5 or not isinstance(record[2], list):
            raise ValueError("a malformed journal record")
        before, token, changes, mark_before, mark = record
        if not isinstance(token, str | None):
            raise ValueError("a malformed journal record")
        mark_before, mark = LogMark.from_plain(mark_before), LogMark.from_plain(mark)
        for change in changes:
            name, stamp, problem, state, entry = _catalog_journal.checked_change(change)
            for table, value in ((self._files, stamp), (self._problems, problem)):
                _set(table, name, value)
            _set(self._states, name, state)
            key = name.removesuffix(CARD_SUFFIX)
            if entry is not None:
                put_entry(self._index, entry, self._max_cards)
            elif key in self._index:
                self._index.remove(key)
        # Applied on the state its writer saw, the record's version and log mark hold; else none
        # does (the next refresh scans every file).
        same = before == self._token and mark_before == self._mark
        self._token, self._mark = (token, mark) if same else (None, None)
        return len(changes)


def _plain(mark: LogMark | None) -> tuple[object, ...] | None:
    return None if mark is None else mark.plain()


def _set(table: dict[str, Any], name: str, value: object) -> None:
    if value is None:
        table.pop(name, None)
    else:
        table[name] = value


def _make_private_dirs(path: str) -> None:
    """Create the catalog directory and the state root above it 0700, as the outbox does."""
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=_fs.DIR_MODE, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, _fs.DIR_MODE)
