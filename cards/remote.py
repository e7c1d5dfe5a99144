"""The remote card: the allowlisted, redacted projection of a card that Honcho may index.

`project_card` reads only the allowlisted fields of an `ExperimentCardV1` (title, summary, source
label, source version, shape, column names, tags, and the ids), redacts each one and renders a
short natural-language description. It never sees artifact bytes and never copies a path, the
session, tool-call or root-agent ids, the producer or the chunk manifest digest. The metadata keys
are exactly `REMOTE_METADATA_KEYS`. The same card always gives byte-identical projections; index
state and timestamps are not part of it, so marking a card queued never changes its delivery id.

Limits (Honcho spec §29.3): the card holds a query fingerprint, never the raw query, but free text
may still carry SQL or source code. Redaction removes connection strings, upper-case `NAME=value`
environment assignments, credentials, paths and e-mail addresses; it does not recognise SQL, source
code, parameter values or row samples. See `cards.redaction` for what regexes miss.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Final, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cards._ids import (
    ExperimentId,
    ProjectId,
    is_sha256_hex,
    parse_artifact_id,
    parse_experiment_id,
    parse_project_id,
    parse_query_fingerprint,
)
from cards.canonical import canonical_json
from cards.card import ExperimentCardV1
from cards.errors import InvalidId
from cards.policy import DEFAULT_LIMITS
from cards.redaction import redact, remove_placeholders

REMOTE_CARD_SCHEMA_VERSION: Final = 1
CARD_NAMESPACE: Final = "artmem"
CARD_KIND: Final = "experiment-card"
# Well under Honcho's 25,000 characters a message: a card is a pointer, not a document.
MAX_CONTENT_CHARS: Final = 4_000
MAX_SOURCE_VERSION_CHARS: Final = 256
REMOTE_METADATA_KEYS: Final = frozenset(
    {
        "source",
        "kind",
        "project_id",
        "experiment_id",
        "artifact_id",
        "query_fingerprint",
        "source_version",
        "delivery_id",
        "projection_revision",
        "schema_version",
    }
)
_DERIVED_KEYS = frozenset({"delivery_id", "projection_revision"})
_DELIVERY_NAMESPACE = "artmem/card"
# With the title, source and summary bounds these keep the rendering under MAX_CONTENT_CHARS.
_LABEL_CHARS = 200
_COLUMNS_BUDGET = 800
_TAGS_BUDGET = 400
_L = DEFAULT_LIMITS


class ProjectionSkipReason(enum.StrEnum):
    """Why a card is kept out of the remote index; shown in safe status metadata."""

    EMPTY_SUMMARY = "empty_summary_after_redaction"


@dataclass(frozen=True, slots=True)
class ProjectionSkipped:
    """The card stays local: recording succeeded, remote indexing is skipped for `reason`."""

    reason: ProjectionSkipReason


class RemoteCard(BaseModel):
    """One Honcho message for one card revision; checks its own revision and delivery id.

    Attributes:
        content: the redacted description, at most `MAX_CONTENT_CHARS` characters.
        metadata: exactly `REMOTE_METADATA_KEYS`, flat, string or integer values.
        redactions: how many spans redaction replaced (local diagnostics; never sent).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    content: Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)]
    metadata: dict[str, str | int]
    redactions: Annotated[int, Field(ge=0)] = 0

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        _check_metadata(self.metadata)
        base = {k: v for k, v in self.metadata.items() if k not in _DERIVED_KEYS}
        revision = projection_revision(self.content, base)
        if self.metadata["projection_revision"] != revision:
            raise ValueError("projection_revision is not the digest of the projection")
        expected = card_delivery_id(
            ProjectId(str(self.metadata["project_id"])),
            ExperimentId(str(self.metadata["experiment_id"])),
            revision,
        )
        if self.metadata["delivery_id"] != expected:
            raise ValueError("delivery_id does not match the projection")
        return self

    @property
    def delivery_id(self) -> str:
        """The deterministic outbox and Honcho duplicate-defence id of this revision."""
        return str(self.metadata["delivery_id"])

    @property
    def projection_revision(self) -> str:
        """The SHA-256 hex digest of the sanitised projection."""
        return str(self.metadata["projection_revision"])

    @property
    def project_id(self) -> ProjectId:
        """The project the card belongs to."""
        return ProjectId(str(self.metadata["project_id"]))

    @property
    def experiment_id(self) -> ExperimentId:
        """The experiment the card describes."""
        return ExperimentId(str(self.metadata["experiment_id"]))


