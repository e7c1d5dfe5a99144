"""Run a Parquet metadata computation in a forked child, so a crash there cannot take us down.

pyarrow 26 binds some Parquet metadata accessors without C++ exception translation
(`RowGroupMetaData.column`, column statistics, and the statistics pruning inside
`ParquetFileFragment.subset`): on a malformed footer they throw through Cython and the whole
process aborts in `std::terminate`. Parsing the footer and reading pages translate their errors
properly. So whatever touches per-column-chunk metadata runs in a fork: the child inherits the
parsed objects, computes a small JSON answer and exits; if it dies, hangs or answers nonsense,
the table is unreadable. A fork of a process with pyarrow loaded costs a few milliseconds.
"""

from __future__ import annotations

import faulthandler
import os
import select
import signal
import time
import warnings
from collections.abc import Callable
from typing import NoReturn

import orjson

from cards.errors import IntegrityError, StoreIOError, TableTooLarge, TableUnreadable
from cas import _fs
from cas.slicing._reader import ReadStats, VerifiedReader

TIMEOUT_SECONDS = 60.0
MAX_ANSWER_BYTES = 64 << 20
_READ_BYTES = 1 << 16


def isolated(
    work: Callable[[], object], reader: VerifiedReader, *, timeout: float = TIMEOUT_SECONDS
) -> object:
    """Compute `work()`, which reads through `reader`, in a forked child; return its answer.

    The answer crosses as JSON. What the child read is added to `reader.stats`.

    Raises:
        TableUnreadable: the child crashed, timed out, answered too much, or failed.
        TableTooLarge: the child found a bound exceeded.
        IntegrityError: a chunk the child read differs from its manifest.
        StoreIOError: the child could not be started, or could not read the object.
    """
    read_fd, write_fd = os.pipe()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        raise StoreIOError(f"cannot start the metadata check: {exc.strerror}") from exc
    if pid == 0:
        os.close(read_fd)
        _child(work, write_fd, reader)
    os.close(write_fd)
    try:
        raw = _answer(read_fd, time.monotonic() + timeout)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        _reap(pid)
        raise
    finally:
        os.close(read_fd)
    return _decode(raw, _reap(pid), reader.stats)


def _child(work: Callable[[], object], write_fd: int, reader: VerifiedReader) -> NoReturn:
    code = 1
    try:
        # A crash here is an expected answer: keep pyarrow's abort message and any inherited
        # fault handler's traceback off the caller's terminal.
        faulthandler.disable()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        before = (reader.stats.bytes_read, reader.stats.chunks_verified)
        try:
            answer = work()
            payload = orjson.dumps({"ok": answer, "read": _read_since(reader.stats, before)})
        except Exception as exc:  # everything crosses to the parent as data
            error = _error_fields(reader.failure or exc)
            payload = orjson.dumps({"error": error, "read": _read_since(reader.stats, before)})
        _fs.write_all(write_fd, payload)
        code = 0
    finally:
        os._exit(code)


def _read_since(stats: ReadStats, before: tuple[int, int]) -> list[int]:
    return [stats.bytes_read - before[0], stats.chunks_verified - before[1]]


def _error_fields(exc: Exception) -> dict[str, object]:
    kinds = {IntegrityError: "integrity", StoreIOError: "io", TableTooLarge: "too_large"}
    kind = next((name for cls, name in kinds.items() if isinstance(exc, cls)), "unreadable")
    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    return {"kind": kind, "message": str(message)[:500], "limit": getattr(exc, "limit", 0)}


def _answer(read_fd: int, deadline: float) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([read_fd], [], [], max(0.0, remaining))
        if not ready:
            raise TableUnreadable("reading the table's metadata did not finish in time")
        part = os.read(read_fd, _READ_BYTES)
        if not part:
            return b"".join(parts)
        total += len(part)
        if total > MAX_ANSWER_BYTES:
            raise TableUnreadable("the table's metadata is too large to describe")
        parts.append(part)


def _reap(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return status


def _decode(raw: bytes, status: int, stats: ReadStats) -> object:
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or not raw:
        raise TableUnreadable("the table's metadata is malformed (its reader crashed)")
    try:
        envelope = orjson.loads(raw)
        read_bytes, read_chunks = envelope["read"]
        stats.bytes_read += int(read_bytes)
        stats.chunks_verified += int(read_chunks)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TableUnreadable("the table's metadata check answered nonsense") from exc
    if "error" in envelope:
        _raise(envelope["error"])
    return envelope["ok"]


def _raise(error: dict[str, object]) -> NoReturn:
    message, kind = str(error.get("message")), error.get("kind")
    if kind == "integrity":
        raise IntegrityError(message)
    if kind == "io":
        raise StoreIOError(message)
    if kind == "too_large":
        limit = error.get("limit")
        raise TableTooLarge(message, limit=limit if isinstance(limit, int) else 0)
    raise TableUnreadable(f"the table's metadata is malformed: {message}")
