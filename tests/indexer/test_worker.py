"""The delivery worker: order, backoff, breaker, duplicate defence, ownership, bounded drain."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from honcho_helpers import KEY, settings
from outbox_helpers import T0, make_entry

from cards import NotOwner
from indexer import (
    DeliveryWorker,
    HonchoMemoryService,
    Outbox,
    Ownership,
    RetryPolicy,
    read_status,
)
from indexer._policy import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = T0
        self.slept: list[float] = []

    def __call__(self):
        return self.now

    def sleep(self, seconds: float) -> None:  # advances fake time; nothing really waits
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def state(tmp_path):
    return str(tmp_path / "state")


def _worker(state, service, clock, **kwargs):
    ownership = Ownership(state)
    assert ownership.acquire()
    kwargs.setdefault("policy", RetryPolicy(base_s=1, max_s=8, max_attempts=5))
    return DeliveryWorker(
        outbox=Outbox(state),
        service=service,
        ownership=ownership,
        clock=clock,
        sleep=clock.sleep,
        rand=lambda: 0.5,
        **kwargs,
    )


def _contents(fake, session):
    return [m.content for m in fake.messages("ws", session)]


def test_per_session_fifo_and_sessions_independent(fake, service, state, clock):
    outbox = Outbox(state)
    for n in range(4):
        outbox.admit(make_entry(n, session="sess-a", seq=n))
        outbox.admit(make_entry(n, session="sess-b", seq=10 + n))
    worker = _worker(state, service, clock)
    report = worker.run_once()
    assert report.delivered == 8 and outbox.pending() == []
    assert _contents(fake, "sess-a") == [f"message {n}.0 for sess-a" for n in range(4)]
    assert _contents(fake, "sess-b") == [f"message {n}.0 for sess-b" for n in range(4)]


def test_a_failing_head_blocks_its_session_only(fake, service, state, clock):
    outbox = Outbox(state)
    for n in range(3):
        outbox.admit(make_entry(n, session="sess-a", seq=n))
    outbox.admit(make_entry(0, session="sess-b", seq=100))
    fake.fail_next(1, status=503, kind="message_create")
    worker = _worker(state, service, clock, max_sessions=1)
    report = worker.run_once()
    # sess-a's head failed: nothing behind it moved; sess-b went through
    assert report.retried == 1 and report.delivered == 1
    assert _contents(fake, "sess-a") == []
    head = outbox.pending()[0]
    assert head.attempts == 1 and head.last_error == "indexer.remote_unavailable"
    assert head.next_attempt_at == T0 + timedelta(seconds=0.75)
    assert worker.run_once().delivered == 0  # not due yet: no request
    clock.sleep(1)
    assert worker.run_once().delivered == 3  # the retried head, then the two behind it
    assert _contents(fake, "sess-a") == [f"message {n}.0 for sess-a" for n in range(3)]


def test_commit_then_fail_ends_with_exactly_one_copy(fake, service, state, clock):
    outbox = Outbox(state)
    entry = make_entry(1)
    outbox.admit(entry)
    fake.commit_then_fail_next(1, status=500, kind="message_create")
    worker = _worker(state, service, clock)
    assert worker.run_once().retried == 1
    assert len(fake.messages("ws", entry.target.session_id)) == 1  # committed despite the 500
    clock.sleep(5)
    report = worker.run_once()
    assert report.deduplicated == 1 and outbox.pending() == []
    assert len(fake.messages("ws", entry.target.session_id)) == 1
    kinds = [r.kind for r in fake.requests]
    assert kinds.count("message_list") == 1 and kinds.count("message_create") == 1


def test_partial_delivery_uploads_only_the_missing_messages(fake, service, state, clock):
    outbox = Outbox(state)
    entry = make_entry(1, parts=3)
    service.deliver(entry.target, entry.messages[:1])  # one of three already on the server
    outbox.admit(entry.changed(maybe_sent=True))
    worker = _worker(state, service, clock)
    assert worker.run_once().deduplicated == 1
    assert _contents(fake, entry.target.session_id) == [m.content for m in entry.messages]


def test_permanent_rejection_goes_to_dead_letter_and_the_queue_moves_on(
    fake, service, state, clock
):
    outbox = Outbox(state)
    first, second = make_entry(1, seq=1), make_entry(2, seq=2)
    outbox.admit(first)
    outbox.admit(second)
    dead = []
    fake.fail_next(1, status=422, kind="message_create")
    worker = _worker(state, service, clock, on_dead=lambda e, code: dead.append(code))
    report = worker.run_once()
    assert report.dead_lettered == 1 and report.delivered == 1
    assert outbox.dead_reason(first.delivery_id) == "indexer.remote_rejected"
    assert dead == ["indexer.remote_rejected"]
    assert worker.breaker.state == "closed"


def test_retries_are_exhausted_into_dead_letter(fake, service, state, clock):
    outbox = Outbox(state)
    entry = make_entry(1)
    outbox.admit(entry)
    fake.fail_next(10, status=503, kind="message_create")
    fake.fail_next(10, status=503, kind="message_list")
    worker = _worker(
        state,
        service,
        clock,
        policy=RetryPolicy(base_s=1, max_s=2, max_attempts=3),
        breaker=CircuitBreaker(failure_threshold=100),
    )
    worker.drain(120)
    assert outbox.dead_reason(entry.delivery_id) == "indexer.retries_exhausted"


def test_bad_key_opens_the_circuit_after_one_request(fake, state, clock):
    service = HonchoMemoryService(settings(), "wrong-key", fake.transport())
    outbox = Outbox(state)
    for n in range(5):
        outbox.admit(make_entry(n, session=f"s{n}", seq=n))
    worker = _worker(state, service, clock, max_sessions=1)
    report = worker.run_once()
    assert len(fake.requests) == 1  # the first request failed 401; nothing else was sent
    assert worker.breaker.state == "open" and report.blocked == 4
    worker.run_once()
    clock.sleep(29)
    worker.run_once()
    assert len(fake.requests) == 1  # no hot loop while open
    clock.sleep(1)
    worker.run_once()
    assert len(fake.requests) == 2  # one half-open probe, which fails again
    status = read_status(state)
    assert status["circuit"] == "open" and status["last_error"] == "indexer.remote_unauthorized"
    for path in Path(state).rglob("*"):
        if path.is_file():
            assert b"wrong-key" not in path.read_bytes() and KEY.encode() not in path.read_bytes()
    assert len(outbox.pending()) == 5  # all still durable


def test_two_workers_on_one_state_root(fake, service, state, clock):
    first = Ownership(state)
    second = Ownership(state)
    assert first.acquire()
    assert not second.acquire()
    Outbox(state).admit(make_entry(1))
    idle = DeliveryWorker(Outbox(state), service, second, clock=clock, sleep=clock.sleep)
    with pytest.raises(NotOwner):
        idle.run_once()
    assert fake.requests == []


def test_a_replaced_worker_cannot_publish(fake, service, state, clock):
    old = _worker(state, service, clock)
    old.ownership.release()
    successor = Ownership(state)
    assert successor.acquire() and successor.generation == old.ownership.generation + 1
    Outbox(state).admit(make_entry(1))
    old.ownership._fd = os.open(os.devnull, os.O_RDONLY)  # pretend it still holds a lock
    try:
        with pytest.raises(NotOwner):
            old.run_once()
    finally:
        old.ownership.release()
    assert fake.requests == [] and len(Outbox(state).pending()) == 1


def test_drain_is_bounded_and_leaves_the_rest_durable(fake, service, state, clock):
    outbox = Outbox(state)
    outbox.admit(make_entry(1))
    fake.down = True
    worker = _worker(state, service, clock, breaker=CircuitBreaker(failure_threshold=100))
    report = worker.drain(10)
    assert report.delivered == 0 and len(outbox.pending()) == 1
    assert (clock.now - T0).total_seconds() <= 10
    fake.down = False
    clock.sleep(60)
    assert worker.drain(10).delivered == 1


def test_worker_status_is_content_free(fake, service, state, clock):
    Outbox(state).admit(make_entry(1))
    worker = _worker(state, service, clock)
    worker.run_once()
    status = read_status(state)
    assert set(status) == {"circuit", "generation", "last_error", "updated_at"}
    assert json.dumps(status).find("message 1") == -1


@pytest.mark.parametrize("damage", ["garbage", "truncated", "symlink"])
def test_the_worker_dead_letters_a_corrupt_conversation_document(
    fake, service, state, clock, damage, tmp_path
):
    # Issue 30: only `fsck --repair` moved it; the worker now does on its pass.
    outbox = Outbox(state)
    bad, good = make_entry(1, seq=1), make_entry(2, seq=2)
    outbox.admit(bad)
    outbox.admit(good)
    path = Path(state, "outbox", "pending", bad.delivery_id + ".json")
    raw = path.read_bytes()
    if damage == "symlink":
        path.unlink()
        (tmp_path / "elsewhere.json").write_bytes(raw)
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.write_bytes(b"\x00garbage" if damage == "garbage" else raw[: len(raw) // 2])
    report = _worker(state, service, clock).run_once()
    assert report.set_aside == 1 and report.delivered == 1 and report.progressed
    assert not path.exists() and not path.is_symlink()
    assert Path(state, "outbox", "dead-letter", bad.delivery_id + ".corrupt").is_symlink() == (
        damage == "symlink"
    )
    assert outbox.dead_reason(bad.delivery_id) == "indexer.outbox_corrupt"
    assert outbox.check().ok and outbox.stats().invalid == 0
    assert _contents(fake, good.target.session_id) == ["message 2.0 for sess-a"]
