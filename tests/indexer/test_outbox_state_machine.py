"""A state machine over admissions, deliveries, Honcho faults and crashes (process restarts).

Whatever the interleaving: nothing admitted is lost (it reaches Honcho or, if rejected, the dead
letters), nothing reaches Honcho twice, and each session's deliveries arrive in admission order.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from datetime import timedelta

from honcho_helpers import KEY, settings
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from outbox_helpers import T0, make_entry

from indexer import (
    DeliveryWorker,
    HonchoMemoryService,
    Outbox,
    Ownership,
    RetryPolicy,
)
from indexer._policy import CircuitBreaker
from indexer.testing import FakeHoncho

SESSIONS = ("sess-a", "sess-b")


class Crash(Exception):
    """The process dies after Honcho committed, before the local acknowledgement."""


class OutboxMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="artmem-sm-")
        self.state = f"{self.root}/state"
        self.fake = FakeHoncho(api_key=KEY)
        self.now = T0
        self.counter = 0
        self.admitted: dict[str, list[str]] = {s: [] for s in SESSIONS}
        self.parts: dict[str, int] = {}
        self.crash_on_ack = False
        self.worker: DeliveryWorker | None = None
        self._restart()

    def _restart(self) -> None:
        if self.worker is not None:
            self.worker.ownership.release()
            self.worker.service.close()  # type: ignore[attr-defined]
        ownership = Ownership(self.state)
        assert ownership.acquire()
        self.worker = DeliveryWorker(
            outbox=Outbox(self.state),
            service=HonchoMemoryService(settings(), KEY, self.fake.transport()),
            ownership=ownership,
            policy=RetryPolicy(base_s=1, max_s=4, max_attempts=1000),
            breaker=CircuitBreaker(failure_threshold=3, cooldown_s=30),
            clock=lambda: self.now,
            sleep=self._sleep,
            rand=lambda: 0.5,
            on_ack=self._on_ack,
        )

    def _sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def _on_ack(self, entry, code) -> None:
        if self.crash_on_ack:
            self.crash_on_ack = False
            raise Crash()

    @rule(session=st.sampled_from(SESSIONS), parts=st.integers(1, 3))
    def admit(self, session, parts):
        self.counter += 1
        entry = make_entry(self.counter, session=session, seq=self.counter, parts=parts)
        Outbox(self.state).admit(entry)  # any process may admit
        self.admitted[session].append(entry.delivery_id)
        self.parts[entry.delivery_id] = parts

    @rule(
        fault=st.sampled_from(
            ["fail503", "timeout", "commit500", "commit_disconnect", "reject", "list_fail"]
        ),
        n=st.integers(1, 2),
    )
    def inject(self, fault, n):
        create = "message_create"
        if fault == "fail503":
            self.fake.fail_next(n, status=503, kind=create)
        elif fault == "timeout":
            self.fake.timeout_next(n, kind=create)
        elif fault == "commit500":
            self.fake.commit_then_fail_next(n, status=500, kind=create)
        elif fault == "commit_disconnect":
            self.fake.commit_then_fail_next(n, status="disconnect", kind=create)
        elif fault == "reject":
            self.fake.fail_next(1, status=422, kind=create)
        else:
            self.fake.fail_next(n, status=503, kind="message_list")

    @rule(down=st.booleans())
    def set_down(self, down):
        self.fake.down = down

    @rule()
    def deliver(self):
        try:
            self.worker.run_once()
        except Crash:
            self._restart()

    @rule()
    def crash_after_next_commit(self):
        self.crash_on_ack = True

    @rule()
    def restart(self):
        self._restart()

    @rule(seconds=st.integers(1, 60))
    def tick(self, seconds):
        self.now += timedelta(seconds=seconds)

    # -- invariants ----------------------------------------------------------------------

    def _remote(self, session):
        return (
            [m.metadata for m in self.fake.messages("ws", session)] if self._known(session) else []
        )

    def _known(self, session):
        return "ws" in self.fake.workspaces() and session in self.fake.sessions("ws")

    @invariant()
    def nothing_is_duplicated(self):
        for session in SESSIONS:
            seen = Counter(
                (md["delivery_id"], md.get("message_fingerprint"), md["part"])
                for md in self._remote(session)
            )
            assert all(count == 1 for count in seen.values()), seen

    @invariant()
    def order_is_kept(self):
        for session in SESSIONS:
            arrived = list(dict.fromkeys(md["delivery_id"] for md in self._remote(session)))
            positions = [self.admitted[session].index(d) for d in arrived]
            assert positions == sorted(positions)

    def teardown(self):
        try:
            self.fake.clear_faults()
            self.fake.down = False
            self.crash_on_ack = False
            self._restart()
            for _ in range(5):
                self.now += timedelta(seconds=120)
                self.worker.drain(600)
            outbox = Outbox(self.state)
            assert outbox.pending() == []
            dead = {d for s in SESSIONS for d in self.admitted[s] if outbox.dead_reason(d)}
            for session in SESSIONS:
                remote = Counter(md["delivery_id"] for md in self._remote(session))
                for delivery in self.admitted[session]:
                    if delivery in dead:
                        assert remote[delivery] == 0  # a 422 commits nothing
                    else:
                        assert remote[delivery] == self.parts[delivery]  # all parts, once
            self.nothing_is_duplicated()
            self.order_is_kept()
        finally:
            self.worker.ownership.release()
            shutil.rmtree(self.root, ignore_errors=True)


OutboxMachine.TestCase.settings = hsettings(max_examples=80, stateful_step_count=40, deadline=None)
TestOutboxStateMachine = OutboxMachine.TestCase
