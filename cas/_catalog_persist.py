"""A project's catalog kept under the state root, so a start or a search re-reads no card.

`<state_root>/catalog/<project_key>.catalog` holds the catalog's index (`_catalog_index`), the
stamp of every card file it has seen, the skipped files and each card's index state, as of one
"cards version" of the store (`ProjectStore.cards_version`). Opening it costs one load and one
stat: an unchanged version means no directory scan at all; a changed one means a list and stat
of the card files, and only files whose stamp changed are parsed again; vanished ones are
dropped. The card files stay the source of truth: every hit is re-read from its file (only the
hits are parsed), and a hit whose file is gone or no longer valid is never returned.

Why `marshal` and our own index (not SQLite FTS5): measured at 100,000 cards, FTS5's `bm25()`
ranks every row that matches a common word (p50 0.5 s, p95 0.9-1.6 s), while the packed index
loads in tens of milliseconds and ranks through MaxScore in a few (`benchmarks/bench_catalog`).

Safety: the file is written whole beside its name and renamed over it (`_fs.write_new`), so a
reader sees an old or a new catalog, never a mix; two processes that both write leave one of
two complete catalogs, each true of the version it names. A file that is torn, corrupt (its
CRC), of another format, another project, another bound or owner is ignored and rebuilt, never
trusted. Writing is best effort: a catalog that cannot be saved still answers.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
import time
import zlib
from collections import Counter
from typing import TYPE_CHECKING, Any, Protocol

from cards.errors import ArtifactError, CardInvalid, ExperimentNotFound
from cas import _fs
from cas._catalog import SearchHit, entry_of, put_entry, ranked
from cas._catalog_index import PACK_SHAPE, TermIndex
from cas._layout import CARD_SUFFIX

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from cards import Limits, ProjectId
    from cards.card import ExperimentCardV1
    from cas._cardfiles import CardRead, CardStamp
    from cas._layout import ProjectLayout

CATALOG_DIR = "catalog"
CATALOG_SUFFIX = ".catalog"
_MAGIC = b"artmem-catalog\x00\x01"
_FORMAT = 1
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

    def load_card(self, experiment_id: str) -> ExperimentCardV1:
        """Read and validate one card."""
        ...


class LocalCatalog:
    """One project's persisted catalog (not thread-safe: the caller serialises calls)."""

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
        self.saved_at = 0.0
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

        An unchanged cards version costs one stat (unless `force`); otherwise the files are
        listed and stat'ed, and only the changed ones parsed.
        """
        token = self.store.cards_version()  # before the scan: a change during it moves it
        if token is not None and token == self._token and not force:
            return False
        seen: set[str] = set()
        changed = False
        for read in self.store.read_cards(self._files):
            seen.add(read.name)
            changed |= self._apply(read)
        known = self._files.keys() | self._problems.keys() | self._states.keys()
        vanished = known - seen
        for name in vanished:
            changed |= self._forget(name)
        if vanished and self.overflow:  # a card beyond the bound may now belong in
            self._reset()
            return self.refresh(force=True)
        self._dirty |= changed or token != self._token
        self._token = token
        return changed

    def put(self, card: ExperimentCardV1) -> None:
        """Index a card this process just committed (its file is re-read at the next refresh)."""
        name = card.experiment_id + CARD_SUFFIX
        self._problems.pop(name, None)
        self._states[name] = str(card.index.state)
        put_entry(self._index, entry_of(card), self._max_cards)
        self._dirty = True

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
            return not known
        if card is None:  # pragma: no cover - a scan yields None only with the known stamp
            return False
        self._problems.pop(name, None)
        self._states[name] = str(card.index.state)
        put_entry(self._index, entry_of(card), self._max_cards)
        return True

    def _forget(self, name: str) -> bool:
        self._files.pop(name, None)
        self._problems.pop(name, None)
        self._drop_card(name)
        return True

    def _drop_card(self, name: str) -> None:
        self._states.pop(name, None)
        key = name.removesuffix(CARD_SUFFIX)
        if key in self._index:
            self._index.remove(key)

    def _reset(self) -> None:
        self._token, self._files, self._problems, self._states = None, {}, {}, {}
        self._index = TermIndex()

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
            hits, missing = [], False
            for key, score, exact in ranked(self._index, query, limit):
                card = self._read(key)
                missing |= card is None
                if card is not None:
                    hits.append(SearchHit(card, score, exact))
            if not missing or attempt or not self.refresh(force=True):
                break
        return hits

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """The indexed card with this id, as its file holds it now; None if not indexed."""
        return self._read(experiment_id) if experiment_id in self._index else None

    def _read(self, key: str) -> ExperimentCardV1 | None:
        try:
            return self.store.load_card(key)
        except (ExperimentNotFound, CardInvalid):
            return None

    # -- on disk ---------------------------------------------------------------------------

    def save_if_changed(self, min_interval_s: float = 0.0) -> bool:
        """Save if the catalog changed since loaded or saved and `min_interval_s` has passed."""
        if not self._dirty or time.monotonic() - self.saved_at < min_interval_s:
            return False
        return self.save()

    def save(self) -> bool:
        """Write the catalog atomically; False if it could not be written (it is a cache)."""
        if not self._writable or self.path is None:
            return False
        payload = marshal.dumps(self._state())
        header = _MAGIC + zlib.crc32(payload).to_bytes(4, "little")
        try:
            _make_private_dirs(os.path.dirname(self.path))
            _fs.write_new(self.path, [header, payload], replace=True)
        except (OSError, ArtifactError):
            return False
        self._dirty, self.saved_at = False, time.monotonic()
        return True

    def _state(self) -> tuple[Any, ...]:  # plain values for marshal
        identity = (_FORMAT, PACK_SHAPE, str(self.store.project_id), self._max_cards)
        tables = (self._token, self._files, self._problems, self._states)
        return (*identity, *tables, self._index.pack())

    def _load(self, path: str) -> None:
        raw = _read_owned(path)
        if raw is None or not raw.startswith(_MAGIC):
            return
        checksum, payload = raw[len(_MAGIC) : len(_MAGIC) + 4], raw[len(_MAGIC) + 4 :]
        if zlib.crc32(payload).to_bytes(4, "little") != checksum:
            return
        try:
            state = marshal.loads(payload)
            self._restore(state)
        except (ValueError, EOFError, TypeError):
            self._reset()

    def _restore(self, state: object) -> None:
        identity = (_FORMAT, PACK_SHAPE, str(self.store.project_id), self._max_cards)
        if not isinstance(state, tuple) or len(state) != 9 or state[:4] != identity:
            raise ValueError("a catalog of another format, project or bound")
        token, files, problems, states, packed = state[4:]
        if not isinstance(token, str | None) or not all(
            isinstance(table, dict) for table in (files, problems, states)
        ):
            raise ValueError("a malformed catalog")
        index = TermIndex.unpack(packed)
        self._token, self._files, self._problems, self._states = token, files, problems, states
        self._index = index


def _read_owned(path: str) -> bytes | None:
    """The file's bytes if it is a regular file of ours within the size bound, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        return _fs.read_small(fd, MAX_CATALOG_BYTES, st.st_size)
    except (OSError, ArtifactError):
        return None
    finally:
        os.close(fd)


def _make_private_dirs(path: str) -> None:
    """Create the catalog directory and the state root above it 0700, as the outbox does."""
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=_fs.DIR_MODE, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, _fs.DIR_MODE)
