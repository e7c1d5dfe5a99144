"""A bounded child's answer: what crosses its pipe, read within bounds, and typed errors.

The child writes an optional binary payload, then a JSON envelope (`{"ok": value}` or
`{"error": fields}`, and what it read), then the envelope's length as 8 bytes (`_isolated`
starts it; here is how its answer is read back and how its failures become typed errors).
"""

from __future__ import annotations

import math
import os
import select
import signal
import time
from collections.abc import Callable
from typing import NoReturn, Protocol

import msgspec

from cards.errors import (
    IntegrityError,
    InvalidInput,
    ObjectMissing,
    StoreIOError,
    TableTooLarge,
    TableUnreadable,
)
from cas.slicing._reader import ReadStats


class ChildEnd(Protocol):
    """How a caller learns that its child ended: a descriptor to watch, then its wait status."""

    @property
    def fd(self) -> int | None:
        """A descriptor readable when the child has ended (a pidfd, the helper's channel)."""
        ...

    def status(self) -> int:
        """The child's wait status (once `fd`, or both pipes, say it ended)."""
        ...


TIMEOUT_SECONDS = 60.0
MAX_ANSWER_BYTES = 64 << 20
MAX_STDERR_BYTES = 1 << 14
TICK_S = 0.5  # how often `run_bounded` calls its `tick` while the child works
READ_BYTES = 1 << 20
LENGTH_BYTES = 8
# What a child that ran out of memory leaves on its stderr: pyarrow's `std::bad_alloc` abort,
# or Python's own fatal MemoryError.
_MEMORY_HINTS = (b"bad_alloc", b"MemoryError", b"Cannot allocate memory", b"out of memory")


class Bounds(msgspec.Struct, frozen=True):
    """What a child may spend: seconds, added address space (None: unbounded), answer bytes."""

    seconds: float = TIMEOUT_SECONDS
    memory_bytes: int | None = None
    answer_bytes: int = MAX_ANSWER_BYTES


class Answer(msgspec.Struct, frozen=True):
    """What work in a child returns: a JSON-ready value, and bytes that cross as they are."""

    value: object
    payload: bytes | memoryview = b""


def error_fields(exc: Exception, bounds: Bounds) -> dict[str, object]:
    if isinstance(exc, MemoryError):  # pyarrow's ArrowMemoryError too: the address-space limit
        limit = bounds.memory_bytes or 0
        message = f"decoding the table needs more than the {limit}-byte memory bound"
        return {"kind": "too_large", "message": message, "limit": limit}
    kinds = {
        ObjectMissing: "missing",  # a remote object gone since it was located
        IntegrityError: "integrity",
        StoreIOError: "io",
        TableTooLarge: "too_large",
        TableUnreadable: "unreadable_table",
        InvalidInput: "invalid",
    }
    kind = next((name for cls, name in kinds.items() if isinstance(exc, cls)), "unreadable")
    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    return {"kind": kind, "message": str(message)[:500], "limit": getattr(exc, "limit", 0)}


class Expired(Exception):
    """The child's time ran out."""


class Pipes:
    """The child's answer and its stderr, read as they come; the answer is bounded."""

    def __init__(self, answer_fd: int, errors_fd: int, bound: int) -> None:
        self.open = [answer_fd, errors_fd]
        self.answer_fd = answer_fd
        self.answer = bytearray()
        self.errors = bytearray()
        self._fds = (answer_fd, errors_fd)
        self._bound = bound + LENGTH_BYTES + (1 << 20)  # the payload, and its envelope
        for fd in self._fds:
            os.set_blocking(fd, False)

    def read(self, fd: int) -> None:
        """Read what `fd` has now; at its end, stop watching it.

        Raises:
            TableUnreadable: the answer outgrew its bound.
        """
        while True:
            try:
                part = os.read(fd, READ_BYTES)
            except BlockingIOError:
                return
            if not part:
                self.open.remove(fd)
                return
            if fd == self.answer_fd:
                self.answer += part
                if len(self.answer) > self._bound:
                    raise TableUnreadable("the table's reader answered more than it may")
            elif len(self.errors) < MAX_STDERR_BYTES:
                self.errors += part[: MAX_STDERR_BYTES - len(self.errors)]

    def drain(self) -> None:
        """Read whatever is left (another process may hold a copy of a write end)."""
        for fd in list(self.open):
            self.read(fd)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)


