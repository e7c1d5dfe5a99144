"""`[capture]` and `[recall]`: the conversational layer's configuration, both off by default.

A mistake fails at start (strict, like the rest of the file); at run time every remote failure
fails open. Bounds follow Honcho spec §11.2 and §13.3.
"""

from __future__ import annotations

import enum
from typing import Annotated

from msgspec import Meta, Struct


class Section(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A table of the configuration file, strict: unknown keys fail and nothing is coerced.

    A quoted "10" is not the number 10 and "yes" is not true; an enum is given as its string.
    """


class CaptureMode(enum.StrEnum):
    """Which turns are captured."""

    OFF = "off"
    COMPLETED_ROOT_TURNS = "completed-root-turns"


class Oversize(enum.StrEnum):
    """What happens to a message or exchange over its bound."""

    TRUNCATE = "truncate"
    SKIP = "skip"


class RecallMode(enum.StrEnum):
    """When recall is injected."""

    OFF = "off"
    FIRST_ROOT_STEP = "first-root-step"


class CaptureConfig(Section, frozen=True):
    """Capture of completed root turns into Honcho (Honcho spec §11)."""

    mode: CaptureMode = CaptureMode.OFF
    max_message_chars: Annotated[int, Meta(ge=100, le=25_000)] = 8_000
    max_exchange_chars: Annotated[int, Meta(ge=100, le=100_000)] = 24_000
    oversize: Oversize = Oversize.TRUNCATE
    observe_assistant: bool = False  # whether Honcho derives a representation of the assistant
    max_sessions: Annotated[int, Meta(ge=1, le=10_000)] = 256  # per-session buffers kept
    max_turn_messages: Annotated[int, Meta(ge=1, le=99)] = 20  # user messages kept per turn


class RecallConfig(Section, frozen=True):
    """First-step recall (Honcho spec §13) and the bounds of `memory_recall`."""

    mode: RecallMode = RecallMode.OFF
    timeout_ms: Annotated[int, Meta(ge=10, le=10_000)] = 1_500
    max_items: Annotated[int, Meta(ge=1, le=20)] = 5
    max_tokens: Annotated[int, Meta(ge=50, le=8_000)] = 1_200
    max_item_chars: Annotated[int, Meta(ge=50, le=4_000)] = 2_000
    max_query_chars: Annotated[int, Meta(ge=20, le=10_000)] = 2_000
    cache_s: Annotated[int, Meta(ge=0, le=3_600)] = 60
    dialectic: bool = False  # memory_recall may ask Honcho's dialectic endpoint (slow, costly)
    dialectic_timeout_ms: Annotated[int, Meta(ge=100, le=60_000)] = 8_000
    include_experiments: bool = False  # add local experiment-card hits, labelled as cards
    max_experiments: Annotated[int, Meta(ge=1, le=10)] = 3
