"""The Honcho edge: the only module that imports `honcho` (honcho-ai 2.7.0).

The SDK is built with `max_retries=0`: the outbox owns retries, and the SDK's own retry loop would
sleep inside ours. Every SDK exception is translated into our error classes here, so nothing above
this module knows the SDK. The API key is passed in by the composition root from the environment
variable that configuration names; it is never stored elsewhere, printed or logged.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
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
from indexer._search import CardSearch, MemoryHit, MemorySearch, RemoteCardHit, UserContext

MAX_SEARCH_RESULTS = 100
MAX_HIT_CONTENT_CHARS = 4_000
MAX_CONTEXT_CHARS = 20_000
MEMORY_LAYER = "conversation"  # the metadata `layer` of every conversational message
MEMORY_KINDS = frozenset({"exchange", "note", "correction"})
LIST_PAGE_SIZE = 100
MAX_SESSIONS = 256  # SDK session objects kept per process (each set-up costs a request)


@dataclass(frozen=True, slots=True)
class HonchoSettings:
    """Where and as whom to write; validated by the configuration layer."""

    base_url: str
    workspace_id: str
    user_peer_id: str
    assistant_peer_id: str
    timeout_s: float = 5.0
    create_workspace: bool = False
    observe_assistant: bool = False  # conversation sessions: derive the assistant's representation


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
    _sessions: OrderedDict[str, honcho.Session] = field(
        default_factory=OrderedDict, init=False, repr=False
    )
    _peer: honcho.Peer | None = field(default=None, init=False, repr=False)
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

    def search_memory(self, project_id: str, query: str, limit: int) -> MemorySearch:
        """Semantic search over the configured person's conversational memory in one project.

        Filtered server-side by layer, project and user peer, and checked again here: a hit
        of another project or person, or of an unknown shape, is dropped and counted.

        Raises:
            RemoteUnavailable, RemoteUnauthorized, RemoteRejected: as for `deliver`.
        """
        limit = max(1, min(limit, MAX_SEARCH_RESULTS))
        user = self.settings.user_peer_id
        scope = {"layer": MEMORY_LAYER, "project_id": project_id, "user_peer_id": user}
        with honcho_errors():
            found = self._sdk().search(query, filters={"metadata": scope}, limit=limit)
        hits: list[MemoryHit] = []
        dropped = 0
        for message in found:
            hit = _memory_hit(message, scope)
            if hit is None:
                dropped += 1
            else:
                hits.append(hit)
        return MemorySearch(hits=hits, dropped=dropped)

    def user_context(self) -> UserContext:
        """The configured person's global representation and peer card (bounded).

        Raises:
            RemoteUnavailable, RemoteUnauthorized, RemoteRejected: as for `deliver`.
        """
        with honcho_errors():
            context = self._user_peer().context()
        representation = (context.representation or "")[:MAX_CONTEXT_CHARS]
        card = [line[:MAX_HIT_CONTENT_CHARS] for line in (context.peer_card or [])[:50]]
        return UserContext(representation=representation, peer_card=card)

    def dialectic(self, question: str, timeout_s: float) -> str:
        """Ask Honcho's dialectic endpoint about the configured person (slow: an LLM runs).

        Raises:
            RemoteUnavailable, RemoteUnauthorized, RemoteRejected: as for `deliver`.
        """
        with honcho_errors():
            answer = self._user_peer().chat(question, reasoning_level="low", timeout=timeout_s)
        return (answer or "")[:MAX_CONTEXT_CHARS]

    def close(self) -> None:
        """Release the HTTP connections."""
        with self._lock:
            if self._http is not None:
                self._http.close()  # ours: the SDK never closes a client it was given
            self._http = None
            self._client = None
            self._peer = None
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
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                self._sessions.move_to_end(session_id)
                return session
        client = self._sdk()  # a set-up is a request: made outside the lock
        if target.kind == "cards":
            session = self._cards_session(client, session_id)
        else:
            session = self._conversation_session(client, target)
        with self._lock:  # the most recent kept, so a long-lived worker's memory stays bounded
            self._sessions[session_id] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def _user_peer(self) -> honcho.Peer:
        with self._lock:
            peer = self._peer
        if peer is None:
            peer = self._sdk().peer(_checked_id(self.settings.user_peer_id))
            with self._lock:
                self._peer = peer
        return peer

    def _conversation_session(self, client: honcho.Honcho, target: SessionTarget) -> honcho.Session:
        """A harness session's mirror: the person observed, the assistant only if configured."""
        peers = [
            (self.settings.user_peer_id, SessionPeerConfig(observe_me=True, observe_others=False)),
            (
                self.settings.assistant_peer_id,
                SessionPeerConfig(observe_me=self.settings.observe_assistant, observe_others=False),
            ),
        ]
        metadata: dict[str, object] | None = None
        if target.dsh_session_id is not None:
            metadata = {"source": "artmem", "dsh_session_id": target.dsh_session_id}
        return client.session(target.session_id, metadata=metadata, peers=peers)

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


def _memory_hit(message: honcho.Message, scope: dict[str, str]) -> MemoryHit | None:
    """A hit only if it is an artmem conversational message of exactly this project and person."""
    metadata = dict(message.metadata or {})
    if metadata.get("source") != "artmem" or any(metadata.get(k) != v for k, v in scope.items()):
        return None
    kind, role = metadata.get("kind"), metadata.get("role")
    if kind not in MEMORY_KINDS or not isinstance(role, str) or role not in ("user", "assistant"):
        return None
    note_kind, supersedes = metadata.get("note_kind"), metadata.get("supersedes")
    return MemoryHit(
        kind=str(kind),
        role=role,
        content=message.content[:MAX_HIT_CONTENT_CHARS],
        message_id=str(message.id)[:64],
        honcho_session_id=str(message.session_id)[:512],
        created_at=message.created_at.isoformat() if message.created_at else "",
        note_kind=note_kind if isinstance(note_kind, str) else None,
        supersedes=supersedes[:128] if isinstance(supersedes, str) else None,
    )
