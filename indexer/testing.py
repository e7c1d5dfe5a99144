"""An in-memory fake of the Honcho v3 HTTP API, for tests and benchmarks.

`FakeHoncho` answers the HTTP requests the real ``honcho-ai`` SDK sends, so tests exercise the
SDK itself rather than a mock of it. It is written from the documented contract of Honcho server
v3.0.12 (``shared/reference/honcho-notes.md``), not from the server's code. Use it either way:

```python
fake = FakeHoncho(api_key="test-key")
client = fake.client("http://honcho.test")  # httpx.Client over httpx.MockTransport
sdk = honcho.Honcho(api_key="test-key", base_url="http://honcho.test", workspace_id="ws",
                    max_retries=0, http_client=client)

with fake.serve() as base_url:  # a real HTTP server on 127.0.0.1, for subprocesses/benchmarks
    ...
```

Routes (all JSON; every route except ``GET /health`` needs ``Authorization: Bearer <api_key>``,
else 401; 422 bodies carry ``{"detail": ...}``):

* ``POST /v3/workspaces`` ``{"id", "metadata"?, "configuration"?}``: get-or-create, 201 created
  or 200 existing.
* ``POST /v3/workspaces/list?page=&size=`` ``{"filters"?: {"id"}}``: a page of workspaces.
* ``POST /v3/workspaces/{ws}/peers`` ``{"id", "metadata"?, "configuration"?: {"observe_me"}}``:
  get-or-create (the workspace too).
* ``POST /v3/workspaces/{ws}/sessions`` ``{"id", "metadata"?, "configuration"?, "peers"?}``:
  get-or-create (the workspace and the named peers too).
* ``GET|POST|PUT /v3/workspaces/{ws}/sessions/{s}/peers``: list (a page), add, set members.
* ``GET|PUT /v3/workspaces/{ws}/sessions/{s}/peers/{p}/config``: 200, and 204 with no body.
* ``POST /v3/workspaces/{ws}/sessions/{s}/messages`` ``{"messages": [...]}``: 201 with the list of
  created messages; get-or-creates the workspace, the session and the authoring peers.
* ``POST /v3/workspaces/{ws}/sessions/{s}/messages/list?page=&size=&reverse=`` ``{"filters"?}``.
* ``POST /v3/workspaces/{ws}/sessions/{s}/search`` and ``POST /v3/workspaces/{ws}/search``
  ``{"query", "filters"?, "limit"?}``: a bare list of messages.
* ``GET /health``: ``{"status": "ok"}``.

Anything else is answered 404 (``FakeHoncho does not implement ...``).

Rules enforced: ids match ``^[A-Za-z0-9_-]{1,512}$`` in bodies **and in paths** (the server checks
only bodies; the fake is stricter so a client bug surfaces in tests; the pattern already excludes
the reserved ``scope.`` peer prefix); 1-100 messages per create; content at most 25,000 characters
(NUL characters are then stripped); metadata a JSON object with at most 100 top-level keys and at
most 5 levels of nested objects/arrays (the metadata object itself is level 1); unknown body keys,
filter keys and filter operators are rejected with 422. Body validation errors are FastAPI-style
lists that echo the offending ``input`` (content included), as FastAPI does. There are no
idempotency keys: a repeated create stores a second copy, as the real server does.

Simplifications, deliberately documented:

* Search is keyword only and unranked: a query containing punctuation (``-`` and ``_`` included)
  is a case-insensitive substring match on the content; otherwise every query word, lower-cased,
  minus a few English stop words, must occur as a whole word of the content, where a trailing
  plural ``s`` is ignored (no other stemming, no embeddings). Hits come back in insertion order.
* Filters: ``{"metadata": {...}}`` is JSONB containment (a nested object matches if contained, a
  list means "contains these elements"); a metadata key whose value is an object made only of
  operators applies those operators to that key. Top-level fields ``workspace_id``,
  ``session_id``, ``peer_id``, ``token_count``, ``created_at`` accept a scalar (equality), a list
  (membership), ``"*"`` (anything), ``null`` or an operator object (``gte lte gt lt ne in contains
  icontains``); ``AND``/``OR``/``NOT`` take a list of filters (``NOT`` keeps rows where none
  matches, so a missing metadata key passes), nested at most 5 deep.
* ``token_count`` is ``ceil(len(content) / 4)``, not a tokenizer's count.
* Listing or searching a session that does not exist returns an empty result, not 404.
* Existing peers and sessions: provided metadata replaces, provided configuration is merged key
  by key, provided session peers are added.

Fault injection (each injected fault consumes one matching request, in the order queued, before
authentication; a fault targets one `RouteKind` or, with ``kind=None``, any route except
``/health`` - note the SDK's first request from a new client is ``POST /v3/workspaces``):

* `FakeHoncho.fail_next`: answer with a status (default 503) without touching state.
* `FakeHoncho.timeout_next`: no answer and no effect. Through the MockTransport the client sees
  ``httpx.ReadTimeout``; over HTTP the server holds the connection open without answering until
  the client gives up and closes it, or ``timeout_hold_s`` passes, or the server stops: the client
  waits for its own timeout, so give the SDK a short ``timeout`` in tests (nothing calls sleep).
* `FakeHoncho.commit_then_fail_next`: apply the request, then answer 500 (or another status), or
  drop the connection (``"disconnect"``: ``httpx.RemoteProtocolError`` through the MockTransport,
  a closed socket over HTTP), or time out (``"timeout"``) - the ambiguous outcomes.
* `FakeHoncho.down`: connection refused. Through the MockTransport every request raises
  ``httpx.ConnectError``; over HTTP the listener is closed (and open connections are cut), and it
  is reopened on the same port when ``down`` goes back to False.
* ``latency_s``: added before each answer over HTTP only (for benchmarks).

Inspection: `FakeHoncho.messages`, `FakeHoncho.sessions`, `FakeHoncho.peers`,
`FakeHoncho.workspaces` and `FakeHoncho.requests`, a log of every request with its parsed body
(the ``Authorization`` header is not kept). Everything is guarded by one lock, so the fake can be
shared by threads and by the HTTP server's handler threads.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import random
import re
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final, Literal, TypeAlias
from urllib.parse import parse_qsl, unquote

import httpx

__all__ = [
    "DEFAULT_API_KEY",
    "MAX_MESSAGE_CHARS",
    "MAX_MESSAGES_PER_REQUEST",
    "FakeHoncho",
    "FakeMessage",
    "FakePeer",
    "FakeSession",
    "Outcome",
    "RecordedRequest",
    "RouteKind",
]

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
]
"""The kinds of route the fake serves; fault injection can target one of them."""

Outcome: TypeAlias = int | Literal["timeout", "disconnect", "refused"]
"""What a request got: an HTTP status, or a transport-level failure."""

_ID = re.compile(r"[A-Za-z0-9_-]{1,512}")
_NANOID_ALPHABET: Final = "_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NANOID_SIZE: Final = 21
_FIELDS: Final = frozenset({"workspace_id", "session_id", "peer_id", "token_count", "created_at"})
_OPERATORS: Final = frozenset({"gte", "lte", "gt", "lt", "ne", "in", "contains", "icontains"})
_STOP_WORDS: Final = frozenset(
    "a an and are as at be by for from in is it of on or that the this to was were with".split()
)
_PUNCTUATION = re.compile(r"[^\w\s]|_")
_WORD = re.compile(r"[^\W_]+")

_SESSION_CONFIG_KEYS: Final[Mapping[str, frozenset[str] | None]] = {
    "custom_instructions": None,
    "reasoning": frozenset({"enabled", "custom_instructions"}),
    "peer_card": frozenset({"use", "create", "custom_instructions"}),
    "summary": frozenset(
        {
            "enabled",
            "messages_per_short_summary",
            "messages_per_long_summary",
            "custom_instructions",
        }
    ),
    "dream": frozenset({"enabled", "custom_instructions"}),
    "dialectic": frozenset({"custom_instructions"}),
}
_MESSAGE_CONFIG_KEYS: Final[Mapping[str, frozenset[str] | None]] = {
    "reasoning": frozenset({"enabled", "custom_instructions"}),
}


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
    message_count: int


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


@dataclass
class _Session:
    id: str
    metadata: dict[str, object]
    configuration: dict[str, object]
    created_at: datetime
    peers: dict[str, dict[str, bool | None]] = field(default_factory=dict)
    messages: list[FakeMessage] = field(default_factory=list)


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


class _HttpError(Exception):
    def __init__(self, status: int, detail: object) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


_NO_INPUT: Final = object()


def _invalid(
    loc: list[str | int], msg: str, kind: str = "value_error", given: object = _NO_INPUT
) -> _HttpError:
    """A FastAPI-style request validation error: ``detail`` is a list of errors.

    Like FastAPI's, each error echoes the offending ``input`` when there is one, so a client that
    stringifies the SDK's exception would leak the content it sent: tests can catch that.
    """
    error: dict[str, object] = {"type": kind, "loc": loc, "msg": msg}
    if given is not _NO_INPUT:
        error["input"] = copy.deepcopy(given)
    return _HttpError(422, [error])


_Predicate: TypeAlias = Callable[[FakeMessage], bool]
_Handler: TypeAlias = Callable[["FakeHoncho", Mapping[str, str], Mapping[str, str], object], _Reply]


# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------


def _json_equal(left: object, right: object) -> bool:
    """JSON equality: booleans never equal numbers, 1 equals 1.0."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    return type(left) is type(right) and left == right


