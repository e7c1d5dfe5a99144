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
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from cards import ConfigError, excerpt
from indexer._entry import OutboxEntry, encode_entry, parse_delivery_id
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
from indexer._outbox_files import (
    CORRUPT,
    CORRUPT_SUFFIX,
    SUFFIX,
    Corrupt,
    document_exists,
    inspect,
    is_document_name,
    load_all,
    load_all_moving,
    remains,
    set_aside,
    write_document,
)

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
            if document_exists(dead, name):
                return Admission(entry.delivery_id, created=False)
            if remains(pending, name, dead):
                return Admission(entry.delivery_id, created=False)
            write_document(pending, name, encode_entry(entry), tmp)
        return Admission(entry.delivery_id, created=True)

    def update(self, entry: OutboxEntry) -> None:
        """Replace a pending document (attempt counts, next attempt time).

        Raises:
            OutboxError: the document could not be written.
        """
        name = parse_delivery_id(entry.delivery_id) + SUFFIX
        with self._dirs() as (pending, _dead, tmp):
            write_document(pending, name, encode_entry(entry), tmp)

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
            write_document(dead, name, encode_entry(dead_entry), tmp)
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
            entries, _invalid = load_all(pending)
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
            entries, _invalid, moved = load_all_moving(pending, dead)
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
            return remains(pending, name, dead)

    def dead_reason(self, delivery_id: str) -> str | None:
        """The reason a delivery was dead-lettered (`CORRUPT` if set aside), or None.

        A dead letter that does not verify is itself set aside as corrupt.

        Raises:
            OutboxError: a corrupt dead letter could not be moved aside.
        """
        name = parse_delivery_id(delivery_id) + SUFFIX
        with self._dirs() as (_pending, dead, _tmp):
            if document_exists(dead, name):
                found = inspect(dead, name)
                if isinstance(found, OutboxEntry):
                    return found.last_error or "unknown"
                if isinstance(found, Corrupt):
                    set_aside(dead, name, dead, found)
            corrupt_name = name.removesuffix(SUFFIX) + CORRUPT_SUFFIX
            return CORRUPT if document_exists(dead, corrupt_name) else None

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
                if not is_document_name(name):
                    foreign += 1
                    continue
                found = inspect(pending, name)
                if isinstance(found, OutboxEntry):
                    valid += 1
                elif isinstance(found, Corrupt):
                    corrupt += 1
                    if repair and set_aside(pending, name, dead, found):
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
            entries, invalid = load_all(pending)
            dead_names = os.listdir(dead)
            leftovers = len(os.listdir(tmp))
        dead_count = sum(1 for n in dead_names if n.endswith(SUFFIX))
        set_aside = sum(1 for n in dead_names if n.endswith(CORRUPT_SUFFIX))
        oldest = min((e.admitted_at for e in entries), default=None)
        return OutboxStats(len(entries), oldest, dead_count, invalid, leftovers, set_aside)
