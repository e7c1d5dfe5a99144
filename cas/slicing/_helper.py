"""A pre-started helper process that forks table readers for a process that has threads.

`fork()` copies only the calling thread: in a process with others (a worker's pools, pyarrow's
and OpenBLAS's threads), a lock another thread held stays locked forever in the child. So a
threaded caller never forks: it hands each read to this helper, started from a clean
interpreter (`fork` + `exec`, which is safe from any thread) with the table readers already
imported (pyarrow without numpy, which no reader uses), and kept single-threaded (it checks
before each fork). The helper forks one child per
read, exactly the child `_isolated` forks itself from a single-threaded caller: the same memory
bound (`RLIMIT_AS`, set in the child), clock and answer bound, and the same typed errors. A
hostile table that blows a bound kills its child only; a helper that dies is started again on
the next read, and a read in flight when it died fails with `StoreIOError`.

The protocol, over one `SOCK_SEQPACKET` socket pair per helper:

- a read is one message, `b"r"`, carrying descriptors: a socket of its own (the read's
  channel), a memfd holding the pickled work, the answer pipe and the stderr pipe (written by
  the child, read by the caller as in `_isolated`), then the descriptors the work uses (an open
  object, an export's staged file): the pickle names them by position (`Passed`);
- on the read's channel the helper answers once: the child's 4-byte wait status, then closes
  it. The caller sends `b"k"` there to have the child killed (its deadline passed); a channel
  the caller closes kills the child too. The helper reaps its children, so a pid it kills is
  never another process's.
- end of file on the helper's socket (the caller is gone) ends the helper and its children.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from cards.errors import StoreIOError
from cas.slicing._threads import ONE_THREAD_ENV, Passed, import_readers, threads

if TYPE_CHECKING:
    import subprocess

_REQUEST = b"r"
_KILL = b"k"
_STATUS = struct.Struct("<i")
_MAX_FDS = 64
_KILL_WAIT_S = 10.0


def dumps(*values: object) -> tuple[bytes, list[int]]:
    """`values` pickled one after another, and the descriptors (`Passed`) they hold.

    One pickler: an object in two of them (the reader, in the work and beside it) is one
    object again when loaded.

    Raises:
        TypeError: something in `values` cannot cross to another process (a lambda, a lock).
    """
    fds: list[int] = []
    out = io.BytesIO()

    class _Pickler(pickle.Pickler):
        def persistent_id(self, obj: object) -> int | None:
            if type(obj) is Passed:
                fds.append(int(obj))
                return len(fds) - 1
            return None

    pickler = _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        for value in values:
            pickler.dump(value)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise TypeError(f"table work for the helper must be picklable: {exc}") from exc
    return out.getvalue(), fds


def loads(data: bytes, fds: list[int]) -> pickle.Unpickler:
    """An unpickler of what `dumps` pickled (`load()` once per value), its descriptors `fds`."""

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid: object) -> int:
            if not isinstance(pid, int) or not 0 <= pid < len(fds):
                raise pickle.UnpicklingError("a descriptor the message did not carry")
            return fds[pid]

    return _Unpickler(io.BytesIO(data))


class Channel:
    """One read handed to the helper: its child's end is reported here."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.fd = sock.fileno()

    def status(self) -> int:
        """The child's wait status, once `fd` is readable.

        Raises:
            StoreIOError: the helper ended before the child did.
        """
        try:
            data = self._sock.recv(_STATUS.size)
        except OSError:
            data = b""
        if len(data) != _STATUS.size:
            raise StoreIOError(
                "the table reader's helper process stopped during the read; try again"
            )
        return int(_STATUS.unpack(data)[0])

    def kill(self) -> None:
        """Have the child killed, and wait until the helper has reaped it."""
        with contextlib.suppress(OSError):
            self._sock.send(_KILL)
            self._sock.settimeout(_KILL_WAIT_S)
            self._sock.recv(_STATUS.size)

    def close(self) -> None:
        """Forget the read (a child still running is killed by the helper)."""
        self._sock.close()


