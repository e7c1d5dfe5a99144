"""`FakeHoncho`: fault injection, inspection and dispatch over the route handlers.

How requests reach it (an httpx transport, a local HTTP server) is `_transports`.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import socket
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import parse_qsl, unquote

from indexer.testing._handlers import _HANDLERS, _Handlers
from indexer.testing._model import (
    DEFAULT_API_KEY,
    FakeMessage,
    FakePeer,
    FakeSession,
    RecordedRequest,
    RouteKind,
    _Fault,
    _Reply,
    _Result,
    _Workspace,
)
from indexer.testing._routes import _PATH_PARAMS, _decode_body, _fault_result, _match
from indexer.testing._server import _Server
from indexer.testing._text_search import SearchMode
from indexer.testing._transports import _Transports
from indexer.testing._validate import _HttpError, _valid_id

# --------------------------------------------------------------------------------------------
# The fake
# --------------------------------------------------------------------------------------------


class FakeHoncho(_Transports, _Handlers):
    """An in-memory Honcho v3 server, reachable through httpx.MockTransport or real HTTP.

    Args:
        api_key: The bearer token every route except ``/health`` requires; None disables auth.
        seed: Seeds the generator of message ids, so runs are reproducible.
        clock: Returns "now" for ``created_at``; defaults to the UTC wall clock.
        latency_s: Delay added before each answer in server mode (benchmarks).
        search_mode: ``"lexical"`` (a server without embeddings) or ``"semantic"`` (with them;
            see ``indexer.testing._text_search`` for the one departure).
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
        search_mode: SearchMode = "lexical",
    ) -> None:
        self.api_key = api_key
        self.search_mode = search_mode
        self.latency_s = latency_s
        self.timeout_hold_s = timeout_hold_s
        self._clock = clock or (lambda: datetime.now(UTC))
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._workspaces: dict[str, _Workspace] = {}
        self._message_ids: set[str] = set()
        self._faults: list[_Fault] = []
        self._holds: dict[RouteKind, threading.Event] = {}
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

    def hold(self, kind: RouteKind) -> threading.Event:
        """Make requests of `kind` wait until the returned event is set (a slow server).

        Deterministic slowness: a caller's deadline expires however fast the machine is, and
        the test releases the requests afterwards. A held request waits at most
        ``timeout_hold_s``.
        """
        with self._lock:
            event = self._holds.setdefault(kind, threading.Event())
        return event

    def set_peer_memory(
        self,
        workspace: str,
        peer: str,
        *,
        representation: str | None = None,
        peer_card: list[str] | None = None,
        chat_answer: str | None = None,
    ) -> None:
        """What the peer's context, representation and dialectic routes answer."""
        with self._lock:
            ws, _ = self._workspace(workspace)
            stored, _ = self._peer(ws, peer)
            stored.representation = representation
            stored.peer_card = peer_card
            stored.chat_answer = chat_answer

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
        matched = _match(method, segments)
        if not isinstance(matched, _Reply):
            with self._lock:
                held = self._holds.get(matched[0])
            if held is not None:
                held.wait(self.timeout_hold_s)  # outside the lock: other requests go on
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
