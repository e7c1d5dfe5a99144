"""The on-disk documents: `ArtifactRefV1` and `ExperimentCardV1`, validated on write and on read."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

import orjson
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

from cards import _ids
from cards._ids import (
    ArtifactId,
    ExperimentId,
    ProjectId,
    QueryFingerprint,
    SessionId,
    artifact_id_for_digest,
    experiment_id,
)
from cards.canonical import canonical_json
from cards.errors import CardInvalid, InvalidInput, UnsupportedVersion, excerpt
from cards.policy import DEFAULT_LIMITS, IndexState, Limits

CARD_SCHEMA_VERSION: Literal[1] = 1
ARTIFACT_SCHEMA_VERSION: Literal[1] = 1

_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_ERROR_CODE = re.compile(r"[a-z0-9_.]{1,64}")
_SHA256 = r"^[0-9a-f]{64}$"


def _error_code(value: str) -> str:
    if _ERROR_CODE.fullmatch(value) is None:
        raise ValueError("not an error code")
    return value


def _anchored(pattern: re.Pattern[str]) -> str:
    return f"^(?:{pattern.pattern})$"


# Display-text rules as patterns, checked in pydantic-core (Rust) rather than a Python callback
# per field, which matters when thousands of cards are validated at start: no C0/C1 control
# (tab and newline allowed in the multi-line summary) and at least one non-space character.
_NO_CONTROL = r"[^\x00-\x1f\x7f-\x9f]"
_LINE = rf"^{_NO_CONTROL}*[^\s\x00-\x1f\x7f-\x9f]{_NO_CONTROL}*$"
_NO_CONTROL_ML = r"[^\x00-\x08\x0b-\x1f\x7f-\x9f]"
_TEXT = rf"^{_NO_CONTROL_ML}*[^\s\x00-\x1f\x7f-\x9f]{_NO_CONTROL_ML}*$"

_L = DEFAULT_LIMITS
Title = Annotated[str, Field(min_length=1, max_length=_L.title_chars, pattern=_LINE)]
Summary = Annotated[str, Field(min_length=1, max_length=_L.summary_chars, pattern=_TEXT)]
Label = Annotated[str, Field(min_length=1, max_length=200, pattern=_LINE)]
Tag = Annotated[str, Field(min_length=1, max_length=_L.tag_chars, pattern=_LINE)]
Column = Annotated[str, Field(min_length=1, max_length=_L.column_chars, pattern=_LINE)]
MediaType = Annotated[str, Field(pattern=_anchored(_MEDIA_TYPE))]
Sha256Hex = Annotated[str, Field(pattern=_SHA256)]
ArtifactIdField = Annotated[str, Field(pattern=_anchored(_ids.ARTIFACT_ID))]
ExperimentIdField = Annotated[str, Field(pattern=_anchored(_ids.EXPERIMENT_ID))]
ProjectIdField = Annotated[str, Field(pattern=_anchored(_ids.PROJECT_ID))]
SessionIdField = Annotated[str, Field(pattern=_anchored(_ids.SESSION_ID))]
FingerprintField = Annotated[str, Field(pattern=_anchored(_ids.SHA256_HEX))]

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, validate_default=True)


class ArtifactRefV1(BaseModel):
    """A portable reference to immutable bytes: never a path."""

    model_config = _STRICT

    schema_version: Literal[1]
    artifact_id: ArtifactIdField
    sha256: Sha256Hex
    bytes: Annotated[int, Field(ge=0, le=1 << 50)]
    media_type: MediaType
    created_at: AwareDatetime

    @model_validator(mode="after")
    def _id_matches_digest(self) -> Self:
        if artifact_id_for_digest(bytes.fromhex(self.sha256)) != self.artifact_id:
            raise ValueError("artifact_id is not the id of sha256")
        return self


class IndexStatus(BaseModel):
    """A card's Honcho index state, with bounded, content-free attempt metadata."""

    model_config = _STRICT

    state: IndexState
    attempts: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    last_error: Annotated[str, AfterValidator(_error_code)] | None = None
    updated_at: AwareDatetime | None = None
    # The Honcho projection revision this state is about (set by the indexer; None while the
    # card is pending, or for a card written before revisions were kept).
    projection_revision: Sha256Hex | None = None


Shape = Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=8)]
Tags = Annotated[list[Tag], Field(max_length=_L.tags)]
Columns = Annotated[list[Column], Field(max_length=_L.columns)]


class CardText(BaseModel):
    """The descriptive fields of a card: declared once, for cards, metadata and tool arguments."""

    model_config = _STRICT

    title: Title
    summary: Summary
    source: Label = Field(description="where the data came from, e.g. a warehouse name")
    shape: Shape | None = None
    columns: Columns = []
    tags: Tags = []


class ExperimentCardV1(CardText):
    """The complete local record connecting a description and provenance to an artifact."""

    model_config = _STRICT

    schema_version: Literal[1]
    experiment_id: ExperimentIdField
    artifact: ArtifactRefV1
    chunk_manifest_sha256: Sha256Hex
    query_fingerprint: FingerprintField
    source_version: Label
    project_id: ProjectIdField
    session_id: SessionIdField
    root_agent_id: Label | None = None
    tool_call_id: Label | None = None
    producer: Label
    created_at: AwareDatetime
    updated_at: AwareDatetime
    index: IndexStatus

    @model_validator(mode="after")
    def _identity_holds(self) -> Self:
        expected = experiment_id(
            ProjectId(self.project_id),
            ArtifactId(self.artifact.artifact_id),
            QueryFingerprint(self.query_fingerprint),
            self.source_version,
        )
        if expected != self.experiment_id:
            raise ValueError("experiment_id does not match the card's identity fields")
        if self.updated_at < self.created_at:
            raise ValueError("updated_at is before created_at")
        return self

    @property
    def typed_experiment_id(self) -> ExperimentId:
        """The experiment id as its id type."""
        return ExperimentId(self.experiment_id)

    @property
    def typed_artifact_id(self) -> ArtifactId:
        """The artifact id as its id type."""
        return ArtifactId(self.artifact.artifact_id)

    @property
    def typed_session_id(self) -> SessionId:
        """The originating session id as its id type."""
        return SessionId(self.session_id)


