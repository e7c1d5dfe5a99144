"""The outbox document: one versioned JSON file per delivery, validated on write and read."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from cards import OutboxError, ProjectId, canonical_json, project_key, validation_message

ENTRY_SCHEMA_VERSION: Literal[1] = 1
MAX_MESSAGES = 100  # Honcho's limit per create request
MAX_CONTENT_CHARS = 25_000  # Honcho's MAX_MESSAGE_SIZE
MAX_METADATA_KEYS = 100
_HONCHO_ID = re.compile(r"[A-Za-z0-9_-]{1,512}")
_DELIVERY_ID = re.compile(r"[0-9a-f]{64}")


def parse_honcho_id(value: str) -> str:
    """Validate a Honcho workspace, peer or session id (`[A-Za-z0-9_-]{1,512}`).

    Raises:
        ValueError: `value` is not a Honcho id (peer ids also may not start with `scope.`).
    """
    if _HONCHO_ID.fullmatch(value) is None:
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
    """Where a delivery goes: one Honcho session, and what kind of session it is."""

    model_config = _FROZEN

    session_id: HonchoId
    kind: Literal["cards", "conversation"]


class CardRef(BaseModel):
    """The local card a card delivery came from, and the projection revision it carries."""

    model_config = _FROZEN

    project_id: str
    experiment_id: str
    projection_revision: DeliveryId


class OutboxEntry(BaseModel):
    """A durable delivery: its messages, target, admission order and retry state."""

    model_config = _FROZEN

    schema_version: Literal[1]
    delivery_id: DeliveryId
    target: SessionTarget
    messages: Annotated[list[OutboundMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    card: CardRef | None = None
    seq: Annotated[int, Field(ge=0)]
    admitted_at: AwareDatetime
    attempts: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    # Set when an earlier copy may already be on the server (a reconciled or re-admitted
    # delivery): the first attempt then checks before sending, like every retry does.
    maybe_sent: bool = False
    next_attempt_at: AwareDatetime | None = None
    last_error: Annotated[str, Field(pattern=r"^[a-z0-9_.]{1,64}$")] | None = None

    def due(self, now: datetime) -> bool:
        """Whether this entry may be attempted at `now`."""
        return self.next_attempt_at is None or self.next_attempt_at <= now

    def retried(self, *, now: datetime, delay_s: float, error: str) -> OutboxEntry:
        """This entry scheduled for another attempt after a failure."""
        return self.changed(next_attempt_at=now + timedelta(seconds=delay_s), last_error=error)

    def changed(self, **changes: object) -> OutboxEntry:
        """A validated copy with `changes` (model_copy would skip validation)."""
        return OutboxEntry.model_validate(self.model_dump() | changes)


def encode_entry(entry: OutboxEntry) -> bytes:
    """The canonical bytes of an outbox document."""
    return canonical_json(entry.model_dump(mode="json"))


def decode_entry(raw: bytes) -> OutboxEntry:
    """Validate an outbox document read from disk.

    Raises:
        OutboxError: the document is malformed or of another schema version.
    """
    try:
        return OutboxEntry.model_validate_json(raw)
    except ValidationError as exc:
        raise OutboxError(f"invalid outbox document: {validation_message(exc)}") from exc


def cards_session_id(project_id: str) -> str:
    """The Honcho session holding one project's experiment cards (keyed, never the raw id)."""
    return "artmem-cards-" + project_key(ProjectId(project_id))
