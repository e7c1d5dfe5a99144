"""`artmem serve`: the JSONL worker the harness plugin talks to.

One JSON object a line on stdin, one reply a line on stdout; calls run concurrently and replies
may come out of order (match them by `id`). A malformed line gets one error reply and never stops
the worker; so does a line over `MAX_LINE_BYTES`, which is read in bounded pieces and dropped up
to its newline (the reply carries the request id when the start of the line shows it). Blank
lines are ignored. The delivery worker runs inside, in its own thread.

The `shutdown` op stops admission: every later request gets `worker.shutting_down`, until the
host closes the input. End of input (with or without `shutdown`) or SIGTERM finishes the calls in
flight, drains the outbox within a bound, and exits 0; a second SIGTERM during the drain is
counted and ignored. Logs go to stderr as JSON lines: events
and error codes, never arguments, results, card text or paths.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import FrameType
from typing import BinaryIO, TextIO

import msgspec

from cards import (
    ArtifactError,
    InvalidRequest,
    ShuttingDown,
)
from cards.errors import ErrorCode
from cas.slicing import start_helper, stop_helper
from harness_plugin._runtime import Runtime
from harness_plugin._status import status_view
from harness_plugin.worker._caller import parse_caller, parse_session_caller
from harness_plugin.worker._delivery import Delivery, block_sigterm, log
from harness_plugin.worker._lines import (
    ID_SCAN_BYTES,
    MAX_LINE_BYTES,
    PROTOCOL,
    Oversized,
    best_id,
    envelope,
    prefix_id,
    read_line,
)
from harness_plugin.worker._tools import ToolHost

VERSION = "0.1.0"
OPS = ("hello", "tools/list", "tools/call", "events/append", "recall/first-step", "status")


class _Terminate(Exception):
    """Raised by the SIGTERM handler to leave a blocking read."""


@dataclass
class JsonlWorker:
    """Reads requests, runs them (tool calls concurrently), writes replies."""

    runtime: Runtime
    stdin: BinaryIO
    stdout: TextIO
    stderr: TextIO
    environ: Mapping[str, str]
    max_concurrent_calls: int = 8
    _write_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _closing: threading.Event = field(default_factory=threading.Event, init=False)

    def run(self) -> int:
        """Serve until end of input or SIGTERM; always exits 0 after an orderly drain."""
        _start_table_helper(self.stderr)  # before any thread: table reads never fork this one
        delivery = Delivery(self.runtime, self.stderr) if self.runtime.outbox else None
        host = ToolHost(
            self.runtime,
            on_admitted=delivery.wake.set if delivery else (lambda: None),
            environ=self.environ,
        )
        pool = ThreadPoolExecutor(
            self.max_concurrent_calls, thread_name_prefix="artmem-call", initializer=block_sigterm
        )
        sigterm = _Sigterm()
        restore = sigterm.install()
        log(self.stderr, "worker.started", tools=len(host.tools), honcho=delivery is not None)
        if delivery is not None:
            delivery.start()
        try:
            sigterm.reading = True
            self._read_loop(host, pool)
            sigterm.reading = False  # from here on a SIGTERM can only be ignored
        except _Terminate:
            log(self.stderr, "worker.sigterm")
        finally:
            self._closing.set()
            pool.shutdown(wait=True)
            if delivery is not None:
                delivery.finish(self.runtime.config.honcho.drain_timeout_s)
            host.close()
            restore()
            if sigterm.ignored:
                log(self.stderr, "worker.sigterm_ignored", count=sigterm.ignored)
            stop_helper()
            log(self.stderr, "worker.stopped")
        return 0

    def _read_loop(self, host: ToolHost, pool: ThreadPoolExecutor) -> None:
        while (line := read_line(self.stdin, MAX_LINE_BYTES)) is not None:
            if isinstance(line, Oversized):
                log(self.stderr, "request.oversized", bytes=line.size)
                too_long = InvalidRequest(f"the request line is longer than {MAX_LINE_BYTES} bytes")
                self._reply(prefix_id(line.prefix[:ID_SCAN_BYTES]), error=too_long)
            elif line.strip():
                self._dispatch(line, host, pool)
        log(self.stderr, "worker.eof")

    def _dispatch(self, line: bytes, host: ToolHost, pool: ThreadPoolExecutor) -> None:
        try:
            request_id, op, caller, params = envelope(line)
        except InvalidRequest as exc:
            self._reply(best_id(line), error=exc)
            return
        if self._closing.is_set():
            self._reply(request_id, error=ShuttingDown("the worker is shutting down"))
            return
        if op == "shutdown":
            self._closing.set()
            self._reply(request_id, result={"stopping": True})
            return
        if op == "tools/call":
            pool.submit(self._guarded, request_id, lambda: _call(host, caller, params))
            return
        if op == "events/append":  # here, in order: a turn's events must be seen in sequence
            self._guarded(request_id, lambda: _append(host, caller, params))
            return
        if op == "recall/first-step":  # may wait on Honcho up to its deadline: not on the reader
            pool.submit(self._guarded, request_id, lambda: _first_step(host, caller, params))
            return
        self._guarded(request_id, lambda: self._simple(op, host))

    def _simple(self, op: str, host: ToolHost) -> object:
        if op == "hello":
            ops = [*OPS, "shutdown"]
            return {"protocol": PROTOCOL, "name": "artmem", "version": VERSION, "ops": ops}
        if op == "tools/list":
            return {"tools": [tool.describe() for tool in host.tools.values()]}
        if op == "status":
            view = status_view(self.runtime.config, self.environ)
            return msgspec.structs.replace(view, calls=host.metrics())
        raise InvalidRequest("unknown op")

    def _guarded(self, request_id: object, work: Callable[[], object]) -> None:
        started = time.perf_counter()
        try:
            result = work()
        except ArtifactError as exc:
            self._reply(request_id, error=exc)
            log(self.stderr, "request.failed", code=str(exc.code), ms=_ms(started))
            return
        except Exception as exc:  # a bug must not kill the worker or leak details
            self._reply(request_id, error=None, internal=type(exc).__name__)
            log(self.stderr, "request.crashed", kind=type(exc).__name__, ms=_ms(started))
            return
        self._reply(request_id, result=result)
        log(self.stderr, "request.done", ms=_ms(started))

    def _reply(
        self,
        request_id: object,
        *,
        result: object = None,
        error: ArtifactError | None = None,
        internal: str | None = None,
    ) -> None:
        reply: dict[str, object] = {"v": PROTOCOL, "id": request_id}
        if error is not None:
            reply |= {"ok": False, "error": {**error.to_dict(), "retryable": error.retryable}}
        elif internal is not None:
            message = "internal error; see the worker log"
            failure = {"code": ErrorCode.WORKER_INTERNAL, "message": message, "retryable": False}
            reply |= {"ok": False, "error": failure}
        else:
            reply |= {"ok": True, "result": result}
        data = msgspec.json.encode(reply).decode() + "\n"
        with self._write_lock:
            self.stdout.write(data)
            self.stdout.flush()


def _call(host: ToolHost, caller: object, params: Mapping[str, object]) -> object:
    who = parse_caller(caller)
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidRequest("tools/call needs params.name")
    return host.call(name, params.get("arguments"), who)


def _append(host: ToolHost, caller: object, params: Mapping[str, object]) -> object:
    who = parse_session_caller(caller)
    if host.memory is None:
        return {"accepted": False, "captured": None, "skipped": "capture.off"}
    root = who.agent_kind == "root"
    return host.memory.append(who.session_id, who.cwd, root, params.get("event"))


def _first_step(host: ToolHost, caller: object, params: Mapping[str, object]) -> object:
    who = parse_session_caller(caller)
    if host.memory is None:
        return {"inject": None, "reason": "recall.off"}
    return host.memory.first_step(who.session_id, who.cwd, who.agent_kind == "root", params)


@dataclass
class _Sigterm:
    """SIGTERM leaves the blocking read once; during the shutdown drain it is ignored.

    A second SIGTERM (a supervisor repeating itself) must neither print a traceback from inside
    the `finally` that drains nor cut the drain short: the handler raises only while the read
    loop runs, and stops raising before it raises (no window lets two through).
    """

    reading: bool = False
    ignored: int = 0

    def install(self) -> Callable[[], None]:
        """Install the handler (main thread only); returns how to undo it."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, self._handle)

        def restore() -> None:
            # After an orderly drain a SIGTERM is moot: one still on its way (seen in CI, under
            # load, landing after the drain) must not kill the exiting worker with status -15.
            kept = previous if previous not in (None, signal.SIG_DFL) else signal.SIG_IGN
            signal.signal(signal.SIGTERM, kept)

        return restore

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        del signum, frame
        if self.reading:
            self.reading = False
            raise _Terminate()
        self.ignored += 1  # counted, logged after the drain (no I/O in a handler)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1e3, 2)


def serve(runtime: Runtime, environ: Mapping[str, str]) -> int:
    """Run the worker on this process's standard streams."""
    return JsonlWorker(runtime, sys.stdin.buffer, sys.stdout, sys.stderr, environ).run()


def _start_table_helper(stderr: TextIO) -> None:
    """Start the process that forks the table readers; without it, reads start it later."""
    try:
        start_helper()
    except ArtifactError as exc:
        log(stderr, "worker.table_helper_failed", error=str(exc.code))
