"""The outbox document: one versioned JSON file per delivery, validated on write and read.

A document proves its own integrity: its delivery id is recomputed from its content (the card
reference and projection of a card delivery, the capture identity and payload of a conversation
delivery) and every message's fingerprint from the message. A truncated, garbled or hand-edited
document therefore never validates, so it can never be sent as a delivery. Retry bookkeeping
(attempts, next attempt, last error) is outside the identity and is not covered.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from cards import (
    ExperimentId,
    OutboxError,
    ProjectId,
    canonical_json,
    honcho_session_id,
    is_honcho_id,
    project_key,
)
from cards.model import validation_message
from cards.remote import card_delivery_id, conversation_delivery_id, projection_revision

ENTRY_SCHEMA_VERSION: Literal[1] = 1
MAX_MESSAGES = 100  # Honcho's limit per create request
MAX_CONTENT_CHARS = 25_000  # Honcho's MAX_MESSAGE_SIZE
MAX_METADATA_KEYS = 100
MAX_EVENT_SEQS = 1_000
_DELIVERY_ID = re.compile(r"[0-9a-f]{64}")


def parse_honcho_id(value: str) -> str:
    """Validate a Honcho workspace, peer or session id (`[A-Za-z0-9_-]{1,512}`).

    Raises:
        ValueError: `value` is not a Honcho id (peer ids also may not start with `scope.`).
    """
    if not is_honcho_id(value):
        raise ValueError("not a Honcho id ([A-Za-z0-9_-]{1,512})")
    return value


def parse_delivery_id(value: str) -> str:
    """Validate a delivery id (64 lowercase hex characters) before it becomes a file name.

    Raises:
        ValueError: `value` is not a delivery id.
    """
    if _DELIVERY_ID.fullmatch(value) is None:
        raise ValueError("not a delivery id")
    return value


HonchoId = Annotated[str, AfterValidator(parse_honcho_id)]
DeliveryId = Annotated[str, AfterValidator(parse_delivery_id)]
MetadataValue = str | int | bool
_FROZEN = ConfigDict(extra="forbid", frozen=True)


class OutboundMessage(BaseModel):
    """One Honcho message, already sanitised; `fingerprint` identifies it within a delivery."""

    model_config = _FROZEN

    peer_id: HonchoId
    content: Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)]
    metadata: Annotated[dict[str, MetadataValue], Field(max_length=MAX_METADATA_KEYS)]
    fingerprint: DeliveryId


def message_fingerprint(peer_id: str, content: str, metadata: dict[str, MetadataValue]) -> str:
    """A digest of one message's peer, content and metadata (delivery fields excluded)."""
    stable = {k: v for k, v in metadata.items() if k not in ("delivery_id", "message_fingerprint")}
    document = {"content": content, "metadata": stable, "peer_id": peer_id}
    return hashlib.sha256(canonical_json(document)).hexdigest()


class SessionTarget(BaseModel):
    """Where a delivery goes: one Honcho session, and what kind of session it is.

    A conversation session belongs to one harness session, `dsh_session_id` (kept in the Honcho
    session's metadata); its id is derived from it (ARCHITECTURE.md, Identities), as checked here.
    """

    model_config = _FROZEN

    session_id: HonchoId
    kind: Literal["cards", "conversation"]
    dsh_session_id: Annotated[str, Field(min_length=1, max_length=512)] | None = None

    @model_validator(mode="after")
    def _session_of_the_harness_session(self) -> Self:
        if self.dsh_session_id is not None:
            if self.kind != "conversation":
                raise ValueError("only a conversation session belongs to a harness session")
            if self.session_id != honcho_session_id(self.dsh_session_id):
                raise ValueError("the session id is not the one the harness session gives")
        return self


class CardRef(BaseModel):
    """The local card a card delivery came from, and the projection revision it carries."""

    model_config = _FROZEN

    project_id: str
    experiment_id: str
    projection_revision: DeliveryId


