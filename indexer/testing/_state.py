"""The state helpers of `FakeHoncho`'s route handlers: ids, and get-or-create of its records."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Final

from indexer.testing._model import FakeMessage, _Peer, _Session, _Workspace
from indexer.testing._text_search import SearchMode
from indexer.testing._validate import _HttpError

_NANOID_ALPHABET: Final = "_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NANOID_SIZE: Final = 21


class _State:
    """The state helpers every handler uses; `FakeHoncho` holds the state."""

    _clock: Callable[[], datetime]
    _rng: random.Random
    _workspaces: dict[str, _Workspace]
    _message_ids: set[str]
    search_mode: SearchMode

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
