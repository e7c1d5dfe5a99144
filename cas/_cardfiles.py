"""Card files of one project: `cards/<experiment_id>.json`, validated on every read.

A card is replaced atomically (staged, fsynced, renamed), so a reader sees the old or the new
document, never a mix. Every write is logged first (`_card_log`), so a reader finds the changed
files without a stat per card (`changes`). A card is used only if it parses, carries a supported
schema version, and names this project and the experiment id of its file name.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

import fsedge as _fs
from cards import ExperimentId, parse_experiment_id
from cards.errors import (
    ArtifactError,
    CardInvalid,
    ExperimentNotFound,
    InvalidInput,
    ObjectMissing,
    PathEscape,
    SourceMissing,
    StoreIOError,
)
from cas import _card_log
from cas._backend import Backend, Entry
from cas._layout import CARD_SUFFIX, CARDS, TMP, ProjectLayout
from cas._local_backend import LocalBackend

if TYPE_CHECKING:  # the card models load with the first card parsed, not with the store
    from cards import ExperimentCardV1, ProjectId
    from cas._card_log import LogMark

MAX_CARD_BYTES = 1 << 20
_PREFIX = f"{CARDS}/"
# A cards directory changed less than this long ago has no trustworthy version yet (it exceeds
# the coarse clock tick that stamps directory mtimes, with room for a clock step).
RACY_NS = 2_000_000_000
# Listed names whose inode differs from their stamp, beyond which a stat of every file is cheaper
# than parsing them all (a quarter of the listing, at least this many).
_MAX_MOVED = 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# What tells a card file's version without reading it, compared for equality only: locally
# (inode, size, mtime_ns); a bucket backend may use (size, etag).
CardStamp = tuple[int | str, ...]


class CardProblem(msgspec.Struct, frozen=True):
    """A card file that could not be used, named by its file name and an error code only."""

    name: str
    code: str


class CardRead(msgspec.Struct, frozen=True):
    """One card file as a scan found it: the card, or why it could not be used.

    `card` is None when the file was unchanged since the stamp the caller already had.
    """

    name: str
    stamp: CardStamp | None
    card: ExperimentCardV1 | ArtifactError | None


class CardChanges(msgspec.Struct, frozen=True):
    """The card files that may have changed since a log mark, read; and every name present.

    `names` holds every card file name there is now (a name known before and missing from it
    is gone). `mark` is the log position the reads are true of (None: no log to follow);
    `logged` whether the log chose the files (False: every file was listed and stat'ed).
    """

    reads: tuple[CardRead, ...]
    names: frozenset[str]
    mark: LogMark | None
    logged: bool

    @classmethod
    def scanned(cls, reads: Iterable[CardRead], mark: LogMark | None) -> CardChanges:
        """What a list and stat of every card file found (`CardFiles.scan`): every name read."""
        done = tuple(reads)
        return cls(done, frozenset(read.name for read in done), mark, logged=False)


class CardScan(msgspec.Struct, frozen=True):
    """Every valid card of a project, and the ones skipped."""

    cards: tuple[ExperimentCardV1, ...]
    problems: tuple[CardProblem, ...]

    @classmethod
    def of(cls, reads: Iterator[CardRead]) -> CardScan:
        """Split reads into usable cards and problems."""
        cards: list[ExperimentCardV1] = []
        problems: list[CardProblem] = []
        for read in reads:
            if isinstance(read.card, ArtifactError):
                problems.append(CardProblem(name=read.name, code=str(read.card.code)))
            elif read.card is not None:
                cards.append(read.card)
        return cls(cards=tuple(cards), problems=tuple(problems))


class CardReads:
    """One project's cards read through its keys (`backend`), validated on every read."""

    def __init__(self, backend: Backend, layout: ProjectLayout) -> None:
        self._backend = backend
        self._layout = layout

    def read(self, exp_id: ExperimentId) -> ExperimentCardV1:
        """One card (see `read_versioned`)."""
        return self.read_versioned(exp_id)[0]

    def read_versioned(self, exp_id: ExperimentId) -> tuple[ExperimentCardV1, str]:
        """One card and the version of what holds its key (one bounded read).

        Raises:
            ExperimentNotFound: there is no such card (no regular file or key holds it).
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
            StoreIOError: the backend failed.
        """
        try:
            got = self._backend.read(card_key(exp_id), 0, MAX_CARD_BYTES + 1)
        except ObjectMissing as exc:
            raise ExperimentNotFound("no experiment with that id in this project") from exc
        if len(got.data) > MAX_CARD_BYTES:
            raise CardInvalid("the card file is larger than a card may be")
        return checked_card(_parse(got.data), exp_id, self._layout.project_id), got.version

    def find_versioned(self, exp_id: ExperimentId) -> tuple[ExperimentCardV1 | None, str | None]:
        """The usable card at `exp_id` and the version of what holds its key.

        A corrupt card gives (None, its version): replacing exactly that version heals it.

        Raises:
            UnsupportedVersion: a card of a newer schema holds the key (never overwritten).
        """
        try:
            return self.read_versioned(exp_id)
        except ExperimentNotFound:
            return None, None
        except CardInvalid as exc:
            if exc.code != CardInvalid.code:
                raise
        entry = self._backend.stat(card_key(exp_id))
        return None, None if entry is None else entry.version

    def read_many(self, exp_ids: Sequence[ExperimentId]) -> list[ExperimentCardV1 | None]:
        """Each card; None for an absent or unusable one (the caller's index is behind)."""
        return [self._usable(exp_id) for exp_id in exp_ids]

    def _usable(self, exp_id: ExperimentId) -> ExperimentCardV1 | None:
        try:
            return self.read(exp_id)
        except (ExperimentNotFound, CardInvalid):
            return None

    def write(self, card: ExperimentCardV1, version: str | None) -> bool:
        """Create the card (`version` None) or replace exactly `version`; False if that lost.

        Raises:
            BackendUnsupported: the backend cannot create, or replace, conditionally.
            StoreIOError: the backend failed.
        """
        from cards.card import dump_card

        key, body = card_key(card.typed_experiment_id), dump_card(card)
        if version is None:
            return self._backend.create(key, body) is not None
        return self._backend.replace(key, body, version) is not None

    def delete(self, exp_id: ExperimentId) -> None:
        """Remove a card (absent: nothing to do)."""
        self._backend.delete(card_key(exp_id))

    def version(self) -> str | None:
        """A token that changes whenever a card changes; None: unknown, look at the cards."""
        return None

    def count(self) -> int:
        """How many card keys there are (valid or not: each holds a quota slot)."""
        return len(self._listing())

    def scan(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card, in name order, stamped (size, version); unchanged stamps are not read."""
        known = unchanged or {}
        for entry in self._listing():
            name = entry.key.removeprefix(_PREFIX)
            stamp: CardStamp = (entry.size, entry.version)
            if known.get(name) == stamp:
                yield CardRead(name, stamp, None)
                continue
            try:
                exp_id = parse_experiment_id(name.removesuffix(CARD_SUFFIX))
                card, version = self.read_versioned(exp_id)
            except ExperimentNotFound:
                continue  # removed since the listing
            except (InvalidInput, CardInvalid) as exc:
                yield CardRead(name, stamp if isinstance(exc, CardInvalid) else None, exc)
                continue
            yield CardRead(name, (entry.size, version), card)

    def changes(self, since: LogMark | None, known: Mapping[str, CardStamp]) -> CardChanges:
        """Every card, stamped: without a card log, one listing says what changed."""
        return CardChanges.scanned(self.scan(known), None)

    def _listing(self) -> list[Entry]:
        return [e for e in self._backend.list(_PREFIX) if e.key.endswith(CARD_SUFFIX)]


class CardFiles(CardReads):
    """The card files of the project open at `project_fd` (borrowed: the caller closes it).

    The local backend's faster cards: single cards are read through `LocalBackend`, as on any
    backend; scans, changes, the version token and writes work on the directory itself, for
    its stamps (inode, size, mtime) and the card log. Writers hold the commit lock
    (`Project.locked`), which orders them: a write never loses its condition.
    """

    def __init__(self, project_fd: int, layout: ProjectLayout) -> None:
        super().__init__(LocalBackend(project_fd), layout)
        self._fd = project_fd

    def scan(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card file, in name order, read through one directory descriptor.

        Files whose stamp (inode, size, mtime) equals `unchanged[name]` are yielded without
        being read again (`card` is None); a bad file yields its error instead of a card.
        """
        known = unchanged or {}
        with self._cards_dir() as cards_fd:
            if cards_fd is None:
                return
            for name in sorted(os.listdir(cards_fd)):
                if name.endswith(CARD_SUFFIX):
                    yield self._read_entry(cards_fd, name, known.get(name))

    def changes(self, since: LogMark | None, known: Mapping[str, CardStamp]) -> CardChanges:
        """The card files changed since the log mark `since`, without a stat per card.

        Re-read: the names logged after `since`, always parsed (a stamp can repeat: an inode
        reused with the same size and mtime), and from one listing of the directory (no stat:
        the inode comes with the name) names unknown to `known` or whose inode differs from
        their stamp. When the log cannot say (`_card_log`) or `since` is None, every file is
        scanned as `scan` does. Either way the result is true of the returned mark.
        """
        tail = _card_log.read_since(self._fd, since)
        if tail.names is None:
            return CardChanges.scanned(self.scan(known), tail.mark)
        with self._cards_dir() as cards_fd:
            if cards_fd is None:
                return CardChanges((), frozenset(), tail.mark, logged=True)
            listed, moved = _listed(cards_fd, known)
            logged = set(tail.names)
            unlogged = set(moved) - logged
            if len(unlogged) > max(_MAX_MOVED, len(listed) // 4):
                # Listed inodes that never match stamps (some overlay filesystems): a stat of
                # every file is cheaper than parsing them all; the logged ones are parsed.
                unlogged_known = {n: s for n, s in known.items() if n not in logged}
                return CardChanges.scanned(self.scan(unlogged_known), tail.mark)
            present = frozenset(listed)
            reads = [
                self._read_entry(cards_fd, name, None if name in logged else known.get(name))
                for name in sorted(logged.union(unlogged))
                if name in present or _exists(cards_fd, name)
            ]
        extra = [read.name for read in reads if read.name not in present]  # made since listed
        names = present.union(extra) if extra else present
        return CardChanges(tuple(reads), names, tail.mark, logged=True)

    @contextlib.contextmanager
    def _cards_dir(self) -> Iterator[int | None]:
        """The cards directory, open beneath the project for the block; None if there is none."""
        try:
            cards_fd = _fs.open_dir_beneath(self._fd, self._layout.cards_dir)
        except (SourceMissing, PathEscape):
            yield None
            return
        try:
            yield cards_fd
        finally:
            os.close(cards_fd)

    def count(self) -> int:
        """How many card files there are (valid or not: each holds a quota slot)."""
        names = _fs.list_dir_beneath(self._fd, self._layout.cards_dir)
        return sum(1 for name in names if name.endswith(CARD_SUFFIX))

    def version(self) -> str | None:
        """The cards directory's (inode, mtime_ns): every card publication renames into it.

        None when there are no cards, or when the directory changed within the last
        `RACY_NS`: a later change in the same tick of the filesystem's coarse clock could leave
        the mtime as it is (Git's "racily clean" case), so such a token proves nothing and the
        caller must look at the files. Compared for equality only.
        """
        try:
            st = os.stat(CARDS, dir_fd=self._fd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode) or st.st_mtime_ns > time.time_ns() - RACY_NS:
            return None
        return f"{st.st_ino}:{st.st_mtime_ns}"

    def write(self, card: ExperimentCardV1, version: str | None) -> bool:
        """Atomically replace the card's file (staged in `tmp/`), logged first; always True.

        The caller holds the commit lock (`Project.locked`): the card log's readers rely on it.

        Raises:
            StoreIOError: the card could not be written (or logged); the old file is untouched.
        """
        from cards.card import dump_card

        data = dump_card(card)
        with self._logged(card.experiment_id + CARD_SUFFIX) as (name, tmp_fd):
            cards_fd = _fs.make_dirs(self._fd, self._layout.cards_dir)
            try:
                _fs.atomic_write(cards_fd, name, data, tmp_fd, "card")
            finally:
                os.close(cards_fd)
        return True

    def delete(self, exp_id: ExperimentId) -> None:
        """Remove a card's file, its name logged first (the caller holds the commit lock)."""
        with self._logged(exp_id + CARD_SUFFIX):
            super().delete(exp_id)

    @contextlib.contextmanager
    def _logged(self, name: str) -> Iterator[tuple[str, int]]:
        """The card log names `name` (the intent) before the block changes its file."""
        tmp_fd = _fs.make_dirs(self._fd, (TMP,))
        try:
            _card_log.log_change(self._fd, name, tmp_fd)
            yield name, tmp_fd
        finally:
            os.close(tmp_fd)

    def _read_entry(self, cards_fd: int, name: str, known: CardStamp | None) -> CardRead:
        if known is not None:  # one fstatat, not an open, for a card seen before
            try:
                st = os.stat(name, dir_fd=cards_fd, follow_symlinks=False)
            except OSError:
                pass  # opening it says what is wrong
            else:
                if (st.st_ino, st.st_size, st.st_mtime_ns) == known:
                    return CardRead(name, known, None)
        try:
            exp_id = parse_experiment_id(name.removesuffix(CARD_SUFFIX))
            fd = os.open(name, _OPEN_FLAGS, dir_fd=cards_fd)
        except InvalidInput as exc:
            return CardRead(name, None, exc)
        except OSError as exc:
            return CardRead(name, None, CardInvalid(f"the card cannot be opened: {exc.strerror}"))
        try:
            st = os.fstat(fd)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            if stamp == known:
                return CardRead(name, stamp, None)
            if not stat.S_ISREG(st.st_mode):
                return CardRead(name, stamp, CardInvalid("the card is not a regular file"))
            raw = _fs.read_small(fd, MAX_CARD_BYTES, st.st_size)
            return CardRead(name, stamp, checked_card(_parse(raw), exp_id, self._layout.project_id))
        except (CardInvalid, StoreIOError) as exc:
            return CardRead(name, stamp, exc)  # stamped: a bad file is counted once, not per look
        finally:
            os.close(fd)


def card_key(exp_id: ExperimentId) -> str:
    """The key of a card below its project (the same on every backend)."""
    return f"{CARDS}/{exp_id}{CARD_SUFFIX}"


def checked_card(
    card: ExperimentCardV1, exp_id: ExperimentId, project_id: ProjectId
) -> ExperimentCardV1:
    """`card`, if it is the card of `exp_id` in `project_id` (its file's name and place).

    Raises:
        CardInvalid: it names another experiment or project.
    """
    if card.experiment_id != exp_id or card.project_id != project_id:
        raise CardInvalid("the card does not belong at this place in this project")
    return card


def _listed(cards_fd: int, known: Mapping[str, CardStamp]) -> tuple[list[str], list[str]]:
    """Every card file name, and those unknown or whose inode is not their stamp's (no stat).

    One loop with local names: at 100,000 cards this is most of a start after changes.
    """
    names: list[str] = []
    moved: list[str] = []
    add, add_moved, stamp_of = names.append, moved.append, known.get
    with os.scandir(cards_fd) as entries:
        for entry in entries:
            name = entry.name
            if name.endswith(CARD_SUFFIX):
                add(name)
                stamp = stamp_of(name)
                if stamp is None or stamp[0] != entry.inode():
                    add_moved(name)
    return names, moved


def _exists(cards_fd: int, name: str) -> bool:
    """Whether `name` (a logged name, validated) is in the directory now."""
    try:
        os.stat(name, dir_fd=cards_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # reading it says what is wrong
    return True


def _parse(raw: bytes) -> ExperimentCardV1:
    """`cards.parse_card`, whose models load at the first card read."""
    from cards.card import parse_card

    return parse_card(raw)
