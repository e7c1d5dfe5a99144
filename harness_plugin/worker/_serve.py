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

import re
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
    NotOwner,
    ShuttingDown,
)
from harness_plugin._runtime import Runtime
from harness_plugin._status import status_view
from harness_plugin.worker._caller import parse_caller, parse_session_caller
from harness_plugin.worker._tools import ToolHost
from indexer import DeliveryWorker, Ownership

PROTOCOL = 1
VERSION = "0.1.0"
OPS = ("hello", "tools/list", "tools/call", "events/append", "recall/first-step", "status")
MAX_LINE_BYTES = 1 << 20
DISCARD_PIECE_BYTES = 1 << 16  # the rest of an oversized line is read and dropped in these
ID_SCAN_BYTES = 1 << 16  # how much of an oversized line is searched for its request id
MAX_ID_CHARS = 200
RECONCILE_EVERY_S = 300.0
IDLE_WAIT_S = 30.0


class _Terminate(Exception):
    """Raised by the SIGTERM handler to leave a blocking read."""


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than `MAX_LINE_BYTES`: its first bytes, and its whole length."""

    prefix: bytes
    size: int


def log(stream: TextIO, event: str, **fields: object) -> None:
    """One structured, content-free log line on stderr."""
    record = {"ts": round(time.time(), 3), "event": event, **fields}
    stream.write(msgspec.json.encode(record, order="sorted").decode() + "\n")
    stream.flush()


@dataclass
class Delivery:
    """The delivery loop: own the state root if free, reconcile, deliver on wake or schedule."""

    runtime: Runtime
    stderr: TextIO
    wake: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        """Run the loop in a daemon thread."""
        self.thread = threading.Thread(target=self._loop, name="artmem-delivery", daemon=True)
        self.thread.start()

    def finish(self, timeout_s: float) -> None:
        """Stop, letting the loop drain for at most `timeout_s`."""
        self.stop.set()
        self.wake.set()
        if self.thread is not None:
            self.thread.join(timeout_s + 5)

    def _loop(self) -> None:
        _block_sigterm()  # and so in every thread this one starts
        ownership = Ownership(self.runtime.config.state_root)
        service = self.runtime.service()
        worker = self.runtime.worker(ownership, service)
        owned = False
        last_reconcile = 0.0
        try:
            while not self.stop.is_set():
                if not owned:
                    owned = ownership.acquire()
                    log(self.stderr, "delivery.ownership", owned=owned)
                if owned and time.monotonic() - last_reconcile >= RECONCILE_EVERY_S:
                    self._reconcile()
                    last_reconcile = time.monotonic()
                if owned:
                    owned = self._deliver(worker)
                self.wake.wait(IDLE_WAIT_S)
                self.wake.clear()
            if owned:
                report = worker.drain(self.runtime.config.honcho.drain_timeout_s)
                log(self.stderr, "delivery.drained", delivered=report.delivered)
        except ArtifactError as exc:
            log(self.stderr, "delivery.stopped", code=str(exc.code))
        finally:
            ownership.release()
            service.close()

    def _reconcile(self) -> None:
        assert self.runtime.indexer is not None
        try:
            report = self.runtime.indexer.reconcile(self.runtime.config.honcho.reconcile_batch)
            log(self.stderr, "delivery.reconciled", admitted=report.admitted)
        except ArtifactError as exc:
            log(self.stderr, "delivery.reconcile_failed", code=str(exc.code))

    def _deliver(self, worker: DeliveryWorker) -> bool:
        try:
            report = worker.run_once()
        except NotOwner:
            log(self.stderr, "delivery.ownership_lost")
            return False
        except ArtifactError as exc:
            log(self.stderr, "delivery.failed", code=str(exc.code))
            return True
        if report.delivered or report.retried or report.dead_lettered or report.set_aside:
            log(
                self.stderr,
                "delivery.pass",
                delivered=report.delivered,
                retried=report.retried,
                dead=report.dead_lettered,
                set_aside=report.set_aside,
                circuit=str(worker.breaker.state),
            )
        return True


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
        delivery = Delivery(self.runtime, self.stderr) if self.runtime.outbox else None
        host = ToolHost(
            self.runtime,
            on_admitted=delivery.wake.set if delivery else (lambda: None),
            environ=self.environ,
        )
        pool = ThreadPoolExecutor(
            self.max_concurrent_calls, thread_name_prefix="artmem-call", initializer=_block_sigterm
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
            request_id, op, caller, params = _envelope(line)
        except InvalidRequest as exc:
            self._reply(_best_id(line), error=exc)
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
            return {**status_view(self.runtime.config, self.environ), "calls": host.metrics()}
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
            failure = {"code": "worker.internal", "message": message, "retryable": False}
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


def read_line(stream: BinaryIO, limit: int) -> bytes | Oversized | None:
    """The next line of `stream`, `Oversized` for one over `limit` bytes, None at end of input.

    Memory stays bounded: an oversized line keeps only its first `limit + 1` bytes, and the
    rest of it is read in pieces and dropped up to its newline, never parsed as requests.
    """
    line = stream.readline(limit + 1)
    if not line:
        return None
    if line.endswith(b"\n") or len(line) <= limit:
        return line
    size = len(line)
    while piece := stream.readline(DISCARD_PIECE_BYTES):
        size += len(piece)
        if piece.endswith(b"\n"):
            break
    return Oversized(line, size)


# A JSON string (whole), a lone quote (a string cut off), or a bracket.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|["{}\[\]]')
_COLON = re.compile(rb"[ \t\r\n]*:")
_ID_VALUE = re.compile(
    rb'[ \t\r\n]*(?:(-?(?:0|[1-9][0-9]{0,17}))|("(?:[^"\\]|\\.){0,200}"))[ \t\r\n]*[,}]'
)


def prefix_id(prefix: bytes) -> int | str | None:
    """The top-level `"id"` of a request cut short, when `prefix` holds all of it.

    Only a key of the outermost object counts (an `"id"` inside `params` is someone else's),
    and only a whole integer or a short string, followed by `,` or `}`.
    """
    if not prefix.lstrip().startswith(b"{"):
        return None
    depth = 0
    for token in _TOKEN.finditer(prefix):
        text = token.group()
        if text in (b"{", b"["):
            depth += 1
        elif text in (b"}", b"]"):
            depth -= 1
        elif text == b'"':
            return None  # a string runs past the prefix, and everything after it
        elif depth == 1 and text == b'"id"' and (colon := _COLON.match(prefix, token.end())):
            value = _ID_VALUE.match(prefix, colon.end())
            return None if value is None else _id_value(value.group(1), value.group(2))
    return None


def _id_value(number: bytes | None, string: bytes | None) -> int | str | None:
    if number is not None:
        return int(number)
    try:
        text = msgspec.json.decode(string or b"")
    except msgspec.DecodeError:  # a bad escape or invalid UTF-8
        return None
    return text if isinstance(text, str) and len(text) <= MAX_ID_CHARS else None


def _best_id(line: bytes) -> object:
    """The id of a rejected request when it can be read, so the host can match the error."""
    try:
        request_id = msgspec.json.decode(line).get("id")
    except (msgspec.DecodeError, AttributeError):
        return None
    valid = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return request_id if valid and len(str(request_id)) <= MAX_ID_CHARS else None


def _envelope(line: bytes) -> tuple[object, str, object, Mapping[str, object]]:
    try:
        request = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise InvalidRequest("the request line is not JSON") from exc
    if not isinstance(request, dict) or request.get("v") != PROTOCOL:
        raise InvalidRequest("a request is a JSON object with v = 1")
    request_id, op = request.get("id"), request.get("op")
    if not (isinstance(request_id, str | int) and not isinstance(request_id, bool)):
        raise InvalidRequest("a request needs an id (string or integer)")
    if isinstance(request_id, str) and len(request_id) > MAX_ID_CHARS:
        raise InvalidRequest("the request id is too long")
    params = request.get("params", {})
    if not isinstance(op, str) or not isinstance(params, dict):
        raise InvalidRequest("a request needs an op and object params")
    return request_id, op, request.get("caller"), params


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


def _block_sigterm() -> None:
    """Keep SIGTERM off this (non-main) thread, and the threads it starts.

    Python runs signal handlers in the main thread only; a SIGTERM the kernel hands to another
    thread merely flags it, and a main thread blocked reading stdin never notices. With every
    other thread blocking it, the kernel delivers SIGTERM to the main thread, interrupting the
    read.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1e3, 2)


def serve(runtime: Runtime, environ: Mapping[str, str]) -> int:
    """Run the worker on this process's standard streams."""
    return JsonlWorker(runtime, sys.stdin.buffer, sys.stdout, sys.stderr, environ).run()
