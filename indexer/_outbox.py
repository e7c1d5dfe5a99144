"""The durable outbox: `<state_root>/outbox/{pending,dead-letter}/<delivery_id>.json`.

Admission is one atomic file write (temp in `outbox/tmp/`, fsync, rename, fsync the directory)
and is the only thing on a caller's path: nothing here touches the network. A delivery id is a
digest of its content, so admitting the same delivery twice is a no-op. The outbox is a delivery
mechanism, not a record: the local cards remain the source of truth.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from cards import ArtifactError, OutboxError
from cas import atomic_write, make_dirs, open_dir, read_small
from indexer._entry import OutboxEntry, decode_entry, encode_entry, parse_delivery_id

OUTBOX = "outbox"
PENDING = "pending"
DEAD_LETTER = "dead-letter"
TMP = "tmp"
SUFFIX = ".json"
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


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A delivery that will not be retried, and why (an error code, never content)."""

    entry: OutboxEntry
    reason: str


class Outbox:
    """The pending and dead-letter documents under one state root."""

    def __init__(self, state_root: str) -> None:
        if not os.path.isabs(state_root):
            raise OutboxError("the state root must be an absolute path")
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

        Raises:
            OutboxError: the document could not be written; nothing was admitted.
        """
        name = parse_delivery_id(entry.delivery_id) + SUFFIX
        with self._dirs() as (pending, dead, tmp):
            if _exists(pending, name) or _exists(dead, name):
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

    def dead_letters(self) -> list[DeadLetter]:
        """Every dead letter, with its reason."""
        with self._dirs() as (_pending, dead, _tmp):
            entries, _invalid = _load_all(dead)
        return [DeadLetter(e, e.last_error or "unknown") for e in entries]

    def is_pending(self, delivery_id: str) -> bool:
        """Whether a delivery with this id is waiting."""
        with self._dirs() as (pending, _dead, _tmp):
            return _exists(pending, parse_delivery_id(delivery_id) + SUFFIX)

    def dead_reason(self, delivery_id: str) -> str | None:
        """The reason a delivery was dead-lettered, or None if it was not."""
        name = parse_delivery_id(delivery_id) + SUFFIX
        with self._dirs() as (_pending, dead, _tmp):
            if not _exists(dead, name):
                return None
            entry = _load(dead, name)
        return "unknown" if entry is None else entry.last_error or "unknown"

    def stats(self) -> OutboxStats:
        """Depth, oldest admission, dead letters, invalid documents and temp leftovers."""
        with self._dirs() as (pending, dead, tmp):
            entries, invalid = _load_all(pending)
            dead_count = sum(1 for n in os.listdir(dead) if n.endswith(SUFFIX))
            leftovers = len(os.listdir(tmp))
        oldest = min((e.admitted_at for e in entries), default=None)
        return OutboxStats(len(entries), oldest, dead_count, invalid, leftovers)


def open_outbox_dirs(state_root: str, names: Sequence[str]) -> list[int]:
    """Create (0700) and open `<state_root>/outbox/<name>` for each name ("" is the outbox).

    Raises:
        OutboxError: a directory could not be created or opened (nothing is left open).
    """
    fds: list[int] = []
    try:
        os.makedirs(state_root, mode=0o700, exist_ok=True)
        root = open_dir(state_root)
        try:
            for name in names:
                fds.append(make_dirs(root, (OUTBOX, name) if name else (OUTBOX,)))
        finally:
            os.close(root)
    except (OSError, ArtifactError) as exc:
        for fd in fds:
            os.close(fd)
        raise OutboxError(f"the outbox directories are unusable: {exc}") from exc
    return fds


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


def _load(dir_fd: int, name: str) -> OutboxEntry | None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None  # vanished (acknowledged meanwhile) or a symlink planted in the outbox
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        entry = decode_entry(read_small(fd, MAX_ENTRY_BYTES))
    except ArtifactError:
        return None
    finally:
        os.close(fd)
    return entry if entry.delivery_id + SUFFIX == name else None


def _load_all(dir_fd: int) -> tuple[list[OutboxEntry], int]:
    entries: list[OutboxEntry] = []
    invalid = 0
    for name in os.listdir(dir_fd):
        if not name.endswith(SUFFIX):
            invalid += 1
            continue
        entry = _load(dir_fd, name)
        if entry is None:
            invalid += _exists(dir_fd, name)
        else:
            entries.append(entry)
    return entries, invalid
