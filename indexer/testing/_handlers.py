"""The route handlers of `FakeHoncho`, as a mixin over its stored state."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Final, TypeAlias

from indexer.testing._filters import _filter_from_body
from indexer.testing._model import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_SEARCH_LIMIT,
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES_PER_REQUEST,
    MAX_PAGE_SIZE,
    FakeMessage,
    RouteKind,
    _Peer,
    _Reply,
    _Session,
    _Workspace,
)
from indexer.testing._routes import _page, _peer_json, _session_json, _workspace_json
from indexer.testing._text_search import SearchMode, search
from indexer.testing._validate import (
    _MESSAGE_CONFIG_KEYS,
    _SESSION_CONFIG_KEYS,
    _configuration,
    _HttpError,
    _invalid,
    _metadata,
    _object,
    _only,
    _parse_datetime,
    _peer_configuration,
    _peer_map,
    _positive_int,
    _query_bool,
    _session_peer_config,
    _valid_id,
)

_NANOID_ALPHABET: Final = "_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NANOID_SIZE: Final = 21


class _Handlers:
    """State helpers and one method per route; `FakeHoncho` holds the state they use."""

    _clock: Callable[[], datetime]
    _rng: random.Random
    _workspaces: dict[str, _Workspace]
    _message_ids: set[str]
    search_mode: SearchMode

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
            if not session.active:  # deleted: the id cannot be used again
                raise _HttpError(404, f"Session {session_id} not found in workspace {ws.id}")
            return session, False
        session = _Session(session_id, {}, {}, self._now())
        ws.sessions[session_id] = session
        return session, True

    def _existing_session(self, params: Mapping[str, str]) -> tuple[_Workspace, _Session]:
        ws = self._workspaces.get(params["ws"])
        session = ws.sessions.get(params["s"]) if ws is not None else None
        if ws is None or session is None or not session.active:
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
            try:
                peer_id = _valid_id(message.get("peer_id"), [*loc, "peer_id"])
            except _HttpError:  # the server fails creating the peer: an unhandled error
                raise _HttpError(500, "An unexpected error occurred") from None
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
        now = self._now()  # the messages of one request share one time
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
                created_at=created_at or now,
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
        ws = self._workspaces.get(workspace_id)
        messages = self._workspace_messages(ws, session_id) if ws is not None else []
        hits = search([m for m in messages if predicate(m)], query, limit, self.search_mode)
        return _Reply(200, [m.to_json() for m in hits])

    def _h_session_search(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        return self._search(params["ws"], params["s"], body)

    def _h_workspace_search(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        return self._search(params["ws"], None, body)

    def _h_session_list(
        self, params: Mapping[str, str], query: Mapping[str, str], body: object
    ) -> _Reply:
        """The workspace's active sessions (filters are not implemented)."""
        data = _object(body, ["body"]) if body is not None else {}
        _only(data, frozenset({"filters"}), ["body"])
        if data.get("filters"):
            raise _HttpError(422, "FakeHoncho does not filter sessions")
        page = _positive_int(query.get("page"), "page", 1)
        size = _positive_int(query.get("size"), "size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        ws = self._workspaces.get(params["ws"])
        sessions = [s for s in ws.sessions.values() if s.active] if ws is not None else []
        assert ws is not None or not sessions
        items = [_session_json(ws, s) for s in sessions] if ws is not None else []
        return _Reply(200, _page(items, page, size))

    def _h_session_delete(
        self, params: Mapping[str, str], _q: Mapping[str, str], _b: object
    ) -> _Reply:
        """Accepted and only queued: the session leaves lists, its messages stay."""
        _, session = self._existing_session(params)
        session.active = False
        return _Reply(202, {"message": "Session deleted successfully"})

    def _h_workspace_delete(
        self, params: Mapping[str, str], _q: Mapping[str, str], _b: object
    ) -> _Reply:
        """409 while a session is active; else accepted and queued (the workspace remains)."""
        ws = self._workspaces.get(params["ws"])
        if ws is None:
            raise _HttpError(404, f"Workspace {params['ws']} not found")
        if any(s.active for s in ws.sessions.values()):
            raise _HttpError(
                409,
                f"Cannot delete workspace '{ws.id}': active session(s) remain. "
                "Delete all sessions first.",
            )
        return _Reply(202, {"message": "Workspace deletion accepted"})

    def _h_peer_context(
        self, params: Mapping[str, str], _q: Mapping[str, str], _b: object
    ) -> _Reply:
        ws, _ = self._workspace(params["ws"])
        peer, _ = self._peer(ws, params["p"])
        memory = {"representation": peer.representation, "peer_card": peer.peer_card}
        return _Reply(200, {"peer_id": peer.id, "target_id": peer.id} | memory)

    def _h_peer_representation(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        _object(body, ["body"])
        ws, _ = self._workspace(params["ws"])
        peer, _ = self._peer(ws, params["p"])
        return _Reply(200, {"representation": peer.representation or ""})

    def _h_peer_chat(
        self, params: Mapping[str, str], _q: Mapping[str, str], body: object
    ) -> _Reply:
        data = _object(body, ["body"])
        query = data.get("query")
        if not isinstance(query, str) or not 1 <= len(query) <= 10_000:
            raise _HttpError(422, [{"type": "string_type", "loc": ["body", "query"]}])
        ws, _ = self._workspace(params["ws"])
        peer, _ = self._peer(ws, params["p"])
        return _Reply(200, {"content": peer.chat_answer})


_Handler: TypeAlias = Callable[["_Handlers", Mapping[str, str], Mapping[str, str], object], _Reply]

_HANDLERS: Final[Mapping[tuple[str, RouteKind], _Handler]] = {
    ("GET", "health"): _Handlers._h_health,
    ("POST", "workspace_create"): _Handlers._h_workspace_create,
    ("POST", "workspace_list"): _Handlers._h_workspace_list,
    ("POST", "peer_create"): _Handlers._h_peer_create,
    ("POST", "session_create"): _Handlers._h_session_create,
    ("GET", "session_peers"): _Handlers._h_session_peers_get,
    ("POST", "session_peers"): _Handlers._h_session_peers_add,
    ("PUT", "session_peers"): _Handlers._h_session_peers_set,
    ("GET", "session_peer_config"): _Handlers._h_peer_config_get,
    ("PUT", "session_peer_config"): _Handlers._h_peer_config_set,
    ("POST", "message_create"): _Handlers._h_message_create,
    ("POST", "message_list"): _Handlers._h_message_list,
    ("POST", "session_search"): _Handlers._h_session_search,
    ("POST", "workspace_search"): _Handlers._h_workspace_search,
    ("GET", "peer_context"): _Handlers._h_peer_context,
    ("POST", "peer_representation"): _Handlers._h_peer_representation,
    ("POST", "peer_chat"): _Handlers._h_peer_chat,
    ("POST", "session_list"): _Handlers._h_session_list,
    ("DELETE", "session_delete"): _Handlers._h_session_delete,
    ("DELETE", "workspace_delete"): _Handlers._h_workspace_delete,
}
