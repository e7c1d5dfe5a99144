"""Retry and circuit-breaker rules: pure, with the clock and randomness passed in."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from cards import ArtifactError, RemoteUnauthorized


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with equal jitter, capped; after `max_attempts` a delivery is dead."""

    base_s: float = 1.0
    max_s: float = 300.0
    max_attempts: int = 50

    def delay(self, attempts: int, unit_random: float) -> float:
        """Seconds to wait after the `attempts`-th failure; `unit_random` is uniform in [0, 1)."""
        capped = min(self.max_s, self.base_s * 2.0 ** max(0, min(attempts - 1, 60)))
        return capped / 2 + unit_random * capped / 2

    def exhausted(self, attempts: int) -> bool:
        """Whether a delivery has used up its attempts."""
        return attempts >= self.max_attempts


class CircuitState(enum.StrEnum):
    """The breaker's state, as status reports it."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(slots=True)
class CircuitBreaker:
    """Stops requests after an authentication failure (at once) or repeated transient failures.

    After `cooldown_s` one probe is let through (half-open): success closes the circuit, failure
    opens it again. Only retryable failures and authentication failures count; a permanent
    rejection (422) proves the server reachable and is a success for the breaker.
    """

    failure_threshold: int = 5
    cooldown_s: float = 30.0
    state: CircuitState = CircuitState.CLOSED
    failures: int = 0
    opened_at: datetime | None = None
    probing: bool = False
    last_error: str | None = None

    def allow(self, now: datetime) -> bool:
        """Whether a request may be sent at `now` (claims the single half-open probe)."""
        if self.state is CircuitState.OPEN:
            assert self.opened_at is not None
            if now < self.opened_at + timedelta(seconds=self.cooldown_s):
                return False
            self._move(CircuitState.HALF_OPEN)
        if self.state is CircuitState.HALF_OPEN:
            if self.probing:
                return False
            self.probing = True
        return True

    def success(self) -> None:
        """A request reached the server and was answered."""
        self.failures = 0
        self.probing = False
        if self.state is not CircuitState.CLOSED:
            self._move(CircuitState.CLOSED)

    def failure(self, error: ArtifactError, now: datetime) -> None:
        """A request failed with `error`."""
        self.last_error = str(error.code)
        self.probing = False
        if not (error.retryable or isinstance(error, RemoteUnauthorized)):
            self.success()
            return
        self.failures += 1
        opens = (
            isinstance(error, RemoteUnauthorized)
            or self.state is CircuitState.HALF_OPEN
            or self.failures >= self.failure_threshold
        )
        if opens:
            self.opened_at = now
            if self.state is not CircuitState.OPEN:
                self._move(CircuitState.OPEN)

    def _move(self, state: CircuitState) -> None:
        self.state = state