def _contains(document: object, pattern: object) -> bool:
    """JSONB containment, ``document @> pattern``."""
    if isinstance(pattern, dict):
        return isinstance(document, dict) and all(
            key in document and _contains(document[key], value) for key, value in pattern.items()
        )
    if isinstance(pattern, list):
        return isinstance(document, list) and all(
            any(_contains(item, wanted) for item in document) for wanted in pattern
        )
    return _json_equal(document, pattern)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _parse_datetime(value: object, loc: list[str | int]) -> datetime:
    if not isinstance(value, str):
        raise _invalid(loc, "Input should be a valid datetime", "datetime_type")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _invalid(loc, "Input should be a valid datetime", "datetime_parsing") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


# --------------------------------------------------------------------------------------------
# Body validation
# --------------------------------------------------------------------------------------------


def _object(value: object, loc: list[str | int]) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _invalid(loc, "Input should be a valid dictionary", "dict_type", value)
    return value


def _only(body: Mapping[str, object], allowed: frozenset[str], loc: list[str | int]) -> None:
    for key in body:
        if key not in allowed:
            raise _invalid(
                [*loc, key], "Extra inputs are not permitted", "extra_forbidden", body[key]
            )


def _valid_id(value: object, loc: list[str | int]) -> str:
    if not isinstance(value, str):
        raise _invalid(loc, "Input should be a valid string", "string_type", value)
    if not _ID.fullmatch(value):
        raise _invalid(
            loc, "String should match pattern '^[A-Za-z0-9_-]+$' (1-512 characters)", given=value
        )
    return value


def _metadata(value: object, loc: list[str | int]) -> dict[str, object]:
    metadata = _object(value, loc)
    if len(metadata) > MAX_METADATA_KEYS:
        raise _invalid(loc, f"metadata has more than {MAX_METADATA_KEYS} keys", given=metadata)
    if _depth(metadata) > MAX_METADATA_DEPTH:
        raise _invalid(
            loc, f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels", given=metadata
        )
    return copy.deepcopy(metadata)


def _optional_bool(value: object, loc: list[str | int]) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise _invalid(loc, "Input should be a valid boolean", "bool_type")
    return value


def _configuration(
    value: object, schema: Mapping[str, frozenset[str] | None], loc: list[str | int]
) -> dict[str, object]:
    configuration = _object(value, loc)
    _only(configuration, frozenset(schema), loc)
    for key, sub in configuration.items():
        allowed = schema[key]
        if sub is None:
            continue
        if allowed is None:
            if not isinstance(sub, str):
                raise _invalid([*loc, key], "Input should be a valid string", "string_type")
        else:
            _only(_object(sub, [*loc, key]), allowed, [*loc, key])
    return copy.deepcopy(configuration)


def _peer_configuration(value: object, loc: list[str | int]) -> dict[str, object]:
    configuration = _object(value, loc)
    _only(configuration, frozenset({"observe_me"}), loc)
    _optional_bool(configuration.get("observe_me"), [*loc, "observe_me"])
    return dict(configuration)


