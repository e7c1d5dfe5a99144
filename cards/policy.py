"""Bounds and freshness: the pure rules that records and resolves follow."""

from __future__ import annotations

import enum
from typing import Final

import msgspec

from cards.errors import ConfigError, QuotaExceeded

UNKNOWN_SOURCE_VERSION = "unknown"


RAISABLE: Final = {"artifact_bytes": 1 << 40, "project_bytes": 1 << 50}
"""The bounds on an operator's own bytes, which the operator may also raise, up to these
ceilings (a terabyte per file, a petabyte per project): the specification gives them as
defaults. The others bound what reaches a model or the index, and may only be lowered."""


class Limits(msgspec.Struct, frozen=True):
    """Resource and metadata bounds (Honcho spec §28.5); an operator may lower them.

    The `RAISABLE` ones may also be raised, up to their ceilings.
    """

    artifact_bytes: int = 1 << 30
    project_bytes: int = 20 << 30
    cards_per_project: int = 10_000
    title_chars: int = 200
    summary_chars: int = 2_000
    tags: int = 20
    tag_chars: int = 80
    columns: int = 256
    column_chars: int = 128
    search_results: int = 20

    def lowered(self, **overrides: int) -> Limits:
        """These limits with some lowered (or, for `RAISABLE` ones, raised to their ceiling).

        Raises:
            ConfigError: a name is unknown, or a value is not a positive integer at most the
                default (or the ceiling).
        """
        defaults = msgspec.structs.asdict(self)
        for name, value in overrides.items():
            if name not in defaults:
                raise ConfigError(f"limits.{name} is not a known limit")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"limits.{name} must be a positive integer")
            if name in RAISABLE:
                if value > RAISABLE[name]:
                    raise ConfigError(f"limits.{name} = {value} is above {RAISABLE[name]}")
                continue
            if value > defaults[name]:
                raise ConfigError(
                    f"limits.{name} = {value} is above the default {defaults[name]}; "
                    "limits may only be lowered"
                )
        return Limits(**{**defaults, **overrides})


DEFAULT_LIMITS = Limits()


class Freshness(enum.StrEnum):
    """How a stored result relates to the caller's current source version (Honcho spec §30.2)."""

    FRESH = "fresh"
    STALE = "stale"
    UNVERIFIABLE = "unverifiable"
    NOT_CHECKED = "not_checked"


def freshness(recorded: str, current: str | None) -> Freshness:
    """Compare a recorded source version with the caller's current one, exactly."""
    if current is None:
        return Freshness.NOT_CHECKED
    if UNKNOWN_SOURCE_VERSION in (recorded, current) or not current:
        return Freshness.UNVERIFIABLE
    return Freshness.FRESH if recorded == current else Freshness.STALE


def freshness_warning(state: Freshness) -> str | None:
    """The explicit warning a resolve must carry for a non-fresh comparison, if any."""
    if state is Freshness.STALE:
        return (
            "stale: the recorded source version differs from the current one; use this "
            "result only for historical comparison"
        )
    if state is Freshness.UNVERIFIABLE:
        return "unverifiable: a source version is unknown, so freshness cannot be proven"
    return None


def freshness_verdict(recorded: str, current: str | None) -> tuple[Freshness, tuple[str, ...]]:
    """The freshness of a recorded source version against `current`, with its warnings."""
    state = freshness(recorded, current)
    warning = freshness_warning(state)
    return state, (warning,) if warning else ()


def check_card_quota(cards: int, limits: Limits) -> None:
    """Refuse a new card when the project holds `cards` already (every backend's rule).

    Raises:
        QuotaExceeded: the project is at its card quota.
    """
    limit = limits.cards_per_project
    if cards >= limit:
        raise QuotaExceeded(f"the project already holds {limit} cards", limit=limit)


def check_byte_quota(used: int, size: int, limits: Limits) -> None:
    """Refuse `size` new bytes in a project already holding `used` (every backend's rule).

    Raises:
        QuotaExceeded: the bytes would exceed the project's quota.
    """
    limit = limits.project_bytes
    if used + size > limit:
        raise QuotaExceeded(
            f"recording {size} bytes would exceed the project's {limit}-byte quota "
            f"({used} bytes used)",
            limit=limit,
        )


class IndexState(enum.StrEnum):
    """Where a card stands with the Honcho index (Honcho spec §27.3, §29.2)."""

    PENDING = "pending"
    QUEUED = "queued"
    INDEXED = "indexed"
    FAILED = "failed"
    DISABLED = "disabled"


class HitSource(enum.StrEnum):
    """Where a search hit came from."""

    LOCAL = "local"
    HONCHO = "honcho"
    BOTH = "both"


# How every hit and card shown to a model is labelled: data, never instructions.
UNTRUSTED: Final = "untrusted-data"