class CardMetadata(CardText):
    """What a caller says about a result: everything on a card that the caller chooses."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    query_fingerprint: FingerprintField = Field(
        description="lowercase SHA-256 hex of a stable description of the query and parameters"
    )
    source_version: Label = Field(description="dataset snapshot or commit; 'unknown' allowed")
    media_type: MediaType = "application/octet-stream"

    def check(self, limits: Limits) -> None:
        """Check the operator's (possibly lowered) bounds; the model holds the defaults.

        Raises:
            InvalidInput: a field is longer or has more entries than `limits` allow.
        """
        checks = (
            ("title", len(self.title), limits.title_chars),
            ("summary", len(self.summary), limits.summary_chars),
            ("tags", len(self.tags), limits.tags),
            ("tags", max(map(len, self.tags), default=0), limits.tag_chars),
            ("columns", len(self.columns), limits.columns),
            ("columns", max(map(len, self.columns), default=0), limits.column_chars),
        )
        for name, actual, bound in checks:
            if actual > bound:
                raise InvalidInput(f"{name} exceeds the configured bound of {bound}")


def parse_metadata(fields: dict[str, object]) -> CardMetadata:
    """Validate caller-supplied card metadata.

    Raises:
        InvalidInput: a field is missing, malformed or out of bounds (the message names fields,
            never their values).
    """
    try:
        return CardMetadata.model_validate(fields)
    except ValidationError as exc:
        raise InvalidInput(f"invalid card metadata: {_summarise(exc)}") from exc


def dump_card(card: ExperimentCardV1) -> bytes:
    """The canonical bytes of a card, as written to disk."""
    return canonical_json(card.model_dump(mode="json"))


def parse_card(raw: bytes) -> ExperimentCardV1:
    """Validate a card read from disk.

    Raises:
        UnsupportedVersion: the card (or its artifact reference) has another schema version.
        CardInvalid: the bytes are not a valid `ExperimentCardV1`.
    """
    try:
        return ExperimentCardV1.model_validate_json(raw)
    except ValidationError as exc:
        _raise_unsupported_version(raw)
        raise CardInvalid(f"invalid experiment card: {_summarise(exc)}") from exc


def _raise_unsupported_version(raw: bytes) -> None:
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    if not isinstance(document, dict):
        return
    version = document.get("schema_version")
    if version != CARD_SCHEMA_VERSION:
        raise UnsupportedVersion(
            f"unsupported card schema_version {excerpt(version)}", version=version
        )
    artifact = document.get("artifact")
    if isinstance(artifact, dict) and artifact.get("schema_version") != ARTIFACT_SCHEMA_VERSION:
        version = artifact.get("schema_version")
        raise UnsupportedVersion(
            f"unsupported artifact schema_version {excerpt(version)}", version=version
        )


def _summarise(exc: ValidationError) -> str:
    """Field locations and the form each must take: never the offending (possibly hostile) value."""
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or '<card>'}: {_explain(err)}"
        for err in exc.errors(include_input=False, include_url=False)[:5]
    ]
    return "; ".join(parts)


# What a pattern-checked field must look like, by field name (the pattern itself helps nobody).
_FORMS = {
    "query_fingerprint": "64 lowercase hex characters (a SHA-256 digest)",
    "media_type": "a lowercase media type such as text/csv or application/vnd.apache.parquet",
    "sha256": "64 lowercase hex characters",
    "chunk_manifest_sha256": "64 lowercase hex characters",
    "experiment_id": "exp_ followed by 52 characters a-z and 2-7",
    "artifact_id": "art_ followed by 52 characters a-z and 2-7",
    "session_id": "a letter or digit, then up to 199 letters, digits, '.', '_' or '-'",
    "summary": "printable text with at least one non-space character (newlines and tabs allowed)",
}
_LINE_FORM = "one line of printable text with at least one non-space character"


def _explain(err: ErrorDetails) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    field = next((str(p) for p in reversed(err["loc"]) if isinstance(p, str)), "")
    if kind == "string_pattern_mismatch":
        return f"must be {_FORMS.get(field, _LINE_FORM)} ({kind})"
    if kind in ("string_too_long", "too_long"):
        unit = "characters" if kind == "string_too_long" else "entries"
        return f"too long: at most {ctx.get('max_length')} {unit} ({kind})"
    if kind in ("string_too_short", "too_short"):
        unit = "character" if kind == "string_too_short" else "entry"
        return f"too short: at least {ctx.get('min_length')} {unit}(s) ({kind})"
    if kind == "missing":
        return "is required (missing)"
    if kind == "extra_forbidden":
        return "is not a known field (extra_forbidden)"
    return kind


def validation_message(exc: ValidationError) -> str:
    """A content-free description of a validation failure, for errors shown to callers."""
    return _summarise(exc)