def _session_peer_config(value: object, loc: list[str | int]) -> dict[str, bool | None]:
    configuration = _object(value, loc)
    _only(configuration, frozenset({"observe_me", "observe_others"}), loc)
    return {
        key: _optional_bool(configuration[key], [*loc, key])
        for key in ("observe_me", "observe_others")
        if key in configuration
    }


def _positive_int(raw: str | None, name: str, default: int, maximum: int | None = None) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _invalid(["query", name], "Input should be a valid integer", "int_parsing") from None
    if value < 1 or (maximum is not None and value > maximum):
        limit = f"between 1 and {maximum}" if maximum is not None else "at least 1"
        raise _invalid(["query", name], f"Input should be {limit}")
    return value


def _query_bool(raw: str | None, name: str) -> bool:
    if raw is None:
        return False
    lowered = raw.lower()
    if lowered in {"true", "1", "yes", "on"}:
        return True
    if lowered in {"false", "0", "no", "off"}:
        return False
    raise _invalid(["query", name], "Input should be a valid boolean", "bool_parsing")


# --------------------------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------------------------


def _filter_error(message: str) -> _HttpError:
    return _HttpError(422, f"Invalid filter: {message}")


def _compare(op: str, actual: object, operand: object) -> bool:
    """Apply one operator to a present value; mismatched types never match."""
    if op == "ne":
        return not _json_equal(actual, operand)
    if op == "in":
        assert isinstance(operand, list)
        return any(_json_equal(actual, item) for item in operand)
    if op in {"contains", "icontains"}:
        if isinstance(actual, str) and isinstance(operand, str):
            if op == "icontains":
                return operand.lower() in actual.lower()
            return operand in actual
        if isinstance(actual, list | dict):
            return _contains(actual, operand)
        return False
    ordered = (int, float, str, datetime)
    if isinstance(actual, bool) or isinstance(operand, bool):
        return False
    if not isinstance(actual, ordered) or not isinstance(operand, ordered):
        return False
    numeric = isinstance(actual, int | float) and isinstance(operand, int | float)
    if not numeric and type(actual) is not type(operand):
        return False
    a, b = actual, operand
    if op == "gt":
        return a > b  # type: ignore[operator]
    if op == "gte":
        return a >= b  # type: ignore[operator]
    if op == "lt":
        return a < b  # type: ignore[operator]
    return a <= b  # type: ignore[operator]


def _is_operator_object(value: object) -> bool:
    return isinstance(value, dict) and bool(value) and all(k in _OPERATORS for k in value)


def _compile_operators(
    name: str, operators: Mapping[str, object], convert: Callable[[object], object]
) -> Callable[[object], bool]:
    compiled: list[tuple[str, object]] = []
    for op, operand in operators.items():
        if op not in _OPERATORS:
            raise _filter_error(f"unknown operator {op!r} on {name!r}")
        if op == "in":
            if not isinstance(operand, list):
                raise _filter_error(f"'in' on {name!r} needs a list")
            compiled.append((op, [convert(item) for item in operand]))
        elif op in {"contains", "icontains"}:
            compiled.append((op, operand))
        else:
            compiled.append((op, convert(operand)))

    def check(actual: object) -> bool:
        return all(_compare(op, actual, operand) for op, operand in compiled)

    return check


def _compile_value(
    name: str, value: object, convert: Callable[[object], object]
) -> Callable[[object], bool] | None:
    """Compile one field's condition; None means "always true" (the ``*`` wildcard)."""
    if isinstance(value, str) and value == "*":
        return None
    if value is None:
        return lambda actual: actual is None
    if isinstance(value, dict):
        if not value:
            raise _filter_error(f"empty operator object on {name!r}")
        return _compile_operators(name, value, convert)
    if isinstance(value, list):
        members = [convert(item) for item in value]
        return lambda actual: any(_json_equal(actual, m) for m in members)
    expected = convert(value)
    return lambda actual: _json_equal(actual, expected)


def _field_converter(name: str) -> Callable[[object], object]:
    if name == "created_at":
        return lambda raw: _parse_datetime(raw, ["body", "filters", name])
    if name == "token_count":

        def number(raw: object) -> object:
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise _filter_error("token_count needs numbers")
            return raw

        return number

    def text(raw: object) -> object:
        if not isinstance(raw, str):
            raise _filter_error(f"{name!r} needs strings")
        return raw

    return text


def _metadata_key_check(
    key: str, check: Callable[[object], bool] | None
) -> Callable[[dict[str, object]], bool]:
    """A check on one metadata key: None means IS NULL (missing or null)."""

    def run(metadata: dict[str, object]) -> bool:
        if check is None:
            return metadata.get(key) is None
        return key in metadata and check(metadata[key])

    return run


def _combine(how: str, subs: list[_Predicate]) -> _Predicate:
    def run(message: FakeMessage) -> bool:
        if how == "AND":
            return all(p(message) for p in subs)
        if how == "OR":
            return any(p(message) for p in subs)
        return not any(p(message) for p in subs)

    return run


def _field_check(name: str, check: Callable[[object], bool]) -> _Predicate:
    def run(message: FakeMessage) -> bool:
        return check(getattr(message, name))

    return run


def _compile_metadata(value: object) -> _Predicate:
    if not isinstance(value, dict):
        raise _filter_error("'metadata' needs an object")
    containment: dict[str, object] = {}
    checks: list[Callable[[dict[str, object]], bool]] = []
    for key, wanted in value.items():
        if isinstance(wanted, str) and wanted == "*":
            continue  # the wildcard matches everything
        if wanted is None:  # IS NULL: missing or null
            checks.append(_metadata_key_check(key, None))
        elif _is_operator_object(wanted):
            assert isinstance(wanted, dict)
            operators = _compile_operators(f"metadata.{key}", wanted, lambda raw: raw)
            checks.append(_metadata_key_check(key, operators))
        else:
            containment[key] = wanted

    def predicate(message: FakeMessage) -> bool:
        if containment and not _contains(message.metadata, containment):
            return False
        return all(check(message.metadata) for check in checks)

    return predicate