def projection_revision(content: str, metadata: Mapping[str, str | int]) -> str:
    """SHA-256 hex of the canonical JSON of content and metadata (derived keys excluded)."""
    base = {k: v for k, v in metadata.items() if k not in _DERIVED_KEYS}
    return hashlib.sha256(canonical_json({"content": content, "metadata": base})).hexdigest()


def card_delivery_id(project_id: ProjectId, experiment_id: ExperimentId, revision: str) -> str:
    """The delivery id of one card revision: 64 hex characters, inside Honcho's id alphabet.

    Raises:
        InvalidId: an id is malformed or `revision` is not a SHA-256 hex digest.
    """
    if not is_sha256_hex(revision):
        raise InvalidId("projection revision is not a SHA-256 hex digest")
    identity = {
        "namespace": _DELIVERY_NAMESPACE,
        "project_id": parse_project_id(project_id),
        "experiment_id": parse_experiment_id(experiment_id),
        "remote_schema_version": REMOTE_CARD_SCHEMA_VERSION,
        "projection_revision": revision,
    }
    return hashlib.sha256(canonical_json(identity)).hexdigest()


CONVERSATION_DELIVERY_TAG: Final = "artmem/conversation/v1"


def conversation_delivery_id(
    *,
    workspace_id: str,
    user_peer_id: str,
    honcho_session_id: str,
    project_id: str,
    dsh_session_id: str,
    turn: int,
    event_seqs: Sequence[int],
    messages: Sequence[tuple[str, str]],
) -> str:
    """The delivery id of one captured exchange (Honcho spec §12.2), 64 hex characters.

    A SHA-256 over a version tag, the workspace, user peer, Honcho session and project, the
    exact harness session, turn and event sequence numbers, and the redacted `(role, content)`
    payload.

    Raises:
        InvalidInput: a value cannot be encoded canonically (e.g. a float).
    """
    document = {
        "tag": CONVERSATION_DELIVERY_TAG,
        "workspace_id": workspace_id,
        "user_peer_id": user_peer_id,
        "honcho_session_id": honcho_session_id,
        "project_id": project_id,
        "dsh_session_id": dsh_session_id,
        "turn": turn,
        "event_seqs": list(event_seqs),
        "messages": [[role, content] for role, content in messages],
    }
    return hashlib.sha256(canonical_json(document)).hexdigest()


def project_card(card: ExperimentCardV1) -> RemoteCard | ProjectionSkipped:
    """Build the remote projection of `card`, or say why it must stay local."""
    fields = _sanitise(card)
    if not _has_words(fields.summary):
        return ProjectionSkipped(ProjectionSkipReason.EMPTY_SUMMARY)
    # Fields were redacted one by one; joining them can still form a match (a column ending in
    # "Authorization:" before the next column), so the rendering is redacted once more.
    rendered = redact(_render(fields, card.shape))
    content = _clip(rendered.text, MAX_CONTENT_CHARS)
    metadata: dict[str, str | int] = {
        "source": CARD_NAMESPACE,
        "kind": CARD_KIND,
        "project_id": card.project_id,
        "experiment_id": card.experiment_id,
        "artifact_id": card.artifact.artifact_id,
        "query_fingerprint": card.query_fingerprint,
        "source_version": fields.source_version,
        "schema_version": REMOTE_CARD_SCHEMA_VERSION,
    }
    revision = projection_revision(content, metadata)
    metadata["projection_revision"] = revision
    metadata["delivery_id"] = card_delivery_id(
        ProjectId(card.project_id), card.typed_experiment_id, revision
    )
    redactions = fields.redactions + rendered.redactions
    return RemoteCard(content=content, metadata=metadata, redactions=redactions)