class Helper:
    """The helper of this process: started on first use, or early (`start`), restarted if dead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    @property
    def pid(self) -> int | None:
        """The helper's process id, while one runs."""
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start the helper now (a worker, before its threads start).

        Raises:
            StoreIOError: the helper could not be started.
        """
        with self._lock:
            self._ensure()

    def stop(self) -> None:
        """End the helper (its children with it); a later read starts another."""
        with self._lock:
            self._end()

    def submit(self, work: bytes, fds: list[int]) -> Channel:
        """Hand a read to the helper: `work` pickled by `dumps`, `fds` [answer, stderr, ...].

        Raises:
            StoreIOError: no helper could be started, or it refused the read.
        """
        near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            job = _memfd(work)
            try:
                with self._lock:
                    for attempt in (1, 2):
                        control = self._ensure()
                        try:
                            socket.send_fds(control, [_REQUEST], [far.fileno(), job, *fds])
                            break
                        except OSError as exc:  # it died since it was checked: once more
                            self._end()
                            if attempt == 2:
                                raise StoreIOError(
                                    f"cannot reach the table reader's helper: {exc.strerror}"
                                ) from exc
            finally:
                os.close(job)
        except BaseException:
            near.close()
            raise
        finally:
            far.close()
        return Channel(near)

    def _ensure(self) -> socket.socket:
        if self._process is not None and self._process.poll() is None and self._control:
            return self._control
        import subprocess  # only a process with threads needs it

        self._end()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = (
            "import sys; sys.path[:] = sys.argv[2:]; "
            "from cas.slicing._helper import serve; from cas.slicing._isolated import run_child; "
            "serve(int(sys.argv[1]), run_child)"
        )
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", code, str(theirs.fileno()), *sys.path],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                env={**os.environ, **ONE_THREAD_ENV},
            )
        except OSError as exc:
            ours.close()
            raise StoreIOError(f"cannot start the table reader's helper: {exc.strerror}") from exc
        finally:
            theirs.close()
        self._process, self._control = process, ours
        return ours

    def _end(self) -> None:
        if self._control is not None:
            self._control.close()  # end of file: the helper ends, and its children
            self._control = None
        if self._process is not None:
            with contextlib.suppress(OSError):
                self._process.kill()
            self._process.wait()
            self._process = None


def _memfd(data: bytes) -> int:
    """A descriptor of an unnamed file holding `data`, at offset 0."""
    try:
        fd = os.memfd_create("artmem-table-work", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # not Linux: an unlinked temporary file
        import tempfile

        fd = os.dup(tempfile.TemporaryFile().fileno())
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError as exc:
        os.close(fd)
        raise StoreIOError(f"cannot hand the read to its helper: {exc.strerror}") from exc
    return fd


HELPER = Helper()


# -- the helper process ------------------------------------------------------------------------


def serve(control_fd: int, run_child: Callable[..., NoReturn]) -> NoReturn:
    """The helper's loop: fork a child per read, report how it ended; end with the caller.

    `run_child` is what a forked child runs (`_isolated.run_child`, passed in by the helper's
    command line, so this module never imports the one that uses it).
    """
    import_readers()

    control = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    poller = select.poll()
    poller.register(control, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    running = True
    while running:
        for fd, _ in _poll(poller):
            if fd == control_fd:
                running = running and _accept(control, children, poller, run_child)
            elif fd == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
                _reap(children, poller)
            else:
                _signalled(fd, children, poller)
    _leave(children)


def _poll(poller: select.poll) -> list[tuple[int, int]]:
    try:
        return poller.poll()
    except InterruptedError:  # pragma: no cover (PEP 475 retries)
        return []


def _accept(
    control: socket.socket,
    children: dict[int, socket.socket],
    poller: select.poll,
    run_child: Callable[[bytes, list[int], int, int], NoReturn],
) -> bool:
    """Fork a child for the read on `control`; False at end of file (the caller is gone)."""
    try:
        message, fds, flags, _ = socket.recv_fds(control, 16, _MAX_FDS)
    except OSError:
        return False
    if not message:
        for fd in fds:
            os.close(fd)
        return False
    if message != _REQUEST or flags & socket.MSG_CTRUNC or len(fds) < 4:
        for fd in fds:
            os.close(fd)
        return True
    channel = socket.socket(fileno=fds[0])
    job_fd, answer_fd, errors_fd, *work_fds = fds[1:]
    try:
        with open(job_fd, "rb", closefd=False) as job:
            work = job.read()
    finally:
        os.close(job_fd)
    if threads() != 1:  # never fork with threads: a stray one would make children unsafe
        _answer(channel, _exit_status(70))
        _close(answer_fd, errors_fd, *work_fds)
        channel.close()
        return True
    pid = os.fork()
    if pid == 0:
        for other in (control, *children.values(), channel):
            other.close()
        run_child(work, work_fds, answer_fd, errors_fd)
    _close(answer_fd, errors_fd, *work_fds)
    children[pid] = channel
    poller.register(channel, select.POLLIN)
    return True


def _signalled(fd: int, children: dict[int, socket.socket], poller: select.poll) -> None:
    """The caller asked for its child's death, or closed the read: kill the child."""
    pid = next((pid for pid, sock in children.items() if sock.fileno() == fd), None)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)  # not reaped yet: the pid is still this child's
    poller.unregister(fd)


def _reap(children: dict[int, socket.socket], poller: select.poll) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel = children.pop(pid, None)
        if channel is not None:
            with contextlib.suppress(KeyError, ValueError):
                poller.unregister(channel)
            _answer(channel, status)
            channel.close()


def _answer(channel: socket.socket, status: int) -> None:
    with contextlib.suppress(OSError):
        channel.send(_STATUS.pack(status))


def _exit_status(code: int) -> int:
    return (code & 0xFF) << 8


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _leave(children: dict[int, socket.socket]) -> NoReturn:
    for pid in list(children):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    os._exit(0)
