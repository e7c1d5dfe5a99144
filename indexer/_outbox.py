"""The durable outbox: `<state_root>/outbox/{pending,dead-letter}/<delivery_id>.json`.

Admission is one atomic file write (temp in `outbox/tmp/`, fsync, rename, fsync the directory)
and is the only thing on a caller's path: nothing here touches the network. A delivery id is a
digest of its content, so admitting the same delivery twice is a no-op. The outbox is a delivery
mechanism, not a record: the local cards remain the source of truth.

A document that does not verify (garbage, empty, truncated, edited, not a regular file) is
corrupt: it is never loaded as a delivery and, when found, is moved aside whole, unread, to
`dead-letter/<delivery_id>.corrupt` (reason `CORRUPT`). It blocks nothing: the same delivery may
be admitted again, which is how reconciliation re-admits its card.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from cards import ArtifactError, ConfigError, OutboxError, excerpt
from fsedge import atomic_write, read_small
from indexer._entry import OutboxEntry, decode_entry, encode_entry, parse_delivery_id
from indexer._outbox_dirs import (
    DEAD_LETTER,
    OUTBOX,
    PENDING,
    TMP,
    lstat_or_none,
    open_outbox_dirs,
    permission_problems,
    repair_permissions,
)

SUFFIX = ".json"
CORRUPT_SUFFIX = ".corrupt"
# The dead-letter reason of a document moved aside because it did not verify.
CORRUPT = "indexer.outbox_corrupt"
MAX_ENTRY_BYTES = 4 << 20
Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class Admission:
    """The outcome of admitting a delivery."""

    delivery_id: str
    created: bool


@dataclass(frozen=True, slots=True)
class OutboxStats:
    """Content-free counts for status."""

    pending: int
    oldest_admitted_at: datetime | None
    dead_letter: int
    invalid: int
    temp_leftovers: int
    set_aside: int = 0  # corrupt documents moved to dead-letter (`<delivery_id>.corrupt`)


@dataclass(frozen=True, slots=True)
class OutboxCheck:
    """What `Outbox.check` found (counts and relative paths, never content) and what it moved.

    Attributes:
        valid: pending documents that verify.
        corrupt: pending documents that do not (garbage, empty, truncated, edited, a symlink).
        moved: corrupt documents moved to dead-letter by this check (with `repair`).
        foreign: files in `pending/` not named like a delivery document (left for an operator).
        permission_problems: directories not 0700, files not 0600, or either not owned by
            this user, as `"<path under the state root>: <finding>"` (after a repair, what
            it could not fix).
        permissions_repaired: modes this check set right (with `repair`).
    """

    valid: int = 0
    corrupt: int = 0
    moved: int = 0
    foreign: int = 0
    permission_problems: tuple[str, ...] = ()
    permissions_repaired: int = 0

    @property
    def problems(self) -> int:
        """What is left for an operator: unmoved corrupt documents, foreign files, permissions."""
        return self.corrupt - self.moved + self.foreign + len(self.permission_problems)

    @property
    def ok(self) -> bool:
        """Whether nothing is left for an operator (every corrupt document was moved)."""
        return self.problems == 0


@dataclass(frozen=True, slots=True)
class _Corrupt:
    """A document that does not verify; `identity` (device, inode) when it can be moved aside."""

    identity: tuple[int, int] | None


class Outbox:
    """The pending and dead-letter documents under one state root."""

    def __init__(self, state_root: str) -> None:
        if not os.path.isabs(state_root):
            raise ConfigError(f"the state root must be an absolute path, not {excerpt(state_root)}")
        self.state_root = state_root
        self._seq_lock = threading.Lock()
        self._last_seq = 0

    @contextlib.contextmanager
    def _dirs(self) -> Iterator[tuple[int, int, int]]:
        pending, dead, tmp = open_outbox_dirs(self.state_root, (PENDING, DEAD_LETTER, TMP))
        try:
            yield pending, dead, tmp
        finally:
            for fd in (pending, dead, tmp):
                os.close(fd)

    def next_seq(self) -> int:
        """A strictly increasing admission number within this process, ordered by wall time.

        Per-session order across processes follows admission time; two admissions racing in
        different processes have no order to keep.
        """
        with self._seq_lock:
            self._last_seq = max(time.time_ns(), self._last_seq + 1)
            return self._last_seq

    def admit(self, entry: OutboxEntry) -> Admission:
        """Durably admit `entry`, unless a delivery with its id is pending or dead-lettered.

        A corrupt pending document of the same id is moved aside and replaced.

        Raises:
            OutboxError: the document could not be written; nothing was admitted.
        """
        name = parse_delivery_id(entry.delivery_id) + SUFFIX
        with self._dirs() as (pending, dead, tmp):
            if _exists(dead, name):
                return Admission(entry.delivery_id, created=False)
            if _remains(pending, name, dead):
                return Admission(entry.delivery_id, created=False)
            _write(pending, name, encode_entry(entry), tmp)
        return Admission(entry.delivery_id, created=True)

    def update(self, entry: OutboxEntry) -> None:
        """Replace a pending document (attempt counts, next attempt time).

        Raises:
            OutboxError: the document could not be written.
        """
        name = parse_delivery_id(entry.delivery_id) + SUFFIX
        with self._dirs() as (pending, _dead, tmp):
            _write(pending, name, encode_entry(entry), tmp)

    def ack(self, delivery_id: str) -> None:
        """Forget a delivered document (idempotent)."""
        name = parse_delivery_id(delivery_id) + SUFFIX
        with self._dirs() as (pending, _dead, _tmp):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=pending)
            os.fsync(pending)

    def dead_letter(self, entry: OutboxEntry, reason: str) -> None:
        """Move a delivery to dead-letter with a content-free reason; it is never retried."""
        name = parse_delivery_id(entry.delivery_id) + SUFFIX
        dead_entry = entry.changed(last_error=reason)
        with self._dirs() as (pending, dead, tmp):
            _write(dead, name, encode_entry(dead_entry), tmp)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=pending)
            os.fsync(pending)

    def revive(self, delivery_id: str) -> bool:
        """Remove a dead letter so the same delivery may be admitted again."""
        name = parse_delivery_id(delivery_id) + SUFFIX
        with self._dirs() as (_pending, dead, _tmp):
            try:
                os.unlink(name, dir_fd=dead)
            except FileNotFoundError:
                return False
            os.fsync(dead)
        return True

    def pending(self) -> list[OutboxEntry]:
        """Every valid pending document, in admission order (invalid ones are counted in stats)."""
        with self._dirs() as (pending, _dead, _tmp):
            entries, _invalid = _load_all(pending)
        return sorted(entries, key=lambda e: (e.seq, e.delivery_id))

    def claimable(self) -> tuple[list[OutboxEntry], int]:
        """The pending deliveries, once every corrupt document is moved to dead-letter.

        What the delivery worker reads on each pass, so a corrupt document (a captured turn
        damaged on disk) is set aside (`CORRUPT`, counted in status) without waiting for
        `fsck --repair`. One that cannot be moved stays, and is counted as invalid.

        Returns:
            The valid entries in admission order, and how many documents were set aside.
        """
        with self._dirs() as (pending, dead, _tmp):
            entries, _invalid, moved = _load_all_moving(pending, dead)
        return sorted(entries, key=lambda e: (e.seq, e.delivery_id)), moved

    def expired_dead_letters(self, older_than: float, *, remove: bool) -> list[tuple[str, int]]:
        """Dead-letter documents last written before `older_than`: (file name, bytes).

        With `remove` they are deleted (`artmem gc --apply`): a dead letter is kept only for
        an operator to look at; its card, if any, stays `failed` until it changes.
        """
        found: list[tuple[str, int]] = []
        with self._dirs() as (_pending, dead, _tmp):
            for name in sorted(os.listdir(dead)):
                try:
                    st = os.stat(name, dir_fd=dead, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_mtime < older_than:
                    found.append((name, st.st_size))
                    if remove:
                        os.unlink(name, dir_fd=dead)
        return found

    def is_pending(self, delivery_id: str) -> bool:
        """Whether a valid delivery with this id is waiting.

        A corrupt document is not: it is moved to dead-letter (reason `CORRUPT`) on the way.

        Raises:
            OutboxError: a corrupt document could not be moved aside.
        """
        name = parse_delivery_id(delivery_id) + SUFFIX
        with self._dirs() as (pending, dead, _tmp):
            return _remains(pending, name, dead)

    def dead_reason(self, delivery_id: str) -> str | None:
        """The reason a delivery was dead-lettered (`CORRUPT` if set aside), or None.

        A dead letter that does not verify is itself set aside as corrupt.

        Raises:
            OutboxError: a corrupt dead letter could not be moved aside.
        """
        name = parse_delivery_id(delivery_id) + SUFFIX
        with self._dirs() as (_pending, dead, _tmp):
            if _exists(dead, name):
                found = _inspect(dead, name)
                if isinstance(found, OutboxEntry):
                    return found.last_error or "unknown"
                if isinstance(found, _Corrupt):
                    _set_aside(dead, name, dead, found)
            corrupt_name = name.removesuffix(SUFFIX) + CORRUPT_SUFFIX
            return CORRUPT if _exists(dead, corrupt_name) else None

    def check(self, *, repair: bool = False) -> OutboxCheck:
        """Verify every pending document, and the permissions and owner of the outbox.

        With `repair`, corrupt documents are moved to dead-letter (reason `CORRUPT`), whence
        reconciliation re-admits their cards, and wrong modes of what this user owns (the state
        root included) are set right. A check creates nothing: an outbox never used is
        reported empty. Owners are reported, never changed.

        Raises:
            OutboxError: the outbox directories are unusable, or a corrupt document could not
                be moved aside.
        """
        repaired = repair_permissions(self.state_root) if repair else 0
        problems = permission_problems(self.state_root)
        outbox = os.path.join(self.state_root, OUTBOX)
        for path in (outbox, os.path.join(outbox, PENDING)):
            info = lstat_or_none(path)
            if info is None or not stat.S_ISDIR(info.st_mode):
                # never used, or reported
                return OutboxCheck(permission_problems=problems, permissions_repaired=repaired)
        valid = corrupt = moved = foreign = 0
        pending, dead = open_outbox_dirs(self.state_root, (PENDING, DEAD_LETTER))
        try:
            for name in sorted(os.listdir(pending)):
                if not _is_document_name(name):
                    foreign += 1
                    continue
                found = _inspect(pending, name)
                if isinstance(found, OutboxEntry):
                    valid += 1
                elif isinstance(found, _Corrupt):
                    corrupt += 1
                    if repair and _set_aside(pending, name, dead, found):
                        moved += 1
        finally:
            os.close(pending)
            os.close(dead)
        return OutboxCheck(valid, corrupt, moved, foreign, problems, repaired)

    def stats(self) -> OutboxStats:
        """Depth, oldest admission, dead letters, invalid documents and temp leftovers.

        Read only: invalid pending documents are counted here, and moved aside elsewhere.
        """
        with self._dirs() as (pending, dead, tmp):
            entries, invalid = _load_all(pending)
            dead_names = os.listdir(dead)
            leftovers = len(os.listdir(tmp))
        dead_count = sum(1 for n in dead_names if n.endswith(SUFFIX))
        set_aside = sum(1 for n in dead_names if n.endswith(CORRUPT_SUFFIX))
        oldest = min((e.admitted_at for e in entries), default=None)
        return OutboxStats(len(entries), oldest, dead_count, invalid, leftovers, set_aside)


def _write(dir_fd: int, name: str, data: bytes, tmp_fd: int) -> None:
    try:
        atomic_write(dir_fd, name, data, tmp_fd, "outbox")
    except (OSError, ArtifactError) as exc:
        raise OutboxError(f"cannot write an outbox document: {exc}") from exc


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _inspect(dir_fd: int, name: str) -> OutboxEntry | _Corrupt | None:
    """The verified document `name`, `_Corrupt` when it does not verify, None when it is gone."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None  # acknowledged meanwhile
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EACCES, errno.EPERM):
            return _Corrupt(None)  # cannot tell (e.g. EIO, EMFILE): left where it is
        return _Corrupt(_identity(dir_fd, name))  # a symlink, or a file we may not read
    try:
        info = os.fstat(fd)
        identity = (info.st_dev, info.st_ino)
        if not stat.S_ISREG(info.st_mode):
            return _Corrupt(identity)
        entry = decode_entry(read_small(fd, MAX_ENTRY_BYTES, info.st_size))
    except ArtifactError:
        return _Corrupt(identity)
    except OSError:
        return _Corrupt(None)
    finally:
        os.close(fd)
    return entry if entry.delivery_id + SUFFIX == name else _Corrupt(identity)


