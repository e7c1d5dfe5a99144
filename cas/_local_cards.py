"""`CardFiles`: the local backend's faster cards, from the directory's stamps and the card log.

Every backend's cards are read, written and scanned through its keys (`_cardfiles.CardReads`).
A local directory offers more, as an extension of the same class: a scan that skips files by
their stamp (inode, size, mtime) from one listing, `changes` that follows the card log
(`_card_log`) instead of a stat per card, a version token from the directory's own stamp, and
writes that log each change first. A card is replaced atomically (staged, fsynced, renamed), so
a reader sees the old or the new document, never a mix.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import fsedge as _fs
from cards import ExperimentId, parse_experiment_id
from cards.errors import CardInvalid, InvalidInput, PathEscape, SourceMissing, StoreIOError
from cas import _card_log
from cas._cardfiles import (
    MAX_CARD_BYTES,
    CardChanges,
    CardRead,
    CardReads,
    CardStamp,
    _parse,
    checked_card,
)
from cas._layout import CARD_SUFFIX, CARDS, TMP, ProjectLayout
from cas._local_backend import LocalBackend

if TYPE_CHECKING:
    from cards import ExperimentCardV1
    from cas._card_log import LogMark

# A cards directory changed less than this long ago has no trustworthy version yet (it exceeds
# the coarse clock tick that stamps directory mtimes, with room for a clock step).
RACY_NS = 2_000_000_000
# Listed names whose inode differs from their stamp, beyond which a stat of every file is cheaper
# than parsing them all (a quarter of the listing, at least this many).
_MAX_MOVED = 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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
