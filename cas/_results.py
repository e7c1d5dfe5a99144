"""What the store's operations return (plain values), and how both backends make them."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from cards import (
    ArtifactId,
    ExperimentId,
    Freshness,
    IndexState,
    ProjectId,
    SessionId,
    freshness_verdict,
)
from cards.errors import InvalidInput, StoreIOError
from cas._hashing import Digests
from cas.slicing import RemoteBytes, SliceSource, load_manifest

if TYPE_CHECKING:  # the card models load only where a card is built or read
    from collections.abc import Callable

    from cards import CardMetadata, ExperimentCardV1
    from cas.slicing import Measured


class Provenance(msgspec.Struct, frozen=True):
    """Who asked for a record: supplied by the host, never by the model or kernel.

    The host parses the session id once, at its boundary (`cards.parse_session_id`).
    """

    session_id: SessionId
    root_agent_id: str | None = None
    tool_call_id: str | None = None


class Recorded(msgspec.Struct, frozen=True):
    """The outcome of a record: the committed card and what happened on the way."""

    card: ExperimentCardV1
    deduplicated: bool
    card_created: bool
    card_updated: bool
    warnings: tuple[str, ...]
    changed: tuple[str, ...] = ()  # card fields a re-record changed

    @property
    def new_revision(self) -> bool:
        """Whether the card's indexed text changed (created, or its description updated)."""
        return self.card_created or self.card_updated


class Located(msgspec.Struct, frozen=True):
    """A card of this project, its freshness, and where its bytes are (not yet hashed)."""

    card: ExperimentCardV1
    source: SliceSource
    freshness: Freshness
    warnings: tuple[str, ...]


class Resolved(msgspec.Struct, frozen=True):
    """A verified artifact: `path` is handed out only after size and SHA-256 are proven."""

    path: str
    manifest_path: str
    card: ExperimentCardV1
    freshness: Freshness
    verified_at: datetime
    hashed: bool
    warnings: tuple[str, ...]


class Usage(msgspec.Struct, frozen=True):
    """Committed usage of a project, as quotas count it."""

    objects: int
    bytes: int
    cards: int


def make_resolved(
    card: ExperimentCardV1,
    paths: tuple[str, str],
    current_source_version: str | None,
    verified_at: datetime,
    hashed: bool,
) -> Resolved:
    """The resolve of `card`, whose bytes at `paths` (object, manifest) were just proven."""
    state, warnings = freshness_verdict(card.source_version, current_source_version)
    return Resolved(
        path=paths[0],
        manifest_path=paths[1],
        card=card,
        freshness=state,
        verified_at=verified_at,
        hashed=hashed,
        warnings=warnings,
    )


def make_located(
    card: ExperimentCardV1,
    paths: tuple[str, str],
    current_source_version: str | None,
    remote: RemoteBytes | None = None,
) -> Located:
    """Where a slice reads `card`'s bytes (object, manifest at `paths`), its manifest proven.

    With `remote`, the bytes and the manifest are read from there instead (a bucket's object
    that this host has no copy of); `paths` say where a verified copy would be.

    Raises:
        IntegrityError: the chunk manifest is missing or not the card's.
        StoreIOError: the manifest could not be read.
    """
    source = SliceSource(
        path=paths[0],
        manifest_path=paths[1],
        size=card.artifact.bytes,
        media_type=card.artifact.media_type,
        chunk_manifest_sha256=card.chunk_manifest_sha256,
        remote=remote,
        table_read=card.table_read,
    )
    load_manifest(source)
    state, warnings = freshness_verdict(card.source_version, current_source_version)
    return Located(card=card, source=source, freshness=state, warnings=warnings)


class Committed(NamedTuple):
    """A record's bytes as measured, ready for its card (`Store.commit`)."""

    digests: Digests
    metadata: CardMetadata  # with the media type detected from the bytes
    measured: Measured  # their table facts
    provenance: Provenance


class Committing(msgspec.Struct, frozen=True):
    """What a record commits a card for, once its bytes are stored (either backend)."""

    experiment_id: ExperimentId
    project_id: ProjectId
    artifact_id: ArtifactId
    digests: Digests
    provenance: Provenance
    index_state: IndexState  # a first card's
    present: bool  # the bytes were stored already (deduplicated)
    healed: bool  # a corrupt stored copy was replaced


HEALED = (
    "healed: the stored copy of these bytes was corrupt; it was moved to quarantine/ and "
    "replaced by the recorded bytes"
)


def commit_card(
    commit: Committing,
    existing: ExperimentCardV1 | None,
    metadata: CardMetadata,
    table_warnings: tuple[str, ...],
    now: datetime,
    write: Callable[[ExperimentCardV1], bool],
) -> Recorded | None:
    """Decide the card on `existing` (the card as it is now), write it if it changed.

    `metadata` is already completed with the table's facts. None when `write` lost its
    condition (a bucket): the caller reads the card again and decides again.
    """
    from cards.build import card_changes, new_card, record_warnings, revised_card

    digests = commit.digests
    if existing is None:
        card = new_card(
            experiment_id=commit.experiment_id,
            project_id=commit.project_id,
            artifact_id=commit.artifact_id,
            sha256=digests.sha256.hex(),
            size=digests.size,
            chunk_manifest_sha256=hashlib.sha256(digests.manifest()).hexdigest(),
            metadata=metadata,
            session_id=commit.provenance.session_id,
            root_agent_id=commit.provenance.root_agent_id,
            tool_call_id=commit.provenance.tool_call_id,
            index_state=commit.index_state,
            now=now,
        )
    else:
        card = revised_card(existing, metadata, now)
    if card is not existing and not write(card):
        return None
    warnings = (*record_warnings(card, deduplicated=commit.present), *table_warnings)
    return Recorded(
        card=card,
        deduplicated=commit.present,
        card_created=existing is None,
        card_updated=existing is not None and card is not existing,
        changed=() if existing is None else card_changes(existing, card),
        warnings=(*warnings, HEALED) if commit.healed else warnings,
    )


def check_version(value: str | None) -> None:
    """Refuse a malformed `current_source_version` (either backend's resolve and locate).

    Raises:
        InvalidInput: it is empty, longer than 200 characters, or not printable.
    """
    if value is None:
        return
    if not value or len(value) > 200 or not value.isprintable():
        raise InvalidInput("current_source_version must be 1-200 printable characters")


def check_writable(read_only: bool) -> None:
    """Refuse a write to a store opened read-only (the notebook API).

    Raises:
        StoreIOError: it is read-only.
    """
    if read_only:
        raise StoreIOError("this store is open read-only; record through artmem or a kernel")
