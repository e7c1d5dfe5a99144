"""Run table work in a child process with hard bounds, so no table can take the caller down.

Everything that parses or decodes a recorded table runs here, for three reasons:

- pyarrow 26 binds some Parquet metadata accessors without C++ exception translation
  (`RowGroupMetaData.column`, column statistics, the statistics pruning inside
  `ParquetFileFragment.subset`): on a malformed footer they throw through Cython and the
  process aborts in `std::terminate`; some corrupt IPC buffers crash compute kernels.
- A 50 KB table can declare gigabytes. The child limits its address space (`RLIMIT_AS`) to what
  it inherited plus a bound, so a decode that slips past the declared-size checks fails to
  allocate instead of growing; a child that dies of it is `TableTooLarge`. A wall-clock
  budget kills a child that runs too long.
- pyarrow's I/O threads call back into the Python file object they read (`pa.PythonFile` over
  the verified reader). If the interpreter finalizes while one of them needs the GIL (a read in
  flight, or the last reference to the file dropped on an I/O thread), CPython ends that thread
  with `pthread_exit`, whose unwinding through pyarrow's `noexcept` frames calls
  `std::terminate`: "terminate called without an active exception", SIGABRT, and the CLI's
  buffered JSON lost. A child never finalizes (it leaves with `os._exit`), and the caller
  never runs a pyarrow reader over a Python file.

Where the child comes from: a process that runs one thread (a CLI command; its environment
keeps pyarrow's and BLAS's native threads from starting, `ONE_THREAD_ENV`) forks it and the
child inherits the parsed request and the open reader. A process with threads never forks (a
lock another thread held would stay locked in the child): it hands the work, pickled, with its
descriptors, to a pre-started helper process that forks the same child (`_helper`); a worker
starts the helper before it starts threads (`start_helper`), and sends every read there.

Either way the child answers through a pipe: an optional binary payload, then a JSON envelope,
then the envelope's length as 8 bytes (`_answer` reads it back). What it read is added to the
caller's `reader.stats`. It dies with its parent (Linux: `PR_SET_PDEATHSIG`; a helper ends with
its caller), and at its alarm in any case. A reader of a remote object fetches the chunks it
needs itself, over connections of its own (`RemoteBytes`); an export's child writes the staged
output file.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import fcntl
import math
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, cast

import msgspec

import fsedge as _fs
from cards.errors import (
    SliceTimeout,
    StoreIOError,
)
from cas.slicing._answer import (
    LENGTH_BYTES,
    READ_BYTES,
    Answer,
    Bounds,
    Expired,
    Pipes,
    decode,
    error_fields,
    wait,
)
from cas.slicing._threads import threads

if TYPE_CHECKING:
    import pickle

    from cas.slicing._helper import Channel
from cas.slicing._reader import ReadStats, VerifiedReader

_PR_SET_PDEATHSIG = 1
_HELPER_STARTED = False  # `start_helper` was called: every read goes to the helper
_READER_THREADS = 2  # a child's pyarrow runs one CPU and one I/O thread (`prepare_child`)


def _load_prctl() -> Callable[[int, int, int, int, int], int] | None:
    """`prctl(2)` from libc (Linux), or None where it does not exist."""
    try:
        function = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, *(ctypes.c_ulong,) * 4)
    function.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int, int], int], function)


_prctl = _load_prctl()


def run_bounded(
    work: Callable[[], Answer],
    reader: VerifiedReader,
    bounds: Bounds,
    *,
    prepare: Callable[[], None] | None = None,
    tick: Callable[[], None] | None = None,
) -> Answer:
    """Compute `work()`, which reads through `reader`, in a child process within `bounds`.

    `prepare` runs in the child before its memory bound is set: importing pyarrow there, for a
    caller that never loads it (the record path), maps about a gigabyte of address space that
    the bound must not count. `tick` runs in this process about every `TICK_S` while the
    child works (an export's progress). In a process with threads, `work`, `reader` and
    `prepare` are pickled for the helper: descriptors they hold cross as `Passed`.

    Raises:
        SliceTimeout: the child ran past `bounds.seconds` and was killed.
        TableTooLarge: the child found a bound exceeded, or ran out of its memory bound.
        TableUnreadable: the child crashed, answered too much or nonsense, or failed.
        InvalidInput: the child found the request impossible to carry out (only the message
            crosses: work whose errors carry facts sends what the caller needs to raise them).
        IntegrityError: a chunk the child read differs from its manifest.
        ObjectMissing: the object the child reads (a remote one) is gone.
        StoreIOError: the child could not be started, read the object or write its output, or
            the helper it ran in stopped.
    """
    answer_fd, answer_end = os.pipe()
    errors_fd, errors_end = os.pipe()
    with contextlib.suppress(AttributeError, OSError):  # Linux: fewer, larger pipe transfers
        fcntl.fcntl(answer_end, fcntl.F_SETPIPE_SZ, READ_BYTES)
    try:
        if _HELPER_STARTED or threads() != 1:
            from cas.slicing import _helper  # loaded only by a process with threads (~10 ms)

            job, fds = _helper.dumps(sys.path, dict(os.environ), (work, prepare, reader, bounds))
            child: _Forked | Channel = _helper.HELPER.submit(job, [answer_end, errors_end, *fds])
        else:
            child = _fork(
                work, prepare, answer_fd, answer_end, errors_fd, errors_end, reader, bounds
            )
    except BaseException:
        for fd in (answer_fd, errors_fd):
            os.close(fd)
        raise
    finally:
        os.close(answer_end)
        os.close(errors_end)
    pipes = Pipes(answer_fd, errors_fd, bounds.answer_bytes)
    try:
        status = wait(child, pipes, time.monotonic() + bounds.seconds, tick)
    except BaseException as exc:
        child.kill()
        if isinstance(exc, Expired):
            raise SliceTimeout(
                f"reading the table did not finish within {bounds.seconds:g} s",
                limit=math.ceil(bounds.seconds),
            ) from None
        raise
    finally:
        pipes.close()
        child.close()
    return decode(pipes, status, reader.stats, bounds)


def start_helper() -> None:
    """Start the helper process now and read every table through it from here on.

    A long-running process calls this before it starts threads: its reads then never fork it,
    and the helper's children start with the readers already imported.

    Raises:
        StoreIOError: the helper could not be started.
    """
    from cas.slicing._helper import HELPER

    global _HELPER_STARTED
    HELPER.start()
    _HELPER_STARTED = True


def stop_helper() -> None:
    """End the helper; reads fork again where the process runs one thread."""
    from cas.slicing._helper import HELPER

    global _HELPER_STARTED
    _HELPER_STARTED = False
    HELPER.stop()


def _helper_loads(job: bytes, fds: list[int]) -> pickle.Unpickler:
    from cas.slicing._helper import loads  # in the helper's child, where it is loaded

    return loads(job, fds)


def _set_path(path: object) -> None:
    """The caller's import path, so the work's functions import here as they did there."""
    if isinstance(path, list) and all(isinstance(entry, str) for entry in path):
        sys.path[:] = path


def _set_environment(environ: object) -> None:
    if isinstance(environ, dict):
        os.environ.clear()
        os.environ.update({str(key): str(value) for key, value in environ.items()})


class _Forked:
    """A child forked from this (single-threaded) process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):  # not Linux 5.3+: the pipes' ends will do
            self.fd = None

    def status(self) -> int:
        return os.waitpid(self.pid, 0)[1]

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _fork(
    work: Callable[[], Answer],
    prepare: Callable[[], None] | None,
    answer_fd: int,
    answer_end: int,
    errors_fd: int,
    errors_end: int,
    reader: VerifiedReader,
    bounds: Bounds,
) -> _Forked:
    caller = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:
        raise StoreIOError(f"cannot start the table reader: {exc.strerror}") from exc
    if pid == 0:
        os.close(answer_fd)
        os.close(errors_fd)
        _child(work, prepare, answer_end, errors_end, reader, bounds, caller)
    return _Forked(pid)