def _identity(dir_fd: int, name: str) -> tuple[int, int] | None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _remains(dir_fd: int, name: str, dead_fd: int) -> bool:
    """Whether document `name` is still there after a corrupt one is moved to dead-letter."""
    found = _inspect(dir_fd, name)
    if isinstance(found, _Corrupt):
        return not _set_aside(dir_fd, name, dead_fd, found)
    return found is not None


def _set_aside(dir_fd: int, name: str, dead_fd: int, corrupt: _Corrupt) -> bool:
    """Move a corrupt document, whole and unread, to `dead-letter/<delivery_id>.corrupt`.

    Only the file that was judged is moved: one replaced since (re-admitted) stays.

    Raises:
        OutboxError: the rename failed.
    """
    if corrupt.identity is None or _identity(dir_fd, name) != corrupt.identity:
        return False
    target = name.removesuffix(SUFFIX) + CORRUPT_SUFFIX
    try:
        os.rename(name, target, src_dir_fd=dir_fd, dst_dir_fd=dead_fd)
        os.fsync(dead_fd)
        os.fsync(dir_fd)
    except FileNotFoundError:
        return True  # another process moved it first
    except OSError as exc:
        raise OutboxError(f"cannot move a corrupt outbox document: {exc.strerror}") from exc
    return True


