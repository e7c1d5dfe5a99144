"""Backoff and circuit breaker rules (pure; time is passed in)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st
from outbox_helpers import T0

from cards import RemoteRejected, RemoteUnauthorized, RemoteUnavailable
from indexer import RetryPolicy
from indexer._policy import CircuitBreaker, CircuitState


@given(st.integers(min_value=1, max_value=10_000), st.floats(min_value=0, max_value=0.999))
def test_backoff_is_bounded_and_jittered(attempts, unit):
    policy = RetryPolicy(base_s=1, max_s=300)
    delay = policy.delay(attempts, unit)
    cap = min(300, 2 ** (attempts - 1))
    assert cap / 2 <= delay <= cap


def test_backoff_grows_exponentially_until_the_cap():
    policy = RetryPolicy(base_s=1, max_s=60)
    assert [policy.delay(n, 0.0) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert policy.delay(100, 0.999) <= 60
    assert policy.exhausted(50) and not policy.exhausted(49)


def test_authentication_failure_opens_at_once_and_half_opens_after_cooldown():
    breaker = CircuitBreaker(cooldown_s=30)
    assert breaker.allow(T0)
    breaker.failure(RemoteUnauthorized("401"), T0)
    assert breaker.state is CircuitState.OPEN
    assert not breaker.allow(T0 + timedelta(seconds=29))
    assert breaker.allow(T0 + timedelta(seconds=30))  # the one probe
    assert breaker.state is CircuitState.HALF_OPEN
    assert not breaker.allow(T0 + timedelta(seconds=30))  # only one probe at a time
    breaker.failure(RemoteUnauthorized("401"), T0 + timedelta(seconds=31))
    assert breaker.state is CircuitState.OPEN
    assert breaker.allow(T0 + timedelta(seconds=61))
    breaker.success()
    assert breaker.state is CircuitState.CLOSED


def test_transient_failures_open_after_the_threshold():
    breaker = CircuitBreaker(failure_threshold=3)
    for _ in range(2):
        breaker.failure(RemoteUnavailable("503"), T0)
    assert breaker.state is CircuitState.CLOSED
    breaker.failure(RemoteUnavailable("503"), T0)
    assert breaker.state is CircuitState.OPEN
    assert breaker.last_error == "indexer.remote_unavailable"


def test_a_rejection_proves_the_server_reachable():
    breaker = CircuitBreaker(failure_threshold=2)
    breaker.failure(RemoteUnavailable("503"), T0)
    breaker.failure(RemoteRejected("422"), T0)
    breaker.failure(RemoteUnavailable("503"), T0)
    assert breaker.state is CircuitState.CLOSED


@given(
    st.lists(
        st.sampled_from(["ok", "unavailable", "unauthorized", "rejected", "tick"]), max_size=60
    )
)
def test_breaker_never_allows_two_probes_and_always_recovers(events):
    breaker = CircuitBreaker(failure_threshold=3, cooldown_s=30)
    now = T0
    errors = {
        "unavailable": RemoteUnavailable("x"),
        "unauthorized": RemoteUnauthorized("x"),
        "rejected": RemoteRejected("x"),
    }
    for event in events:
        if event == "tick":
            now += timedelta(seconds=31)
            continue
        if not breaker.allow(now):
            assert breaker.state in (CircuitState.OPEN, CircuitState.HALF_OPEN)
            continue
        if breaker.state is CircuitState.HALF_OPEN:
            assert not breaker.allow(now)
        if event == "ok":
            breaker.success()
        else:
            breaker.failure(errors[event], now)
    now += timedelta(seconds=31)
    assert breaker.allow(now)  # a cooldown always leads back to a probe
    breaker.success()
    assert breaker.state is CircuitState.CLOSED


def test_which_remote_errors_are_retryable():
    assert RemoteUnavailable.retryable
    assert not RemoteUnauthorized.retryable and not RemoteRejected.retryable
