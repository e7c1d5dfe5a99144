"""The delivery worker: one owner per state root, per-session FIFO, backoff, circuit breaker.

Guarantee: at-least-once transport with application duplicate defence. Every attempt is counted
durably *before* the request is sent; any later attempt first lists the target session's
messages carrying the delivery id and uploads only what is missing. A crash after Honcho
committed but before the local acknowledgement therefore ends with exactly one copy, as long as
Honcho's list reflects its own committed writes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import msgspec

from cards import ArtifactError, NotOwner, RemoteError, RemoteRejected, canonical_json
from cards.errors import ErrorCode
from fsedge import atomic_write, read_small, utc_now
from indexer._entry import OutboundMessage, OutboxEntry, SessionTarget
from indexer._outbox import Outbox
from indexer._outbox_dirs import OUTBOX, TMP, open_outbox_dirs
from indexer._policy import CircuitBreaker, CircuitState, RetryPolicy

OWNER_LOCK = "owner.lock"
GENERATION = "generation"
WORKER_STATUS = "worker.json"
EXHAUSTED = ErrorCode.RETRIES_EXHAUSTED
Clock = Callable[[], datetime]
EntryHook = Callable[[OutboxEntry, str], None]


class MemoryService(Protocol):
    """What the worker needs from Honcho (implemented by `HonchoMemoryService`)."""

    def deliver(self, target: SessionTarget, messages: Sequence[OutboundMessage]) -> None:
        """Create the messages in the target session."""

    def delivered(self, target: SessionTarget, delivery_id: str) -> list[dict[str, object]]:
        """The metadata of the target session's messages that carry `delivery_id`."""