def _compile_filter(filters: object, depth: int = 1) -> _Predicate:
    if depth > MAX_FILTER_DEPTH:
        raise _filter_error(f"nested deeper than {MAX_FILTER_DEPTH} levels")
    if not isinstance(filters, dict):
        raise _filter_error("a filter must be an object")
    predicates: list[_Predicate] = []
    for key, value in filters.items():
        if key in {"AND", "OR", "NOT"}:
            items = value if isinstance(value, list) else [value]
            predicates.append(_combine(key, [_compile_filter(item, depth + 1) for item in items]))
        elif key == "metadata":
            predicates.append(_compile_metadata(value))
        elif key in _FIELDS:
            check = _compile_value(key, value, _field_converter(key))
            if check is not None:
                predicates.append(_field_check(key, check))
        else:
            raise _filter_error(f"unknown filter key {key!r}")
    return lambda message: all(p(message) for p in predicates)


def _filter_from_body(body: Mapping[str, object]) -> _Predicate:
    filters = body.get("filters")
    if filters is None:
        return lambda _message: True
    return _compile_filter(filters)


# --------------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------------


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _search_matcher(query: str) -> Callable[[str], bool]:
    if _PUNCTUATION.search(query):
        needle = query.lower()
        return lambda content: needle in content.lower()
    terms = {_stem(w) for w in _WORD.findall(query.lower()) if w not in _STOP_WORDS}
    if not terms:
        return lambda _content: False

    def match(content: str) -> bool:
        words = {_stem(w) for w in _WORD.findall(content.lower())}
        return terms <= words

    return match


# --------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------

_Pattern: TypeAlias = tuple[str, ...]
_PATH_PARAMS: Final = {"ws": "workspace_id", "s": "session_id", "p": "peer_id"}
_ROUTES: Final[list[tuple[_Pattern, RouteKind, frozenset[str]]]] = [
    (("health",), "health", frozenset({"GET"})),
    (("v3", "workspaces"), "workspace_create", frozenset({"POST"})),
    (("v3", "workspaces", "list"), "workspace_list", frozenset({"POST"})),
    (("v3", "workspaces", "{ws}", "peers"), "peer_create", frozenset({"POST"})),
    (("v3", "workspaces", "{ws}", "sessions"), "session_create", frozenset({"POST"})),
    (("v3", "workspaces", "{ws}", "search"), "workspace_search", frozenset({"POST"})),
    (
        ("v3", "workspaces", "{ws}", "sessions", "{s}", "peers"),
        "session_peers",
        frozenset({"GET", "POST", "PUT"}),
    ),
    (
        ("v3", "workspaces", "{ws}", "sessions", "{s}", "peers", "{p}", "config"),
        "session_peer_config",
        frozenset({"GET", "PUT"}),
    ),
    (
        ("v3", "workspaces", "{ws}", "sessions", "{s}", "messages"),
        "message_create",
        frozenset({"POST"}),
    ),
    (
        ("v3", "workspaces", "{ws}", "sessions", "{s}", "messages", "list"),
        "message_list",
        frozenset({"POST"}),
    ),
    (
        ("v3", "workspaces", "{ws}", "sessions", "{s}", "search"),
        "session_search",
        frozenset({"POST"}),
    ),
]


def _match(method: str, segments: list[str]) -> tuple[RouteKind, dict[str, str]] | _Reply:
    allowed_elsewhere = False
    for pattern, kind, methods in _ROUTES:
        if len(pattern) != len(segments):
            continue
        params: dict[str, str] = {}
        for expected, actual in zip(pattern, segments, strict=True):
            if expected.startswith("{"):
                params[expected[1:-1]] = actual
            elif expected != actual:
                break
        else:
            if method in methods:
                return kind, params
            allowed_elsewhere = True
    if allowed_elsewhere:
        return _Reply(405, {"detail": "Method Not Allowed"})
    return _Reply(404, {"detail": f"FakeHoncho does not implement {method} /{'/'.join(segments)}"})


def _page(items: list[dict[str, object]], page: int, size: int) -> dict[str, object]:
    start = (page - 1) * size
    return {
        "items": items[start : start + size],
        "total": len(items),
        "page": page,
        "size": size,
        "pages": math.ceil(len(items) / size),
    }


def _decode_body(raw: bytes) -> tuple[object, bool]:
    """Parse a body: (JSON, True); (None, True) if empty; (text, False) if not JSON."""
    if not raw.strip():
        return None, True
    try:
        return json.loads(raw), True
    except ValueError:
        return raw.decode("utf-8", "replace"), False


def _fault_result(fault: _Fault) -> _Result:
    if fault.result == "timeout" or fault.result == "disconnect":
        return fault.result
    headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
    return _Reply(fault.result, {"detail": f"FakeHoncho injected {fault.result}"}, headers)


def _peer_map(value: object, loc: list[str | int]) -> dict[str, dict[str, bool | None]]:
    if value is None:
        return {}
    peers = _object(value, loc)
    return {
        _valid_id(peer_id, [*loc, peer_id]): _session_peer_config(config, [*loc, peer_id])
        for peer_id, config in peers.items()
    }


def _workspace_json(ws: _Workspace) -> dict[str, object]:
    return {
        "id": ws.id,
        "metadata": copy.deepcopy(ws.metadata),
        "configuration": copy.deepcopy(ws.configuration),
        "created_at": ws.created_at.isoformat(),
    }


def _peer_json(ws: _Workspace, peer: _Peer) -> dict[str, object]:
    return {
        "id": peer.id,
        "workspace_id": ws.id,
        "metadata": copy.deepcopy(peer.metadata),
        "configuration": copy.deepcopy(peer.configuration),
        "created_at": peer.created_at.isoformat(),
    }


def _session_json(ws: _Workspace, session: _Session) -> dict[str, object]:
    return {
        "id": session.id,
        "workspace_id": ws.id,
        "is_active": True,
        "metadata": copy.deepcopy(session.metadata),
        "configuration": copy.deepcopy(session.configuration),
        "created_at": session.created_at.isoformat(),
    }


# --------------------------------------------------------------------------------------------
# The fake
# --------------------------------------------------------------------------------------------


