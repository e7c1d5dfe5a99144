"""The Honcho edge: the only module that imports `honcho` (honcho-ai 2.7.0).

The SDK is built with `max_retries=0`: the outbox owns retries, and the SDK's own retry loop would
sleep inside ours. Every SDK exception is translated into our error classes here, so nothing above
this module knows the SDK. The API key is passed in by the composition root from the environment
variable that configuration names; it is never stored elsewhere, printed or logged.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import honcho
import httpx
import pydantic
from honcho.api_types import (
    PeerConfig,
    ReasoningConfiguration,
    SessionConfiguration,
    SessionPeerConfig,
    SummaryConfiguration,
)

from cards import (
    InvalidId,
    RemoteMisconfigured,
    RemoteRejected,
    RemoteUnauthorized,
    RemoteUnavailable,
    parse_artifact_id,
    parse_experiment_id,
)
from indexer._entry import OutboundMessage, SessionTarget, cards_session_id, parse_honcho_id
from indexer._search import CardSearch, RemoteCardHit

MAX_SEARCH_RESULTS = 100
MAX_HIT_CONTENT_CHARS = 4_000
LIST_PAGE_SIZE = 100


@dataclass(frozen=True, slots=True)
class HonchoSettings:
    """Where and as whom to write; validated by the configuration layer."""

    base_url: str
    workspace_id: str
    user_peer_id: str
    assistant_peer_id: str
    timeout_s: float = 5.0
    create_workspace: bool = False


@contextlib.contextmanager
def honcho_errors() -> Iterator[None]:
    """Translate SDK exceptions into ours, so nothing above this module imports honcho."""
    try:
        yield
    except (
        honcho.RateLimitError,
        honcho.ServerError,
        honcho.TimeoutError,
        honcho.ConnectionError,
    ) as exc:  # SDK names shadow builtins: keep them qualified
        raise RemoteUnavailable(f"honcho is unavailable: {type(exc).__name__}") from exc
    except (honcho.AuthenticationError, honcho.PermissionDeniedError) as exc:
        raise RemoteUnauthorized("honcho refused the credentials (401/403)") from exc
    except honcho.HonchoError as exc:  # other 4xx: retrying cannot help
        raise RemoteRejected(f"honcho rejected the request: {type(exc).__name__}") from exc
    except httpx.HTTPError as exc:  # anything the SDK let through from the transport
        raise RemoteUnavailable(f"honcho is unreachable: {type(exc).__name__}") from exc
    except pydantic.ValidationError as exc:  # a 2xx answer of the wrong shape
        raise RemoteUnavailable("honcho answered with an unexpected shape") from exc


@dataclass
class HonchoMemoryService:
    """Delivers outbox messages to Honcho and searches experiment cards there."""

    settings: HonchoSettings
    api_key: str = field(repr=False)
    transport: httpx.BaseTransport | None = field(default=None, repr=False)
    _client: honcho.Honcho | None = field(default=None, init=False, repr=False)
    _http: httpx.Client | None = field(default=None, init=False, repr=False)
    _sessions: dict[str, honcho.Session] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        for value in (
            self.settings.workspace_id,
            self.settings.user_peer_id,
            self.settings.assistant_peer_id,
        ):
            _checked_id(value)

    def deliver(self, target: SessionTarget, messages: Sequence[OutboundMessage]) -> None:
        """Create `messages` in the target session in one request (at most 100).

        Raises:
            RemoteUnavailable: timeout, connection failure, 429 or 5xx (outcome may be ambiguous).
            RemoteUnauthorized: 401/403, or the workspace is missing and may not be created.
            RemoteRejected: 422 or another permanent rejection.
        """
        if not 1 <= len(messages) <= 100:
            raise RemoteRejected("a delivery holds 1 to 100 messages")
        params = [
            honcho.MessageCreateParams(
                peer_id=_checked_id(m.peer_id), content=m.content, metadata=dict(m.metadata)
            )
            for m in messages
        ]
        with honcho_errors():
            self._session(target).add_messages(params)

    def delivered(self, target: SessionTarget, delivery_id: str) -> list[dict[str, object]]:
        """The metadata of every message already in the target session for `delivery_id`.

        Raises:
            RemoteUnavailable, RemoteUnauthorized, RemoteRejected: as for `deliver`.
        """
        with honcho_errors():
            session = self._session(target)
            page = session.messages(
                filters={"metadata": {"delivery_id": delivery_id}}, size=LIST_PAGE_SIZE
            )
            found: list[dict[str, object]] = []
            while True:
                found.extend(dict(m.metadata) for m in page.items)
                if not page.has_next_page():
                    return found
                next_page = page.get_next_page()
                if next_page is None:
                    return found
                page = next_page

    def search_cards(self, project_id: str, query: str, limit: int) -> CardSearch:
        """Semantic search over one project's cards; foreign or malformed hits are dropped.

        Raises:
            RemoteUnavailable, RemoteUnauthorized, RemoteRejected: as for `deliver`.
        """
        limit = max(1, min(limit, MAX_SEARCH_RESULTS))
        target = SessionTarget(session_id=cards_session_id(project_id), kind="cards")
        filters = {"metadata": {"kind": "experiment-card", "project_id": project_id}}
        with honcho_errors():
            found = self._session(target).search(query, filters=filters, limit=limit)
        hits: list[RemoteCardHit] = []
        dropped = 0
        for message in found:
            hit = _card_hit(message.metadata, message.content, project_id)
            if hit is None:
                dropped += 1
            else:
                hits.append(hit)
        return CardSearch(hits=hits, dropped=dropped)

    def close(self) -> None:
        """Release the HTTP connections."""
        with self._lock:
            if self._http is not None:
                self._http.close()  # ours: the SDK never closes a client it was given
            self._http = None
            self._client = None
            self._sessions.clear()

    # -- internals --------------------------------------------------------------------------

    def _sdk(self) -> honcho.Honcho:
        with self._lock:
            if self._client is None:
                self._client = self._build()
            return self._client

    def _build(self) -> honcho.Honcho:
        http_client = httpx.Client(
            base_url=self.settings.base_url,
            timeout=self.settings.timeout_s,
            transport=self.transport,
        )
        self._http = http_client
        client = honcho.Honcho(
            api_key=self.api_key,
            base_url=self.settings.base_url,
            workspace_id=self.settings.workspace_id,
            timeout=self.settings.timeout_s,
            max_retries=0,
            http_client=http_client,
        )
        if not self.settings.create_workspace and not _workspace_exists(client):
            http_client.close()
            self._http = None
            raise RemoteMisconfigured(
                "the configured Honcho workspace does not exist and create_workspace is false"
            )
        return client

    def _session(self, target: SessionTarget) -> honcho.Session:
        """The SDK session object, set up once per process (each set-up is a request)."""
        session_id = _checked_id(target.session_id)
        session = self._sessions.get(session_id)
        if session is None:
            client = self._sdk()
            if target.kind == "cards":
                session = self._cards_session(client, session_id)
            else:
                session = client.session(session_id)
            self._sessions[session_id] = session
        return session

    def _cards_session(self, client: honcho.Honcho, session_id: str) -> honcho.Session:
        """A cards session: no derivation or summaries; the assistant peer is never observed."""
        assistant = self.settings.assistant_peer_id
        client.peer(assistant, configuration=PeerConfig(observe_me=False))
        configuration = SessionConfiguration(
            reasoning=ReasoningConfiguration(enabled=False),
            summary=SummaryConfiguration(enabled=False),
        )
        peer_config = SessionPeerConfig(observe_me=False, observe_others=False)
        return client.session(
            session_id, configuration=configuration, peers=[(assistant, peer_config)]
        )


def _workspace_exists(client: honcho.Honcho) -> bool:
    with honcho_errors():
        page = client.workspaces(filters={"id": client.workspace_id}, size=1)
        return any(ws == client.workspace_id for ws in page.items)


def _checked_id(value: str) -> str:
    try:
        return parse_honcho_id(value)
    except ValueError as exc:
        raise RemoteRejected("an id is not a valid Honcho id") from exc


def _card_hit(metadata: dict[str, object], content: str, project_id: str) -> RemoteCardHit | None:
    """A hit only if it is an artmem experiment card of exactly this project, with valid ids."""
    if metadata.get("source") != "artmem" or metadata.get("kind") != "experiment-card":
        return None
    if metadata.get("project_id") != project_id:
        return None
    try:
        experiment = parse_experiment_id(metadata.get("experiment_id"))
        artifact = parse_artifact_id(metadata.get("artifact_id"))
    except InvalidId:
        return None
    return RemoteCardHit(experiment, artifact, content[:MAX_HIT_CONTENT_CHARS])
