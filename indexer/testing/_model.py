"""The fake's vocabulary: route kinds, limits, the records it stores and the state behind them."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal, TypeAlias

DEFAULT_API_KEY: Final = "test-key"
MAX_MESSAGES_PER_REQUEST: Final = 100
MAX_MESSAGE_CHARS: Final = 25_000
MAX_METADATA_KEYS: Final = 100
MAX_METADATA_DEPTH: Final = 5
MAX_FILTER_DEPTH: Final = 5
MAX_PAGE_SIZE: Final = 100
DEFAULT_PAGE_SIZE: Final = 50
DEFAULT_SEARCH_LIMIT: Final = 10

RouteKind: TypeAlias = Literal[
    "health",
    "workspace_create",
    "workspace_list",
    "peer_create",
    "session_create",
    "session_peers",
    "session_peer_config",
    "message_create",
    "message_list",
    "session_search",
    "workspace_search",
    "peer_context",
    "peer_representation",
    "peer_chat",
    "session_list",
    "session_delete",
    "workspace_delete",
]
"""The kinds of route the fake serves; fault injection can target one of them."""

Outcome: TypeAlias = int | Literal["timeout", "disconnect", "refused"]
"""What a request got: an HTTP status, or a transport-level failure."""


# --------------------------------------------------------------------------------------------
# Public records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeMessage:
    """A stored message, shaped like the server's message response."""

    id: str
    content: str
    peer_id: str
    session_id: str
    workspace_id: str
    metadata: dict[str, object]
    created_at: datetime
    token_count: int

    def to_json(self) -> dict[str, object]:
        """Return the JSON object the server answers for this message."""
        return {
            "id": self.id,
            "content": self.content,
            "peer_id": self.peer_id,
            "session_id": self.session_id,
            "workspace_id": self.workspace_id,
            "metadata": copy.deepcopy(self.metadata),
            "created_at": self.created_at.isoformat(),
            "token_count": self.token_count,
        }


@dataclass(frozen=True)
class FakePeer:
    """A snapshot of a stored peer."""

    id: str
    workspace_id: str
    metadata: dict[str, object]
    configuration: dict[str, object]
    created_at: datetime


@dataclass(frozen=True)
class FakeSession:
    """A snapshot of a stored session; ``peers`` maps member ids to their session config."""

    id: str
    workspace_id: str
    metadata: dict[str, object]
    configuration: dict[str, object]
    peers: dict[str, dict[str, bool | None]]
    created_at: datetime


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received, kept for assertions.

    Attributes:
        method: The HTTP method.
        path: The percent-decoded path, e.g. ``/v3/workspaces/ws/sessions/s/messages``.
        query: The query parameters.
        body: The parsed JSON body; the decoded text if it was not JSON; None if empty.
        raw_body: The body bytes as received.
        kind: The route kind, or None for an unknown route.
        outcome: The status answered, or ``"timeout"``, ``"disconnect"`` or ``"refused"``.
        fault: The injected fault that shaped the outcome (``"fail"``, ``"timeout"``,
            ``"commit_then_fail"``, ``"down"``), or None.
        applied: True when the fake processed the request successfully (for a write, its effect
            was stored), whatever the client was then told.
    """

    method: str
    path: str
    query: dict[str, str]
    body: object
    raw_body: bytes
    kind: RouteKind | None
    outcome: Outcome
    fault: str | None
    applied: bool


# --------------------------------------------------------------------------------------------
# Internal state
# --------------------------------------------------------------------------------------------


@dataclass
class _Peer:
    id: str
    metadata: dict[str, object]
    configuration: dict[str, object]
    created_at: datetime
    # What the fake answers for this peer's memory (a real server derives it; tests set it).
    representation: str | None = None
    peer_card: list[str] | None = None
    chat_answer: str | None = None


@dataclass
class _Session:
    id: str
    metadata: dict[str, object]
    configuration: dict[str, object]
    created_at: datetime
    peers: dict[str, dict[str, bool | None]] = field(default_factory=dict)
    messages: list[FakeMessage] = field(default_factory=list)
    # A deleted session is only marked: its messages stay, and its id cannot be used again.
    active: bool = True


@dataclass
class _Workspace:
    id: str
    metadata: dict[str, object]
    configuration: dict[str, object]
    created_at: datetime
    peers: dict[str, _Peer] = field(default_factory=dict)
    sessions: dict[str, _Session] = field(default_factory=dict)
    messages: list[FakeMessage] = field(default_factory=list)  # every session's, in order


@dataclass(frozen=True)
class _Reply:
    status: int
    body: object = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        return b"" if self.body is None else json.dumps(self.body).encode()


_Transport: TypeAlias = Literal["timeout", "disconnect", "refused"]
_Result: TypeAlias = _Reply | _Transport


@dataclass
class _Fault:
    name: Literal["fail", "timeout", "commit_then_fail"]
    kind: RouteKind | None
    result: int | Literal["timeout", "disconnect"]
    retry_after: float | None = None

    def matches(self, kind: RouteKind) -> bool:
        if self.kind is None:
            return kind != "health"
        return self.kind == kind
