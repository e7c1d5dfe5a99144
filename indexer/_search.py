"""What remote searches return: hits re-validated against the caller's project (and person)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RemoteCardHit:
    """A card found through Honcho search, re-validated against the caller's project."""

    experiment_id: str
    artifact_id: str
    content: str


@dataclass(frozen=True, slots=True)
class CardSearch:
    """Remote hits for one project, and how many foreign or malformed hits were dropped."""

    hits: list[RemoteCardHit]
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A conversational memory found through Honcho: what it is, its text, where and when.

    `kind` is `exchange` (a captured turn), `note` (memory_record) or `correction`; `role` is
    who said it (`user` or `assistant`); `supersedes` names what a correction replaces.
    """

    kind: str
    role: str
    content: str
    message_id: str
    honcho_session_id: str
    created_at: str  # ISO 8601, from the server
    note_kind: str | None = None
    supersedes: str | None = None


@dataclass(frozen=True, slots=True)
class MemorySearch:
    """Conversational hits for one project and person, and how many foreign ones were dropped."""

    hits: list[MemoryHit]
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class UserContext:
    """The user peer's global representation and peer card (untrusted text, bounded)."""

    representation: str
    peer_card: list[str]
