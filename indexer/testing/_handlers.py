"""The route handlers of `FakeHoncho`, as a mixin over its stored state, and the route table.

Here: health, workspaces, peers and sessions; messages, search and peer memory are in
`_message_handlers`, the state helpers every handler uses in `_state`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

from indexer.testing._message_handlers import _MessageHandlers
from indexer.testing._model import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    RouteKind,
    _Reply,
)
from indexer.testing._routes import _page, _peer_json, _session_json, _workspace_json
from indexer.testing._validate import (
    _SESSION_CONFIG_KEYS,
    _configuration,
    _HttpError,
    _metadata,
    _object,
    _only,
    _peer_configuration,
    _peer_map,
    _positive_int,
    _session_peer_config,
    _valid_id,
)


class _Handlers(_MessageHandlers):
    """One method per route (the message routes in `_message_handlers`)."""

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