class FakeHoncho:
    """An in-memory Honcho v3 server, reachable through httpx.MockTransport or real HTTP.

    Args:
        api_key: The bearer token every route except ``/health`` requires; None disables auth.
        seed: Seeds the generator of message ids, so runs are reproducible.
        clock: Returns "now" for ``created_at``; defaults to the UTC wall clock.
        latency_s: Delay added before each answer in server mode (benchmarks).
        timeout_hold_s: In server mode, how long a timed-out request holds its connection open
            at most, if the client does not give up first.
    """

    def __init__(
        self,
        *,
        api_key: str | None = DEFAULT_API_KEY,
        seed: int = 0,
        clock: Callable[[], datetime] | None = None,
        latency_s: float = 0.0,
        timeout_hold_s: float = 30.0,
    ) -> None:
        self.api_key = api_key
        self.latency_s = latency_s
        self.timeout_hold_s = timeout_hold_s
        self._clock = clock or (lambda: datetime.now(UTC))
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._workspaces: dict[str, _Workspace] = {}
        self._message_ids: set[str] = set()
        self._faults: list[_Fault] = []
        self._log: list[RecordedRequest] = []
        self._down = False
        # Server mode.
        self._lifecycle = threading.Lock()
        self._server: _Server | None = None
        self._address: tuple[str, int] | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    # ---------------------------------------------------------------- fault injection

    def fail_next(
        self,
        n: int = 1,
        *,
        status: int = 503,
        kind: RouteKind | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Answer the next ``n`` matching requests with ``status``, applying nothing.

        Args:
            n: How many requests to fail.
            status: The status to answer (503 by default; 429 with ``retry_after`` sends a
                ``Retry-After`` header).
            kind: Only requests of this route kind; None for any route but ``/health``.
            retry_after: Seconds for a ``Retry-After`` header, if given.
        """
        self._queue(n, _Fault("fail", kind, status, retry_after))

    def timeout_next(self, n: int = 1, *, kind: RouteKind | None = None) -> None:
        """Let the next ``n`` matching requests time out, applying nothing.

        Args:
            n: How many requests to time out.
            kind: Only requests of this route kind; None for any route but ``/health``.
        """
        self._queue(n, _Fault("timeout", kind, "timeout"))

    def commit_then_fail_next(
        self,
        n: int = 1,
        *,
        status: int | Literal["disconnect", "timeout"] = 500,
        kind: RouteKind | None = None,
    ) -> None:
        """Apply the next ``n`` matching requests, then fail them: the ambiguous outcome.

        Args:
            n: How many requests to apply and fail.
            status: The status answered instead of the real one, ``"disconnect"`` to drop the
                connection without an answer, or ``"timeout"`` to never answer.
            kind: Only requests of this route kind; None for any route but ``/health``.
        """
        self._queue(n, _Fault("commit_then_fail", kind, status))

    def _queue(self, n: int, fault: _Fault) -> None:
        if n < 0:
            raise ValueError("n must not be negative")
        with self._lock:
            self._faults.extend(dataclasses.replace(fault) for _ in range(n))

    @property
    def pending_faults(self) -> int:
        """How many injected faults have not been consumed yet."""
        with self._lock:
            return len(self._faults)

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        with self._lock:
            self._faults.clear()

    @property
    def down(self) -> bool:
        """Whether the fake refuses connections (see the module docstring)."""
        return self._down

    @down.setter
    def down(self, value: bool) -> None:
        with self._lifecycle:
            with self._lock:
                self._down = value
            if self._address is None:
                return
            if value and self._server is not None:
                self._stop_listener()
            elif not value and self._server is None:
                self._start_listener(*self._address)

    # ---------------------------------------------------------------- inspection

    def workspaces(self) -> list[str]:
        """Return the ids of the workspaces, in creation order."""
        with self._lock:
            return list(self._workspaces)

    def peers(self, workspace: str) -> dict[str, FakePeer]:
        """Return the peers of a workspace (empty if it does not exist), in creation order."""
        with self._lock:
            ws = self._workspaces.get(workspace)
            if ws is None:
                return {}
            return {
                p.id: FakePeer(
                    p.id,
                    workspace,
                    copy.deepcopy(p.metadata),
                    copy.deepcopy(p.configuration),
                    p.created_at,
                )
                for p in ws.peers.values()
            }

    def sessions(self, workspace: str) -> dict[str, FakeSession]:
        """Return the sessions of a workspace (empty if it does not exist), in creation order."""
        with self._lock:
            ws = self._workspaces.get(workspace)
            if ws is None:
                return {}
            return {
                s.id: FakeSession(
                    s.id,
                    workspace,
                    copy.deepcopy(s.metadata),
                    copy.deepcopy(s.configuration),
                    copy.deepcopy(s.peers),
                    s.created_at,
                    len(s.messages),
                )
                for s in ws.sessions.values()
            }

    def messages(self, workspace: str, session: str | None = None) -> list[FakeMessage]:
        """Return stored messages in insertion order: one session's, or the workspace's."""
        with self._lock:
            ws = self._workspaces.get(workspace)
            if ws is None:
                return []
            return [
                dataclasses.replace(m, metadata=copy.deepcopy(m.metadata))
                for m in self._workspace_messages(ws, session)
            ]

    @property
    def requests(self) -> list[RecordedRequest]:
        """Return every request received so far, oldest first."""
        with self._lock:
            return list(self._log)

    def clear_requests(self) -> None:
        """Forget the request log."""
        with self._lock:
            self._log.clear()

    # ---------------------------------------------------------------- transports

    def transport(self) -> httpx.MockTransport:
        """Return an ``httpx.MockTransport`` answering from this fake."""
        return httpx.MockTransport(self._handle_httpx)

    def client(self, base_url: str = "http://honcho.test") -> httpx.Client:
        """Return an ``httpx.Client`` over `transport`, for ``honcho.Honcho(http_client=...)``."""
        return httpx.Client(transport=self.transport(), base_url=base_url)

    @contextlib.contextmanager
    def serve(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
        """Serve the fake over HTTP in a daemon thread; yield its base URL; stop on exit.

        Args:
            host: The address to bind.
            port: The port to bind; 0 picks a free one.

        Yields:
            The base URL, e.g. ``http://127.0.0.1:54321``.

        Raises:
            RuntimeError: If this fake is already serving.
        """
        with self._lifecycle:
            if self._address is not None:
                raise RuntimeError("this FakeHoncho is already serving")
            self._stopping.clear()
            self._start_listener(host, port)
            assert self._server is not None
            self._address = (host, self._server.server_address[1])
            if self._down:
                self._stop_listener()
            base_url = f"http://{host}:{self._address[1]}"
        try:
            yield base_url
        finally:
            with self._lifecycle:
                self._stopping.set()
                self._stop_listener()
                self._address = None

    def _start_listener(self, host: str, port: int) -> None:
        server = _Server((host, port), _handler_for(self))
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"FakeHoncho:{server.server_address[1]}",
            daemon=True,
        )
        thread.start()
        server.thread = thread
        self._server = server

    def _stop_listener(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if server.thread is not None:
            server.thread.join()
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._connections_lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _hold(self, connection: socket.socket) -> None:
        """Keep a connection open without answering until the client leaves (server mode)."""
        deadline = time.monotonic() + self.timeout_hold_s
        while not self._stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                readable, _, _ = select.select([connection], [], [], min(remaining, 0.05))
                if readable:
                    connection.recv(1, socket.MSG_PEEK)  # b"" or data: the client moved on
                    return
            except (OSError, ValueError):
                return

    def _handle_httpx(self, request: httpx.Request) -> httpx.Response:
        raw_path, _, raw_query = request.url.raw_path.decode("ascii").partition("?")
        result = self._dispatch(
            request.method,
            raw_path,
            raw_query,
            request.headers.get("authorization"),
            request.read(),
        )
        if isinstance(result, _Reply):
            headers = {"content-type": "application/json", **result.headers}
            return httpx.Response(result.status, headers=headers, content=result.encoded())
        if result == "refused":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if result == "timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        raise httpx.RemoteProtocolError(
            "Server disconnected without sending a response.", request=request
        )

    # ---------------------------------------------------------------- dispatch

    def _dispatch(
        self,
        method: str,
        raw_path: str,
        raw_query: str,
        authorization: str | None,
        raw_body: bytes,
    ) -> _Result:
        segments = [unquote(part) for part in raw_path.strip("/").split("/")]
        query = dict(parse_qsl(raw_query, keep_blank_values=True))
        body, body_ok = _decode_body(raw_body)
        path = "/" + "/".join(segments)
        with self._lock:
            route = _match(method, segments)
            kind = None if isinstance(route, _Reply) else route[0]
            fault: _Fault | None = None
            applied = False
            result: _Result
            if self._down:
                result = "refused"
                fault_name: str | None = "down"
            else:
                if kind is not None:
                    fault = self._take_fault(kind)
                fault_name = fault.name if fault is not None else None
                if fault is not None and fault.name != "commit_then_fail":
                    result = _fault_result(fault)
                elif isinstance(route, _Reply):
                    result = route
                elif kind != "health" and not self._authorized(authorization):
                    result = _Reply(401, {"detail": "Invalid or missing API key"})
                elif not body_ok:
                    result = _Reply(
                        422,
                        {"detail": [{"type": "json_invalid", "loc": ["body"], "msg": "JSON"}]},
                    )
                else:
                    result = self._apply(method, route[0], route[1], query, body)
                    applied = isinstance(result, _Reply) and result.status < 400
                    if fault is not None:
                        result = _fault_result(fault)
            self._log.append(
                RecordedRequest(
                    method=method,
                    path=path,
                    query=query,
                    body=body,
                    raw_body=raw_body,
                    kind=kind,
                    outcome=result.status if isinstance(result, _Reply) else result,
                    fault=fault_name,
                    applied=applied,
                )
            )
            return result

    def _take_fault(self, kind: RouteKind) -> _Fault | None:
        for index, fault in enumerate(self._faults):
            if fault.matches(kind):
                return self._faults.pop(index)
        return None

    def _authorized(self, authorization: str | None) -> bool:
        if self.api_key is None:
            return True
        return authorization == f"Bearer {self.api_key}"

    def _apply(
        self,
        method: str,
        kind: RouteKind,
        params: Mapping[str, str],
        query: Mapping[str, str],
        body: object,
    ) -> _Reply:
        try:
            for name, value in params.items():
                _valid_id(value, ["path", _PATH_PARAMS[name]])
            handler = _HANDLERS[(method, kind)]
            return handler(self, params, query, body)
        except _HttpError as error:
            return _Reply(error.status, {"detail": error.detail})

    # ---------------------------------------------------------------- state helpers

    def _now(self) -> datetime:
        return self._clock()

    def _new_message_id(self) -> str:
        while True:
            candidate = "".join(self._rng.choice(_NANOID_ALPHABET) for _ in range(_NANOID_SIZE))
            if candidate not in self._message_ids:
                self._message_ids.add(candidate)
                return candidate

    def _workspace(self, workspace_id: str) -> tuple[_Workspace, bool]:
        ws = self._workspaces.get(workspace_id)
        if ws is not None:
            return ws, False
        ws = _Workspace(workspace_id, {}, {}, self._now())
        self._workspaces[workspace_id] = ws
        return ws, True

    def _peer(self, ws: _Workspace, peer_id: str) -> tuple[_Peer, bool]:
        peer = ws.peers.get(peer_id)
        if peer is not None:
            return peer, False
        peer = _Peer(peer_id, {}, {}, self._now())
        ws.peers[peer_id] = peer
        return peer, True

    def _session(self, ws: _Workspace, session_id: str) -> tuple[_Session, bool]:
        session = ws.sessions.get(session_id)
        if session is not None:
            return session, False
        session = _Session(session_id, {}, {}, self._now())
        ws.sessions[session_id] = session
        return session, True

    def _existing_session(self, params: Mapping[str, str]) -> tuple[_Workspace, _Session]:
        ws = self._workspaces.get(params["ws"])
        session = ws.sessions.get(params["s"]) if ws is not None else None
        if ws is None or session is None:
            raise _HttpError(404, f"Session {params['s']} not found in workspace {params['ws']}")
        return ws, session

    def _join(
        self, ws: _Workspace, session: _Session, peer_id: str, config: dict[str, bool | None]
    ) -> None:
        self._peer(ws, peer_id)
        member = session.peers.setdefault(peer_id, {"observe_me": None, "observe_others": None})
        member.update(config)

    @staticmethod
    def _workspace_messages(ws: _Workspace, session: str | None) -> list[FakeMessage]:
        if session is not None:
            found = ws.sessions.get(session)
            return list(found.messages) if found is not None else []
        return list(ws.messages)

    # ---------------------------------------------------------------- handlers

    def _h_health(self, _p: Mapping[str, str], _q: Mapping[str, str], _b: object) -> _Reply:
        return _Reply(200, {"status": "ok"})

    def _h_workspace_create(
        self, _p: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        data = _object(body, ["body"])
        _only(data, frozenset({"id", "metadata", "configuration"}), ["body"])
        workspace_id = _valid_id(data.get("id"), ["body", "id"])
        metadata = (
            _metadata(data["metadata"], ["body", "metadata"])
            if data.get("metadata") is not None
            else None
        )
        configuration = (
            _configuration(data["configuration"], _SESSION_CONFIG_KEYS, ["body", "configuration"])
            if data.get("configuration") is not None
            else None
        )
        ws, created = self._workspace(workspace_id)
        if metadata is not None:
            ws.metadata = metadata
        if configuration is not None:
            ws.configuration = {**ws.configuration, **configuration}
        return _Reply(201 if created else 200, _workspace_json(ws))

    def _h_workspace_list(
        self, _p: Mapping[str, str], query: Mapping[str, str], body: object
    ) -> _Reply:
        """List workspaces; the only filter supported is equality on `id`."""
        data = _object(body, ["body"]) if body is not None else {}
        _only(data, frozenset({"filters"}), ["body"])
        filters = data.get("filters") or {}
        if not isinstance(filters, dict) or set(filters) - {"id"}:
            raise _HttpError(422, "FakeHoncho filters workspaces by id only")
        page = _positive_int(query.get("page"), "page", 1)
        size = _positive_int(query.get("size"), "size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        wanted = filters.get("id")
        items = [
            _workspace_json(ws)
            for ws_id, ws in self._workspaces.items()
            if wanted is None or ws_id == wanted
        ]
        return _Reply(200, _page(items, page, size))

    def _h_peer_create(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        data = _object(body, ["body"])
        _only(data, frozenset({"id", "metadata", "configuration"}), ["body"])
        peer_id = _valid_id(data.get("id"), ["body", "id"])
        metadata = (
            _metadata(data["metadata"], ["body", "metadata"])
            if data.get("metadata") is not None
            else None
        )
        configuration = (
            _peer_configuration(data["configuration"], ["body", "configuration"])
            if data.get("configuration") is not None
            else None
        )
        ws, _ = self._workspace(params["ws"])
        peer, created = self._peer(ws, peer_id)
        if metadata is not None:
            peer.metadata = metadata
        if configuration is not None:
            peer.configuration = {**peer.configuration, **configuration}
        return _Reply(201 if created else 200, _peer_json(ws, peer))

    def _h_session_create(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        data = _object(body, ["body"])
        _only(data, frozenset({"id", "metadata", "configuration", "peers", "scopes"}), ["body"])
        session_id = _valid_id(data.get("id"), ["body", "id"])
        metadata = (
            _metadata(data["metadata"], ["body", "metadata"])
            if data.get("metadata") is not None
            else None
        )
        configuration = (
            _configuration(data["configuration"], _SESSION_CONFIG_KEYS, ["body", "configuration"])
            if data.get("configuration") is not None
            else None
        )
        peers = _peer_map(data.get("peers"), ["body", "peers"])
        if data.get("scopes"):
            raise _HttpError(422, "FakeHoncho does not implement scopes")
        ws, _ = self._workspace(params["ws"])
        session, created = self._session(ws, session_id)
        if metadata is not None:
            session.metadata = metadata
        if configuration is not None:
            session.configuration = {**session.configuration, **configuration}
        for peer_id, config in peers.items():
            self._join(ws, session, peer_id, config)
        return _Reply(201 if created else 200, _session_json(ws, session))

    def _h_session_peers_get(
        self, params: Mapping[str, str], query: Mapping[str, str], _b: object
    ) -> _Reply:
        ws, session = self._existing_session(params)
        page = _positive_int(query.get("page"), "page", 1)
        size = _positive_int(query.get("size"), "size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        items = [_peer_json(ws, ws.peers[peer_id]) for peer_id in session.peers]
        return _Reply(200, _page(items, page, size))

    def _h_session_peers_add(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        peers = _peer_map(body, ["body"])
        ws, session = self._existing_session(params)
        for peer_id, config in peers.items():
            self._join(ws, session, peer_id, config)
        return _Reply(200, _session_json(ws, session))

    def _h_session_peers_set(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        peers = _peer_map(body, ["body"])
        ws, session = self._existing_session(params)
        for peer_id in list(session.peers):
            if peer_id not in peers:
                del session.peers[peer_id]
        for peer_id, config in peers.items():
            self._join(ws, session, peer_id, config)
        return _Reply(200, _session_json(ws, session))

    def _member_config(self, params: Mapping[str, str]) -> dict[str, bool | None]:
        _, session = self._existing_session(params)
        member = session.peers.get(params["p"])
        if member is None:
            raise _HttpError(404, f"Peer {params['p']} is not a member of session {params['s']}")
        return member

    def _h_peer_config_get(
        self, params: Mapping[str, str], _q: Mapping[str, str], _b: object
    ) -> _Reply:
        return _Reply(200, dict(self._member_config(params)))

    def _h_peer_config_set(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        config = _session_peer_config(body, ["body"])
        self._member_config(params).update(config)
        return _Reply(204)

    def _h_message_create(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        data = _object(body, ["body"])
        _only(data, frozenset({"messages"}), ["body"])
        raw_messages = data.get("messages")
        if not isinstance(raw_messages, list):
            raise _invalid(["body", "messages"], "Input should be a valid list", "list_type")
        if not 1 <= len(raw_messages) <= MAX_MESSAGES_PER_REQUEST:
            raise _invalid(
                ["body", "messages"],
                f"List should have at least 1 item and at most {MAX_MESSAGES_PER_REQUEST} items",
                "too_short" if not raw_messages else "too_long",
                raw_messages,
            )
        drafts: list[tuple[str, str, dict[str, object], datetime | None]] = []
        for index, raw in enumerate(raw_messages):
            loc: list[str | int] = ["body", "messages", index]
            message = _object(raw, loc)
            _only(
                message,
                frozenset({"content", "peer_id", "metadata", "configuration", "created_at"}),
                loc,
            )
            content = message.get("content")
            if not isinstance(content, str):
                raise _invalid(
                    [*loc, "content"], "Input should be a valid string", "string_type", content
                )
            if len(content) > MAX_MESSAGE_CHARS:
                raise _invalid(
                    [*loc, "content"],
                    f"String should have at most {MAX_MESSAGE_CHARS} characters",
                    "string_too_long",
                    content,
                )
            peer_id = _valid_id(message.get("peer_id"), [*loc, "peer_id"])
            metadata = (
                _metadata(message["metadata"], [*loc, "metadata"])
                if message.get("metadata") is not None
                else {}
            )
            if message.get("configuration") is not None:
                _configuration(
                    message["configuration"], _MESSAGE_CONFIG_KEYS, [*loc, "configuration"]
                )
            created_at = (
                _parse_datetime(message["created_at"], [*loc, "created_at"])
                if message.get("created_at") is not None
                else None
            )
            drafts.append((content.replace("\x00", ""), peer_id, metadata, created_at))
        ws, _ = self._workspace(params["ws"])
        session, _ = self._session(ws, params["s"])
        created: list[dict[str, object]] = []
        for content, peer_id, metadata, created_at in drafts:
            if peer_id not in session.peers:
                self._join(ws, session, peer_id, {})
            stored = FakeMessage(
                id=self._new_message_id(),
                content=content,
                peer_id=peer_id,
                session_id=session.id,
                workspace_id=ws.id,
                metadata=metadata,
                created_at=created_at or self._now(),
                token_count=math.ceil(len(content) / 4),
            )
            session.messages.append(stored)
            ws.messages.append(stored)
            created.append(stored.to_json())
        return _Reply(201, created)

    def _h_message_list(
        self, params: Mapping[str, str], query: Mapping[str, str], body: object
    ) -> _Reply:
        data = _object(body, ["body"]) if body is not None else {}
        _only(data, frozenset({"filters"}), ["body"])
        predicate = _filter_from_body(data)
        page = _positive_int(query.get("page"), "page", 1)
        size = _positive_int(query.get("size"), "size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        reverse = _query_bool(query.get("reverse"), "reverse")
        ws = self._workspaces.get(params["ws"])
        messages = self._workspace_messages(ws, params["s"]) if ws is not None else []
        hits = [m.to_json() for m in messages if predicate(m)]
        if reverse:
            hits.reverse()
        return _Reply(200, _page(hits, page, size))

    def _search(self, workspace_id: str, session_id: str | None, body: object) -> _Reply:
        data = _object(body, ["body"])
        _only(data, frozenset({"query", "filters", "limit", "scope"}), ["body"])
        query = data.get("query")
        if not isinstance(query, str):
            raise _invalid(["body", "query"], "Input should be a valid string", "string_type")
        limit = data.get("limit", DEFAULT_SEARCH_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise _invalid(["body", "limit"], "Input should be an integer between 1 and 100")
        if data.get("scope") is not None:
            raise _HttpError(422, "FakeHoncho does not implement scopes")
        predicate = _filter_from_body(data)
        matcher = _search_matcher(query)
        ws = self._workspaces.get(workspace_id)
        messages = self._workspace_messages(ws, session_id) if ws is not None else []
        hits = [m.to_json() for m in messages if matcher(m.content) and predicate(m)]
        return _Reply(200, hits[:limit])

    def _h_session_search(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        return self._search(params["ws"], params["s"], body)

    def _h_workspace_search(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        return self._search(params["ws"], None, body)


_HANDLERS: Final[Mapping[tuple[str, RouteKind], _Handler]] = {
    ("GET", "health"): FakeHoncho._h_health,
    ("POST", "workspace_create"): FakeHoncho._h_workspace_create,
    ("POST", "workspace_list"): FakeHoncho._h_workspace_list,
    ("POST", "peer_create"): FakeHoncho._h_peer_create,
    ("POST", "session_create"): FakeHoncho._h_session_create,
    ("GET", "session_peers"): FakeHoncho._h_session_peers_get,
    ("POST", "session_peers"): FakeHoncho._h_session_peers_add,
    ("PUT", "session_peers"): FakeHoncho._h_session_peers_set,
    ("GET", "session_peer_config"): FakeHoncho._h_peer_config_get,
    ("PUT", "session_peer_config"): FakeHoncho._h_peer_config_set,
    ("POST", "message_create"): FakeHoncho._h_message_create,
    ("POST", "message_list"): FakeHoncho._h_message_list,
    ("POST", "session_search"): FakeHoncho._h_session_search,
    ("POST", "workspace_search"): FakeHoncho._h_workspace_search,
}


# --------------------------------------------------------------------------------------------
# Server mode
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    thread: threading.Thread | None = None

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up first (a search past its deadline) is not an error here."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def _handler_for(fake: FakeHoncho) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "FakeHoncho"
        sys_version = ""

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: without this, Nagle's algorithm and the
            # client's delayed ACK add ~40 ms to every answer.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            fake._track(self.connection, add=True)

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                fake._track(self.connection, add=False)

        def log_message(self, format: str, *args: object) -> None:
            """Keep test output quiet."""

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw_body = self.rfile.read(length) if length > 0 else b""
            raw_path, _, raw_query = self.path.partition("?")
            if fake.latency_s > 0:
                time.sleep(fake.latency_s)
            result = fake._dispatch(
                method, raw_path, raw_query, self.headers.get("Authorization"), raw_body
            )
            if isinstance(result, _Reply):
                payload = result.encoded()
                self.send_response(result.status)
                for name, value in result.headers.items():
                    self.send_header(name, value)
                if result.status != 204:
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if result.status != 204:
                    self.wfile.write(payload)
                return
            # No answer at all: hold the line (timeout) or just hang up.
            self.close_connection = True
            if result == "timeout":
                fake._hold(self.connection)

    return Handler