class ConversationRef(BaseModel):
    """The capture identity a conversation delivery id is computed from (Honcho spec §12.2).

    With the target session and the message contents it gives the id; `roles[i]` is the role
    of `messages[i]`.
    """

    model_config = _FROZEN

    workspace_id: HonchoId
    user_peer_id: HonchoId
    project_id: HonchoId
    dsh_session_id: Annotated[str, Field(min_length=1, max_length=512)]
    turn: Annotated[int, Field(ge=0)]
    event_seqs: Annotated[
        list[Annotated[int, Field(ge=0)]], Field(min_length=1, max_length=MAX_EVENT_SEQS)
    ]
    roles: Annotated[
        list[Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")]],
        Field(min_length=1, max_length=MAX_MESSAGES),
    ]

    def delivery_id(self, honcho_session_id: str, contents: Sequence[str]) -> str:
        """The delivery id of this capture sent to `honcho_session_id` as `contents`.

        `contents[i]` is the text of the message of role `roles[i]`.
        """
        return conversation_delivery_id(
            workspace_id=self.workspace_id,
            user_peer_id=self.user_peer_id,
            honcho_session_id=honcho_session_id,
            project_id=self.project_id,
            dsh_session_id=self.dsh_session_id,
            turn=self.turn,
            event_seqs=self.event_seqs,
            messages=list(zip(self.roles, contents, strict=True)),
        )


class OutboxEntry(BaseModel):
    """A durable delivery: its messages, target, admission order and retry state.

    A card delivery (`target.kind == "cards"`) carries `card`; a conversation delivery carries
    `conversation`. Either way `delivery_id` must be the one its content gives.
    """

    model_config = _FROZEN

    schema_version: Literal[1]
    delivery_id: DeliveryId
    target: SessionTarget
    messages: Annotated[list[OutboundMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    card: CardRef | None = None
    conversation: ConversationRef | None = None
    seq: Annotated[int, Field(ge=0)]
    admitted_at: AwareDatetime
    attempts: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    # Set when an earlier copy may already be on the server (a reconciled or re-admitted
    # delivery): the first attempt then checks before sending, like every retry does.
    maybe_sent: bool = False
    next_attempt_at: AwareDatetime | None = None
    last_error: Annotated[str, Field(pattern=r"^[a-z0-9_.]{1,64}$")] | None = None

    @model_validator(mode="after")
    def _derived_from_content(self) -> Self:
        for message in self.messages:
            if message.metadata.get("delivery_id") != self.delivery_id:
                raise ValueError("a message does not carry the delivery id")
            expected = message_fingerprint(message.peer_id, message.content, message.metadata)
            if message.fingerprint != expected:
                raise ValueError("a message fingerprint is not the digest of the message")
        if self.target.kind == "cards":
            derived = _card_delivery_id(self)
        else:
            derived = _conversation_delivery_id(self)
        if derived != self.delivery_id:
            raise ValueError("the delivery id is not the one the content gives")
        return self

    def due(self, now: datetime) -> bool:
        """Whether this entry may be attempted at `now`."""
        return self.next_attempt_at is None or self.next_attempt_at <= now

    def schedule_retry(self, *, now: datetime, delay_s: float, error: str) -> OutboxEntry:
        """This entry scheduled for another attempt after a failure."""
        return self.changed(next_attempt_at=now + timedelta(seconds=delay_s), last_error=error)

    def changed(self, **changes: object) -> OutboxEntry:
        """A validated copy with `changes` (model_copy would skip validation)."""
        return OutboxEntry.model_validate(self.model_dump() | changes)


def _card_delivery_id(entry: OutboxEntry) -> str:
    """The delivery id a card document's reference and projection give (`card_delivery_id`)."""
    ref = entry.card
    if ref is None or entry.conversation is not None or len(entry.messages) != 1:
        raise ValueError("a card delivery is one message with a card reference")
    (message,) = entry.messages
    metadata = message.metadata
    revision = projection_revision(message.content, metadata)
    claimed = (metadata.get("projection_revision"), ref.projection_revision)
    if claimed != (revision, revision):
        raise ValueError("the projection revision is not the digest of the projection")
    if (metadata.get("project_id"), metadata.get("experiment_id")) != (
        ref.project_id,
        ref.experiment_id,
    ):
        raise ValueError("the projection names another card")
    if entry.target.session_id != cards_session_id(ref.project_id):
        raise ValueError("a card delivery targets another project's cards session")
    return card_delivery_id(ProjectId(ref.project_id), ExperimentId(ref.experiment_id), revision)


def _conversation_delivery_id(entry: OutboxEntry) -> str:
    """The delivery id a conversation document's identity and payload give (Honcho spec §12.2)."""
    ref = entry.conversation
    if ref is None or entry.card is not None or len(ref.roles) != len(entry.messages):
        raise ValueError("a conversation delivery has an identity with one role per message")
    return ref.delivery_id(entry.target.session_id, [m.content for m in entry.messages])


def encode_entry(entry: OutboxEntry) -> bytes:
    """The canonical bytes of an outbox document."""
    return canonical_json(entry.model_dump(mode="json"))


def decode_entry(raw: bytes) -> OutboxEntry:
    """Validate an outbox document read from disk.

    Raises:
        OutboxError: the document is malformed, of another schema version, or its delivery id
            is not the one its content gives (truncated, garbled or edited).
    """
    try:
        return OutboxEntry.model_validate_json(raw)
    except ValidationError as exc:
        raise OutboxError(f"invalid outbox document: {validation_message(exc)}") from exc


def cards_session_id(project_id: str) -> str:
    """The Honcho session holding one project's experiment cards (keyed, never the raw id)."""
    return "artmem-cards-" + project_key(ProjectId(project_id))