def wait(child: ChildEnd, pipes: Pipes, deadline: float, tick: Callable[[], None] | None) -> int:
    """Read the child's pipes until it exits; return its wait status.

    The child's own descriptor (a pidfd, or the helper's channel) says when it exits, even if a
    process it shares descriptors with (a concurrent slice's child) keeps a pipe open. Without
    one, the ends of both pipes do.

    Raises:
        Expired: the deadline passed first (the caller kills the child).
        TableUnreadable: the answer outgrew its bound.
        StoreIOError: the helper stopped before the child's end was reported.
    """
    while True:
        watched = pipes.open + ([child.fd] if child.fd is not None else [])
        if not watched:
            return child.status()
        left = deadline - time.monotonic()
        ready = _ready(watched, min(left, TICK_S) if tick is not None else left)
        if not ready:
            if tick is None or time.monotonic() >= deadline:
                raise Expired
            tick()
            continue
        if child.fd is not None and child.fd in ready:
            pipes.drain()
            return child.status()
        for fd in ready:
            pipes.read(fd)


def _ready(fds: list[int], seconds: float) -> list[int]:
    """Which of `fds` are readable or closed within `seconds` (poll: no FD_SETSIZE ceiling)."""
    if seconds <= 0:
        return []
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(math.ceil(seconds * 1000))]


def decode(pipes: Pipes, status: int, stats: ReadStats, bounds: Bounds) -> Answer:
    raw = memoryview(pipes.answer)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or len(raw) < LENGTH_BYTES:
        _raise_death(status, bytes(pipes.errors), bounds)
    try:
        length = int.from_bytes(raw[-LENGTH_BYTES:], "little")
        if length > len(raw) - LENGTH_BYTES:
            raise ValueError("the envelope is longer than the answer")
        envelope = msgspec.json.decode(raw[len(raw) - LENGTH_BYTES - length : -LENGTH_BYTES])
        read_bytes, read_chunks = envelope["read"]
        stats.bytes_read += int(read_bytes)
        stats.chunks_verified += int(read_chunks)
    except (msgspec.DecodeError, RecursionError, KeyError, TypeError, ValueError) as exc:
        raise TableUnreadable("the table's reader answered nonsense") from exc
    if "error" in envelope:
        _raise(envelope["error"])
    return Answer(envelope.get("ok"), raw[: len(raw) - LENGTH_BYTES - length])


def _raise_death(status: int, errors: bytes, bounds: Bounds) -> NoReturn:
    """Why a child died without answering: out of memory, or a crash."""
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL  # the OOM killer
    if killed or any(hint in errors for hint in _MEMORY_HINTS):
        limit = bounds.memory_bytes or 0
        raise TableTooLarge(
            f"decoding the table needs more than the {limit}-byte memory bound", limit=limit
        )
    raise TableUnreadable("the table is malformed (its reader crashed)")


def _raise(error: dict[str, object]) -> NoReturn:
    message, kind = str(error.get("message")), error.get("kind")
    if kind == "integrity":
        raise IntegrityError(message)
    if kind == "missing":
        raise ObjectMissing(message)
    if kind == "io":
        raise StoreIOError(message)
    if kind == "too_large":
        limit = error.get("limit")
        raise TableTooLarge(message, limit=limit if isinstance(limit, int) else 0)
    if kind == "unreadable_table":
        raise TableUnreadable(message)
    if kind == "invalid":
        raise InvalidInput(message)
    raise TableUnreadable(f"the table cannot be read: {message}")