def run_child(job: bytes, fds: list[int], answer_fd: int, errors_fd: int) -> NoReturn:
    """In a child the helper forked: unpickle the work and run it as a forked child does."""
    try:
        faulthandler.disable()
        os.dup2(errors_fd, 2)
        loader = _helper_loads(job, fds)
        _set_path(loader.load())  # before the work's modules import
        _set_environment(loader.load())  # the caller's now (credentials), as a fork has it
        work, prepare, reader, bounds = cast(
            "tuple[Callable[[], Answer], Callable[[], None] | None, VerifiedReader, Bounds]",
            loader.load(),
        )
    except BaseException as exc:  # the caller sees a crash, with this on the child's stderr
        with contextlib.suppress(OSError):
            os.write(2, f"cannot load the table work: {type(exc).__name__}: {exc}"[:500].encode())
        os._exit(1)
    _child(work, prepare, answer_fd, errors_fd, reader, bounds, os.getppid())


def _child(
    work: Callable[[], Answer],
    prepare: Callable[[], None] | None,
    answer_fd: int,
    errors_fd: int,
    reader: VerifiedReader,
    bounds: Bounds,
    caller: int,
) -> NoReturn:
    code = 1
    try:
        # A crash here is an expected answer: keep pyarrow's abort message and any inherited
        # fault handler's traceback off the caller's terminal (the caller reads them).
        faulthandler.disable()
        os.dup2(errors_fd, 2)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(math.ceil(bounds.seconds) + 1)  # ends the child if the caller vanished
        _die_with(caller)
        before = (reader.stats.bytes_read, reader.stats.chunks_verified)
        payload: bytes | memoryview = b""
        try:
            if prepare is not None:
                prepare()
            _leave_thread_stacks(_READER_THREADS)
            _limit_address_space(bounds.memory_bytes)
            answer = work()
            envelope = msgspec.json.encode(
                {"ok": answer.value, "read": _read_since(reader.stats, before)}
            )
            payload = answer.payload
        except Exception as exc:  # everything crosses to the parent as data
            error = error_fields(reader.failure or exc, bounds)
            envelope = msgspec.json.encode(
                {"error": error, "read": _read_since(reader.stats, before)}
            )
        _fs.write_all(answer_fd, payload)
        _fs.write_all(answer_fd, envelope)
        _fs.write_all(answer_fd, len(envelope).to_bytes(LENGTH_BYTES, "little"))
        code = 0
    except MemoryError:  # even the error did not fit: say so where the caller looks
        with contextlib.suppress(OSError):
            os.write(2, b"MemoryError\n")
    finally:
        os._exit(code)