def _load_all(dir_fd: int) -> tuple[list[OutboxEntry], int]:
    entries, invalid, _moved = _load_all_moving(dir_fd, None)
    return entries, invalid


def _load_all_moving(dir_fd: int, set_aside_to: int | None) -> tuple[list[OutboxEntry], int, int]:
    """Valid entries, invalid documents left, and corrupt ones moved to `set_aside_to`."""
    entries: list[OutboxEntry] = []
    invalid = moved = 0
    for name in os.listdir(dir_fd):
        if not _is_document_name(name):
            invalid += 1
            continue
        found = _inspect(dir_fd, name)
        if isinstance(found, OutboxEntry):
            entries.append(found)
        elif (
            isinstance(found, _Corrupt)
            and set_aside_to is not None
            and _moved(dir_fd, name, set_aside_to, found)
        ):
            moved += 1
        elif found is not None:
            invalid += 1
    return entries, invalid, moved


def _moved(dir_fd: int, name: str, dead_fd: int, corrupt: _Corrupt) -> bool:
    try:
        return _set_aside(dir_fd, name, dead_fd, corrupt)
    except OutboxError:
        return False  # counted as invalid; fsck reports it


def _is_document_name(name: str) -> bool:
    try:
        parse_delivery_id(name.removesuffix(SUFFIX))
    except ValueError:
        return False
    return name.endswith(SUFFIX)
