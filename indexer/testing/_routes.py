"""The route table and the pure helpers of dispatch: matching, paging, bodies, JSON shapes."""

from __future__ import annotations

import copy
import json
import math
from typing import Final, TypeAlias

from indexer.testing._model import (
    RouteKind,
    _Fault,
    _Peer,
    _Reply,
    _Result,
    _Session,
    _Workspace,
)

# --------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------

_Pattern: TypeAlias = tuple[str, ...]
_PATH_PARAMS: Final = {"ws": "workspace_id", "s": "session_id", "p": "peer_id"}
_ROUTES: Final[list[tuple[_Pattern, RouteKind, frozenset[str]]]] = [
    (("health",), "health", frozenset({"GET"})),
    (("v3", "workspaces"), "workspace_create", frozenset({"POST"})),
    (("v3", "workspaces", "list"), "workspace_list", frozenset({"POST"})),
    (("v3", "workspaces", "{ws}"), "workspace_delete", frozenset({"DELETE"})),
    (("v3", "workspaces", "{ws}", "peers"), "peer_create", frozenset({"POST"})),
    (("v3", "workspaces", "{ws}", "sessions"), "session_create", frozenset({"POST"})),
    (("v3", "workspaces", "{ws}", "search"), "workspace_search", frozenset({"POST"})),
    (("v3", "workspaces", "{ws}", "sessions", "list"), "session_list", frozenset({"POST"})),
    (("v3", "workspaces", "{ws}", "sessions", "{s}"), "session_delete", frozenset({"DELETE"})),
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
    (("v3", "workspaces", "{ws}", "peers", "{p}", "context"), "peer_context", frozenset({"GET"})),
    (
        ("v3", "workspaces", "{ws}", "peers", "{p}", "representation"),
        "peer_representation",
        frozenset({"POST"}),
    ),
    (("v3", "workspaces", "{ws}", "peers", "{p}", "chat"), "peer_chat", frozenset({"POST"})),
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
        "is_active": session.active,
        "metadata": copy.deepcopy(session.metadata),
        "configuration": copy.deepcopy(session.configuration),
        "created_at": session.created_at.isoformat(),
    }