def _die_with(caller: int) -> None:
    """Be killed as soon as the caller dies (Linux), not only at the alarm.

    An export's budget is long, and its child writes a file: a caller killed outright must not
    leave it running. The check after `prctl` covers a caller that died before it.
    """
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != caller:
        os._exit(1)


def _leave_thread_stacks(count: int) -> None:
    """Run `count` threads at once and join them, before the memory bound is set.

    pyarrow's pool threads (one per pool in a child) then take their stacks from the C
    library's cache of exited threads' stacks, and its allocator arena, instead of mapping new
    ones (8 MiB and 64 MiB of address space) that the bound would count against the table.
    """
    release = threading.Event()
    started = [threading.Thread(target=release.wait, daemon=True) for _ in range(count)]
    for thread in started:
        thread.start()
    release.set()
    for thread in started:
        thread.join()


def _limit_address_space(extra: int | None) -> None:
    """Let this process map at most `extra` bytes more than it has mapped now (Linux)."""
    if extra is None:
        return
    try:
        with open("/proc/self/status", "rb") as status:
            line = next(line for line in status if line.startswith(b"VmSize:"))
    except (OSError, StopIteration):
        return  # no procfs: the declared-size checks and the clock still bound the child
    current = int(line.split()[1]) * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = current + extra if hard == resource.RLIM_INFINITY else min(hard, current + extra)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _read_since(stats: ReadStats, before: tuple[int, int]) -> list[int]:
    return [stats.bytes_read - before[0], stats.chunks_verified - before[1]]
