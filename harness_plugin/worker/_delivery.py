"""The delivery worker's thread inside `artmem serve`, and the worker's log lines."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

import msgspec

from cards import ArtifactError, NotOwner
from harness_plugin._runtime import Runtime
from indexer import DeliveryWorker, Ownership

RECONCILE_EVERY_S = 300.0
IDLE_WAIT_S = 30.0


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
        block_sigterm()  # and so in every thread this one starts
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


def block_sigterm() -> None:
    """Keep SIGTERM off this (non-main) thread, and the threads it starts.

    Python runs signal handlers in the main thread only; a SIGTERM the kernel hands to another
    thread merely flags it, and a main thread blocked reading stdin never notices. With every
    other thread blocking it, the kernel delivers SIGTERM to the main thread, interrupting the
    read.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
