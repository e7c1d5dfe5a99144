"""The message routes of `FakeHoncho`: create, list and search messages, and a peer's memory."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime

from indexer.testing._filters import _filter_from_body
from indexer.testing._model import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_SEARCH_LIMIT,
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES_PER_REQUEST,
    MAX_PAGE_SIZE,
    FakeMessage,
    _Reply,
)
from indexer.testing._routes import _page
from indexer.testing._state import _State
from indexer.testing._text_search import search
from indexer.testing._validate import (
    _MESSAGE_CONFIG_KEYS,
    _configuration,
    _HttpError,
    _invalid,
    _metadata,
    _object,
    _only,
    _parse_datetime,
    _positive_int,
    _query_bool,
    _valid_id,
)


class _MessageHandlers(_State):
    """The message and peer-memory routes, as a mixin over the fake's state."""

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