@dataclass(frozen=True, slots=True)
class _Fields:
    title: str
    summary: str
    source: str
    source_version: str
    columns: tuple[str, ...]
    tags: tuple[str, ...]
    redactions: int


def _sanitise(card: ExperimentCardV1) -> _Fields:
    results = {
        "title": redact(card.title, max_chars=_L.title_chars, single_line=True),
        "summary": redact(card.summary, max_chars=_L.summary_chars),
        "source": redact(card.source, max_chars=_LABEL_CHARS, single_line=True),
        "version": redact(card.source_version, max_chars=_LABEL_CHARS, single_line=True),
    }
    columns = [redact(c, max_chars=_L.column_chars, single_line=True) for c in card.columns]
    tags = [redact(t, max_chars=_L.tag_chars, single_line=True) for t in card.tags]
    every = [*results.values(), *columns, *tags]
    return _Fields(
        title=_clip(results["title"].text, _L.title_chars),
        summary=_clip(results["summary"].text.strip(), _L.summary_chars),
        source=_clip(results["source"].text, _LABEL_CHARS),
        source_version=_clip(results["version"].text, MAX_SOURCE_VERSION_CHARS),
        columns=tuple(_clip(r.text, _L.column_chars) for r in columns if r.text),
        tags=tuple(_clip(r.text, _L.tag_chars) for r in tags if r.text),
        redactions=sum(r.redactions for r in every),
    )


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in remove_placeholders(text))


def _render(fields: _Fields, shape: Sequence[int] | None) -> str:
    # Fixed labels first and the free-text summary last: a hostile summary cannot pose as a
    # field, and truncation takes the end of the summary rather than a label.
    lines = [f"Experiment card: {fields.title}" if fields.title else "Experiment card"]
    if fields.source:
        lines.append(f"Source: {fields.source}")
    if shape is not None:
        dims = " x ".join(map(str, shape)) if shape else "scalar"
        lines.append(_clip(f"Shape: {dims}", _LABEL_CHARS))
    if fields.columns:
        lines.append(f"Columns: {_join_bounded(fields.columns, _COLUMNS_BUDGET)}")
    if fields.tags:
        lines.append(f"Tags: {_join_bounded(fields.tags, _TAGS_BUDGET)}")
    lines.append(f"Summary: {fields.summary}")
    return "\n".join(lines)


def _join_bounded(items: Sequence[str], budget: int) -> str:
    shown: list[str] = []
    used = 0
    for item in items:
        used += len(item) + 2
        if used > budget:
            break
        shown.append(item)
    rest = len(items) - len(shown)
    listed = ", ".join(shown)
    return f"{listed} (and {rest} more)" if rest else listed


def _clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters at a space, marked with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    # A cut at whitespace never splits a placeholder and never creates a new pattern match.
    last_space = max(cut.rfind(" "), cut.rfind("\n"))
    return (cut[:last_space] if last_space > 0 else cut).rstrip() + "…"


def _check_metadata(metadata: Mapping[str, str | int]) -> None:
    if set(metadata) != REMOTE_METADATA_KEYS:
        raise ValueError("metadata keys are not exactly the remote-card allowlist")
    if (metadata["source"], metadata["kind"]) != (CARD_NAMESPACE, CARD_KIND):
        raise ValueError("metadata source or kind is not an artmem experiment card")
    if metadata["schema_version"] != REMOTE_CARD_SCHEMA_VERSION:
        raise ValueError("unsupported remote card schema_version")
    parse_project_id(metadata["project_id"])
    parse_experiment_id(metadata["experiment_id"])
    parse_artifact_id(metadata["artifact_id"])
    parse_query_fingerprint(metadata["query_fingerprint"])
    version = metadata["source_version"]
    if not isinstance(version, str) or len(version) > MAX_SOURCE_VERSION_CHARS:
        raise ValueError("source_version is not a bounded string")
    for key in _DERIVED_KEYS:
        if not isinstance(metadata[key], str) or not is_sha256_hex(str(metadata[key])):
            raise ValueError(f"{key} is not a SHA-256 hex digest")