class Ownership:
    """An exclusive, cross-process lock on a state root's outbox, plus a generation fence.

    Each acquisition increments the generation on disk; a worker publishes state only while the
    generation is still its own, so an instance that was replaced can never write after its
    successor started.
    """

    def __init__(self, state_root: str) -> None:
        self.state_root = state_root
        self.generation: int | None = None
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Try to become the owner; False when another worker holds the state root."""
        dir_fd, tmp = open_outbox_dirs(self.state_root, ("", TMP))
        try:
            fd = os.open(OWNER_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            self._fd = fd
            self.generation = self._read_generation(dir_fd) + 1
            atomic_write(dir_fd, GENERATION, str(self.generation).encode(), tmp, "generation")
            return True
        finally:
            os.close(tmp)
            os.close(dir_fd)

    def check(self) -> None:
        """Raise unless this instance still owns the state root.

        Raises:
            NotOwner: the lock is not held, or a newer generation has started.
        """
        if self._fd is None or self.generation is None:
            raise NotOwner("this worker does not own the state root")
        (dir_fd,) = open_outbox_dirs(self.state_root, ("",))
        try:
            current = self._read_generation(dir_fd)
        finally:
            os.close(dir_fd)
        if current != self.generation:
            raise NotOwner("a newer worker generation owns the state root")

    def release(self) -> None:
        """Give up ownership (closing the descriptor releases the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @staticmethod
    def _read_generation(dir_fd: int) -> int:
        try:
            fd = os.open(GENERATION, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            return 0
        try:
            text = read_small(fd, 64).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        return int(text) if text.isdigit() else 0


@dataclass
class DeliveryReport:
    """What one pass (or a drain) did: counts only."""

    delivered: int = 0
    deduplicated: int = 0
    retried: int = 0
    dead_lettered: int = 0
    blocked: int = 0
    set_aside: int = 0  # corrupt documents moved to dead-letter

    def add(self, other: DeliveryReport) -> None:
        """Accumulate another report into this one."""
        self.delivered += other.delivered
        self.deduplicated += other.deduplicated
        self.retried += other.retried
        self.dead_lettered += other.dead_lettered
        self.blocked += other.blocked
        self.set_aside += other.set_aside

    @property
    def progressed(self) -> bool:
        """Whether anything left the pending queue."""
        return bool(self.delivered or self.dead_lettered or self.set_aside)


def _noop(entry: OutboxEntry, code: str) -> None:
    del entry, code


@dataclass
class DeliveryWorker:
    """Delivers pending entries; call `run_once` or `drain` while holding `ownership`."""

    outbox: Outbox
    service: MemoryService
    ownership: Ownership
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    clock: Clock = utc_now
    rand: Callable[[], float] = random.random
    sleep: Callable[[float], None] = time.sleep
    max_sessions: int = 4
    on_ack: EntryHook = _noop
    on_dead: EntryHook = _noop
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _published: tuple[str, int, str | None] | None = field(default=None, init=False, repr=False)

    def run_once(self) -> DeliveryReport:
        """One pass: each session's due entries in order, sessions concurrently (bounded).

        Corrupt documents found on the way are moved to dead-letter (`Outbox.claimable`).

        Raises:
            NotOwner: this worker does not (or no longer) own the state root.
        """
        self.ownership.check()
        groups: dict[str, list[OutboxEntry]] = {}
        entries, set_aside = self.outbox.claimable()
        for entry in entries:
            groups.setdefault(entry.target.session_id, []).append(entry)
        report = DeliveryReport(set_aside=set_aside)
        if groups:
            workers = max(1, min(self.max_sessions, len(groups)))
            with ThreadPoolExecutor(workers, thread_name_prefix="artmem-deliver") as pool:
                for result in pool.map(self._run_session, groups.values()):
                    report.add(result)
        self._publish_status()
        return report

    def drain(self, deadline_s: float) -> DeliveryReport:
        """Deliver until nothing is pending or `deadline_s` passes; the rest stays durable.

        Raises:
            NotOwner: this worker does not (or no longer) own the state root.
        """
        start = self.clock()
        total = DeliveryReport()
        while True:
            total.add(report := self.run_once())
            pending = self.outbox.pending()
            if not pending:
                return total
            now = self.clock()
            remaining = deadline_s - (now - start).total_seconds()
            wait = 0.0 if report.progressed else self._next_due_s(pending, now)
            if remaining <= 0 or wait >= remaining:
                return total
            if wait > 0:
                self.sleep(wait)

    def _next_due_s(self, pending: list[OutboxEntry], now: datetime) -> float:
        due = min((e.next_attempt_at or now) for e in pending)
        wait = (due - now).total_seconds()
        with self._lock:
            if self.breaker.state is CircuitState.OPEN and self.breaker.opened_at is not None:
                reopen = self.breaker.cooldown_s - (now - self.breaker.opened_at).total_seconds()
                wait = max(wait, reopen)
        return max(wait, 0.01)  # never spin

    def _run_session(self, entries: list[OutboxEntry]) -> DeliveryReport:
        report = DeliveryReport()
        for entry in entries:  # FIFO: a later entry never overtakes one still pending
            if not entry.due(self.clock()) or not self._deliver(entry, report):
                break
        return report

    def _deliver(self, entry: OutboxEntry, report: DeliveryReport) -> bool:
        """Attempt one entry; True when it left the queue (delivered or dead-lettered)."""
        now = self.clock()
        with self._lock:
            allowed = self.breaker.allow(now)
        if not allowed:
            report.blocked += 1
            return False
        self.ownership.check()
        attempt = entry.changed(attempts=entry.attempts + 1)
        self.outbox.update(attempt)  # counted before sending: a crash now means "maybe sent"
        try:
            missing = self._missing(entry)
            if missing:
                self.service.deliver(entry.target, missing)
        except RemoteRejected as exc:
            self._settle(None)
            self._dead(attempt, str(exc.code), report)
            return True
        except RemoteError as exc:
            self._settle(exc, now)
            return self._failed(attempt, exc, now, report)
        self._settle(None)
        self.ownership.check()
        self.on_ack(attempt, "delivered")
        self.outbox.ack(entry.delivery_id)
        if len(missing) < len(entry.messages):
            report.deduplicated += 1
        else:
            report.delivered += 1
        return True

    def _missing(self, entry: OutboxEntry) -> list[OutboundMessage]:
        if entry.attempts == 0 and not entry.maybe_sent:
            return list(entry.messages)  # never attempted: nothing can be on the server yet
        found = [
            md
            for md in self.service.delivered(entry.target, entry.delivery_id)
            if md.get("delivery_id") == entry.delivery_id  # do not trust the server's filter
        ]
        if not found:
            return list(entry.messages)
        if len(entry.messages) == 1:
            return []
        present = {md.get("message_fingerprint") for md in found}
        return [m for m in entry.messages if m.fingerprint not in present]

    def _failed(
        self, attempt: OutboxEntry, exc: RemoteError, now: datetime, report: DeliveryReport
    ) -> bool:
        if exc.retryable and self.policy.exhausted(attempt.attempts):
            self._dead(attempt, EXHAUSTED, report)
            return True
        delay = self.policy.delay(attempt.attempts, self.rand())
        self.ownership.check()
        self.outbox.update(attempt.schedule_retry(now=now, delay_s=delay, error=str(exc.code)))
        report.retried += 1
        return False

    def _dead(self, attempt: OutboxEntry, code: str, report: DeliveryReport) -> None:
        self.ownership.check()
        self.outbox.dead_letter(attempt, code)
        self.on_dead(attempt, code)
        report.dead_lettered += 1

    def _settle(self, exc: RemoteError | None, now: datetime | None = None) -> None:
        with self._lock:
            if exc is None:
                self.breaker.success()
            else:
                self.breaker.failure(exc, now or self.clock())

    def _publish_status(self) -> None:
        """Write the content-free worker status that `artmem status` reads, when it changed.

        `updated_at` is when the worker reached this state; an unchanged state costs no write
        (and no fsync) per pass.
        """
        with self._lock:
            state = (
                str(self.breaker.state),
                self.ownership.generation or 0,
                self.breaker.last_error,
            )
        if state == self._published:
            return
        circuit, generation, last_error = state
        document = {
            "circuit": circuit,
            "generation": generation,
            "last_error": last_error,
            "updated_at": self.clock().isoformat(),
        }
        with contextlib.suppress(OSError, ArtifactError):
            self.ownership.check()
            write_status(self.outbox.state_root, canonical_json(document))
            self._published = state


def write_status(state_root: str, data: bytes) -> None:
    """Atomically replace the worker status document."""
    outbox, tmp = open_outbox_dirs(state_root, ("", TMP))
    try:
        atomic_write(outbox, WORKER_STATUS, data, tmp, "status")
    finally:
        os.close(tmp)
        os.close(outbox)


def read_status(state_root: str) -> dict[str, object] | None:
    """The last worker status document, or None."""
    path = os.path.join(state_root, OUTBOX, WORKER_STATUS)
    try:
        with open(path, "rb") as handle:
            document = msgspec.json.decode(handle.read(65536))
    except (OSError, msgspec.DecodeError):
        return None
    return document if isinstance(document, dict) else None
