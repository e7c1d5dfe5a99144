"""Pure card construction: a new card from a record, a revised card from a re-record.

No clock and no I/O: the store passes the time and the digests it measured.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from cards._ids import (
    ArtifactId,
    ExperimentId,
    ProjectId,
)
from cards.card import (
    ARTIFACT_SCHEMA_VERSION,
    CARD_SCHEMA_VERSION,
    ArtifactRefV1,
    ExperimentCardV1,
    IndexStatus,
    validated,
)
from cards.errors import ParentsFixed
from cards.policy import UNKNOWN_SOURCE_VERSION, IndexState

if TYPE_CHECKING:
    from cards.card import CardMetadata

PRODUCER = "artmem 0.1.0"
_REQUIRED = ("title", "summary", "source")
_OPTIONAL = ("tags", "columns", "shape", "query", "table_read")  # kept on a re-record unless given
_LOCAL_ONLY = frozenset({"query", "table_read"})  # never in the Honcho projection


def new_card(
    *,
    experiment_id: ExperimentId,
    project_id: ProjectId,
    artifact_id: ArtifactId,
    sha256: str,
    size: int,
    chunk_manifest_sha256: str,
    metadata: CardMetadata,
    session_id: str,
    root_agent_id: str | None,
    tool_call_id: str | None,
    index_state: IndexState,
    now: datetime,
) -> ExperimentCardV1:
    """The first card of an experiment (validated like any card read from disk).

    Raises:
        CardInvalid: a field breaks the card's rules (callers pass checked values).
    """
    artifact = ArtifactRefV1(
        schema_version=ARTIFACT_SCHEMA_VERSION,
        artifact_id=artifact_id,
        sha256=sha256,
        bytes=size,
        media_type=metadata.media_type,
        created_at=now,
    )
    card = ExperimentCardV1(
        schema_version=CARD_SCHEMA_VERSION,
        experiment_id=experiment_id,
        artifact=artifact,
        chunk_manifest_sha256=chunk_manifest_sha256,
        query_fingerprint=metadata.query_fingerprint,
        source_version=metadata.source_version,
        project_id=project_id,
        session_id=session_id,
        root_agent_id=root_agent_id,
        tool_call_id=tool_call_id,
        producer=PRODUCER,
        created_at=now,
        updated_at=now,
        index=IndexStatus(state=index_state, updated_at=now),
        title=metadata.title,
        summary=metadata.summary,
        source=metadata.source,
        tags=list(metadata.tags),
        columns=list(metadata.columns),
        shape=None if metadata.shape is None else list(metadata.shape),
        derived_from=list(metadata.derived_from),
        query=metadata.query,
        table_read=metadata.table_read,
    )
    return validated(card)


def revised_card(
    existing: ExperimentCardV1, metadata: CardMetadata, now: datetime
) -> ExperimentCardV1:
    """`existing` with the descriptive fields `metadata` sets; `existing` itself when equal.

    An optional field `metadata` leaves unset (not in `given`) keeps its value on the card:
    recording the same bytes again without tags keeps the tags; given tags are added to the
    card's (a person re-recording with `--tag rnaseq` expects to add a tag; removing one is
    `artmem edit --remove-tag`); an explicit empty list clears them. Identity fields never
    change (they made the experiment id). New descriptive text is a new projection revision,
    so an indexed card goes back to `pending` (the query text and the declared read options are
    local only: changing only them keeps the index state). A title or summary left to its default
    (`metadata.defaults`) keeps the card's. Parents are fixed when
    the card is first written (so every parent existed before its child, and lineage has no
    cycle): a re-record may repeat them or leave them out, never change them.

    Raises:
        ParentsFixed: `metadata` gives parents other than the card's.
    """
    if "derived_from" in metadata.given and metadata.derived_from != existing.derived_from:
        raise ParentsFixed(
            f"experiment {existing.experiment_id} was first recorded with "
            f"{len(existing.derived_from)} parent(s); a re-record cannot change them "
            "(leave --derived-from out, or repeat the same parents in the same order)"
        )
    descriptive = _descriptive(metadata)
    added = descriptive.get("tags")
    if isinstance(added, list) and added:  # tags add up; an explicit empty list clears them
        descriptive["tags"] = [*existing.tags, *(t for t in added if t not in existing.tags)]
    current = {name: getattr(existing, name) for name in descriptive}
    media_type = existing.artifact.media_type
    if "media_type" in metadata.given:
        media_type = metadata.media_type
    if current == descriptive and existing.artifact.media_type == media_type:
        return existing
    index = existing.index
    projected = existing.artifact.media_type != media_type or any(
        current[name] != value for name, value in descriptive.items() if name not in _LOCAL_ONLY
    )
    if projected and index.state is not IndexState.DISABLED:  # a new projection revision
        index = IndexStatus(state=IndexState.PENDING, updated_at=now)
    artifact = msgspec.structs.replace(existing.artifact, media_type=media_type)
    return with_changes(
        existing, {**descriptive, "artifact": artifact, "updated_at": now, "index": index}
    )


def card_changes(before: ExperimentCardV1, after: ExperimentCardV1) -> tuple[str, ...]:
    """The names of the descriptive fields (and the media type) that differ between two cards."""
    names = [n for n in (*_REQUIRED, *_OPTIONAL) if getattr(before, n) != getattr(after, n)]
    if before.artifact.media_type != after.artifact.media_type:
        names.append("media_type")
    return tuple(names)


def with_index(card: ExperimentCardV1, status: IndexStatus) -> ExperimentCardV1:
    """`card` with another index status."""
    return with_changes(card, {"index": status})


def with_changes(card: ExperimentCardV1, changes: dict[str, object]) -> ExperimentCardV1:
    """A copy of `card` with `changes`, validated again (a struct's `replace` checks nothing).

    Raises:
        CardInvalid: the changed card breaks the card's rules.
    """
    return validated(msgspec.structs.replace(card, **changes))


def record_warnings(card: ExperimentCardV1, *, deduplicated: bool) -> tuple[str, ...]:
    """The warnings a record reports for `card`."""
    warnings = []
    if deduplicated:
        warnings.append("deduplicated: these exact bytes were already stored in this project")
    if card.source_version == UNKNOWN_SOURCE_VERSION:
        warnings.append("source_version is 'unknown': freshness will be unverifiable")
    return tuple(warnings)


def _descriptive(metadata: CardMetadata) -> dict[str, object]:
    given = metadata.given
    fields: dict[str, object] = {
        name: getattr(metadata, name) for name in _REQUIRED if name not in metadata.defaults
    }
    for name in _OPTIONAL:
        if name in given:
            value = getattr(metadata, name)
            fields[name] = list(value) if isinstance(value, list | tuple) else value
    return fields
