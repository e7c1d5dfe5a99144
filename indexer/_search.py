"""What a remote card search returns: hits re-validated against the caller's project."""

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
