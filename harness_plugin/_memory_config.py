"""`[capture]` and `[recall]`: the conversational layer's configuration, both off by default.

A mistake fails at start (strict, like the rest of the file); at run time every remote failure
fails open. Bounds follow spec §11.2 and §13.3.
"""

from __future__ import annotations

import enum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
_ENUM = Field(strict=False)  # an enum is given as its string in TOML


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


class CaptureConfig(BaseModel):
    """Capture of completed root turns into Honcho (spec §11)."""

    model_config = _STRICT

    mode: Annotated[CaptureMode, _ENUM] = CaptureMode.OFF
    max_message_chars: Annotated[int, Field(ge=100, le=25_000)] = 8_000
    max_exchange_chars: Annotated[int, Field(ge=100, le=100_000)] = 24_000
    oversize: Annotated[Oversize, _ENUM] = Oversize.TRUNCATE
    observe_assistant: bool = False  # whether Honcho derives a representation of the assistant
    max_sessions: Annotated[int, Field(ge=1, le=10_000)] = 256  # per-session buffers kept
    max_turn_messages: Annotated[int, Field(ge=1, le=99)] = 20  # user messages kept per turn


class RecallConfig(BaseModel):
    """First-step recall (spec §13) and the bounds of `memory_recall`."""

    model_config = _STRICT

    mode: Annotated[RecallMode, _ENUM] = RecallMode.OFF
    timeout_ms: Annotated[int, Field(ge=10, le=10_000)] = 1_500
    max_items: Annotated[int, Field(ge=1, le=20)] = 5
    max_tokens: Annotated[int, Field(ge=50, le=8_000)] = 1_200
    max_item_chars: Annotated[int, Field(ge=50, le=4_000)] = 2_000
    max_query_chars: Annotated[int, Field(ge=20, le=10_000)] = 2_000
    cache_s: Annotated[int, Field(ge=0, le=3_600)] = 60
    dialectic: bool = False  # memory_recall may ask Honcho's dialectic endpoint (slow, costly)
    dialectic_timeout_ms: Annotated[int, Field(ge=100, le=60_000)] = 8_000
    include_experiments: bool = False  # add local experiment-card hits, labelled as cards
    max_experiments: Annotated[int, Field(ge=1, le=10)] = 3
