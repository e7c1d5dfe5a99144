"""The card and what a caller says about it: `ExperimentCardV1`, `ArtifactRefV1`, `CardMetadata`.

They are msgspec structs, decoded and checked in C: recording, resolving, slicing and searching
load no pydantic, whose import and model construction cost a command about 0.15 s at start.
Only the tools' arguments (`cards.model`, `cards.wire`) are pydantic models, for their JSON
Schemas; they check text by the same pattern bodies, declared here.

A struct's constructor checks nothing but `__post_init__`; the builders (`cards.build`) pass
every new or changed card through `validated`, which applies every rule a read applies, and
`dump_card` refuses a card that breaks one.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from cards import _ids
from cards._ids import (
    ArtifactId,
    ExperimentId,
    ProjectId,
    QueryFingerprint,
    artifact_id_for_digest,
    experiment_id,
)
from cards._text_rules import LINE, TEXT
from cards._text_rules import LINE_BODY as LINE_BODY  # `cards.model` reads it here
from cards.canonical import canonical_json
from cards.errors import CardInvalid, InvalidInput, UnsupportedVersion, excerpt
from cards.policy import DEFAULT_LIMITS, IndexState, Limits
from cards.structs import Fault, Problem, find_problem, whole
from cards.table_read import TableRead

CARD_SCHEMA_VERSION: Literal[1] = 1
ARTIFACT_SCHEMA_VERSION: Literal[1] = 1
LABEL_CHARS = 200

MEDIA_TYPE_BODY = r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"


MEDIA_TYPE = whole(MEDIA_TYPE_BODY)
ERROR_CODE = whole(r"[a-z0-9_.]{1,64}")
SHA256 = whole(_ids.SHA256_HEX.pattern)


_L = DEFAULT_LIMITS
_Title = Annotated[str, Meta(min_length=1, max_length=_L.title_chars, pattern=LINE)]
_Summary = Annotated[str, Meta(min_length=1, max_length=_L.summary_chars, pattern=TEXT)]
_Label = Annotated[str, Meta(min_length=1, max_length=LABEL_CHARS, pattern=LINE)]
_Tag = Annotated[str, Meta(min_length=1, max_length=_L.tag_chars, pattern=LINE)]
Column = Annotated[str, Meta(min_length=1, max_length=_L.column_chars, pattern=LINE)]
_Sha256 = Annotated[str, Meta(pattern=SHA256)]
_Time = Annotated[datetime, Meta(tz=True)]  # timezone-aware only
_MediaType = Annotated[str, Meta(pattern=MEDIA_TYPE)]
_Shape = Annotated[list[Annotated[int, Meta(ge=0)]], Meta(max_length=8)]
_Columns = Annotated[list[Column], Meta(max_length=_L.columns)]
_Tags = Annotated[list[_Tag], Meta(max_length=_L.tags)]
# A card's parents: the experiments of its project it was derived from (`cards.lineage`).
MAX_PARENTS = 16
_ExperimentIdText = Annotated[str, Meta(pattern=whole(_ids.EXPERIMENT_ID.pattern))]
_Parents = Annotated[list[_ExperimentIdText], Meta(max_length=MAX_PARENTS)]
QUERY_CHARS = 4000
_Query = Annotated[str, Meta(min_length=1, max_length=QUERY_CHARS, pattern=TEXT)]
OCTET_STREAM = "application/octet-stream"


class _Document(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A card, or part or metadata of one: unknown fields fail and nothing is coerced."""


class ArtifactRefV1(_Document, frozen=True):
    """A portable reference to immutable bytes: never a path."""

    schema_version: Literal[1]
    artifact_id: Annotated[str, Meta(pattern=whole(_ids.ARTIFACT_ID.pattern))]
    sha256: _Sha256
    bytes: Annotated[int, Meta(ge=0, le=1 << 50)]
    media_type: _MediaType
    created_at: _Time

    def __post_init__(self) -> None:
        if artifact_id_for_digest(_digest(self.sha256)) != self.artifact_id:
            raise ValueError("artifact_id is not the id of sha256")


def _digest(hex_digest: str) -> bytes:
    try:
        return bytes.fromhex(hex_digest)
    except ValueError:
        raise ValueError("sha256 is not hex") from None


class IndexStatus(_Document, frozen=True):
    """A card's Honcho index state, with bounded, content-free attempt metadata."""

    state: IndexState
    attempts: Annotated[int, Meta(ge=0, le=1_000_000)] = 0
    last_error: Annotated[str, Meta(pattern=ERROR_CODE)] | None = None
    updated_at: _Time | None = None
    # The Honcho projection revision this state is about (set by the indexer; None while the
    # card is pending, or for a card written before revisions were kept).
    projection_revision: _Sha256 | None = None


class _Described(_Document, frozen=True, kw_only=True):
    """What a caller says about a result, as both the card and its metadata hold it."""

    title: _Title
    summary: _Summary
    source: _Label
    query_fingerprint: _Sha256
    source_version: _Label
    shape: _Shape | None = None
    columns: _Columns = msgspec.field(default_factory=list)
    tags: _Tags = msgspec.field(default_factory=list)
    # Descriptive, never identity: the experiment id does not depend on a card's parents.
    derived_from: _Parents = msgspec.field(default_factory=list)
    # Local only, never sent to Honcho (`cards.remote` projects an allowlist): the text whose
    # SHA-256 is the query fingerprint, and how a CSV or TSV result is read.
    query: _Query | None = None
    table_read: TableRead | None = None

    def __post_init__(self) -> None:
        if len(set(self.derived_from)) != len(self.derived_from):
            raise ValueError("derived_from names a parent twice")
        if self.query is not None and query_fingerprint(self.query) != self.query_fingerprint:
            raise ValueError("query_fingerprint is not the SHA-256 of query")


class ExperimentCardV1(_Described, frozen=True, kw_only=True):
    """The complete local record connecting a description and provenance to an artifact."""

    schema_version: Literal[1]
    experiment_id: Annotated[str, Meta(pattern=whole(_ids.EXPERIMENT_ID.pattern))]
    artifact: ArtifactRefV1
    chunk_manifest_sha256: _Sha256
    project_id: Annotated[str, Meta(pattern=whole(_ids.PROJECT_ID.pattern))]
    session_id: Annotated[str, Meta(pattern=whole(_ids.SESSION_ID.pattern))]
    producer: _Label
    created_at: _Time
    updated_at: _Time
    index: IndexStatus
    root_agent_id: _Label | None = None
    tool_call_id: _Label | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.experiment_id in self.derived_from:
            raise ValueError("derived_from names the experiment itself")
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

    @property
    def typed_experiment_id(self) -> ExperimentId:
        """The experiment id as its id type."""
        return ExperimentId(self.experiment_id)

    @property
    def typed_artifact_id(self) -> ArtifactId:
        """The artifact id as its id type."""
        return ArtifactId(self.artifact.artifact_id)


_DECODER = msgspec.json.Decoder(ExperimentCardV1)

# The fields of `CardMetadata` a caller may leave out; a re-record keeps the card's value of one
# left out (see `cards.build.revised_card`).
OPTIONAL_METADATA = frozenset(
    {"shape", "columns", "tags", "media_type", "derived_from", "query", "table_read"}
)


class CardMetadata(_Described, frozen=True, kw_only=True):
    """What a caller says about a result: everything on a card that the caller chooses.

    `given` names the fields the caller set (`parse_metadata`), or that reading the bytes
    proved (`cas`): an optional field not in it keeps a re-recorded card's value.
    """

    media_type: _MediaType = OCTET_STREAM
    given: frozenset[str] = frozenset()
    defaults: frozenset[str] = frozenset()
    """The descriptive fields a person left to a default (`artmem record` without `--title`):
    a first card takes the default, a re-record keeps the card's value."""

    def check(self, limits: Limits) -> None:
        """Check the operator's (possibly lowered) bounds; the struct holds the defaults.

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

    def with_values(self, values: dict[str, object], *, given: bool) -> CardMetadata:
        """These metadata with `values` (checked by every rule), counted as given if `given`.

        Raises:
            InvalidInput: a value breaks a rule.
        """
        names = self.given | frozenset(values) if given else self.given
        return _metadata(msgspec.structs.asdict(self) | values | {"given": names})


def query_fingerprint(query: str) -> str:
    """The query fingerprint of a query's text: the SHA-256 of its UTF-8 bytes, in hex."""
    return hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()


def parse_metadata(fields: dict[str, object]) -> CardMetadata:
    """Validate caller-supplied card metadata; the fields present count as given.

    Raises:
        InvalidInput: a field is missing, malformed or out of bounds (the message names fields,
            never their values).
    """
    for ours in ("given", "defaults"):  # ours, never the caller's
        if ours in fields:
            raise InvalidInput(
                f"invalid card metadata: {ours}: is not a known field (extra_forbidden)"
            )
    return _metadata({**fields, "given": frozenset(fields) & OPTIONAL_METADATA})


def _metadata(document: dict[str, object]) -> CardMetadata:
    try:
        return msgspec.convert(document, CardMetadata)
    except msgspec.ValidationError:
        problems = _every_problem(document) or [describe(find_problem(document, CardMetadata))]
        raise InvalidInput(f"invalid card metadata: {'; '.join(problems[:5])}") from None
    except RecursionError:
        raise InvalidInput("invalid card metadata: <metadata>: nests too deeply") from None


def _every_problem(document: dict[str, object]) -> list[str]:
    """Each field's first problem (msgspec stops at the first): a person fixes all at once."""
    fields = {field.name: field for field in msgspec.structs.fields(CardMetadata)}
    problems = [
        f"{excerpt(name)}: is not a known field (extra_forbidden)"
        for name in document
        if name not in fields
    ]
    for name, field in fields.items():
        if name not in document:
            problems += [f"{name}: is required (missing)"] if field.required else []
            continue
        try:
            msgspec.convert(document[name], field.type)
        except msgspec.ValidationError:
            problems.append(describe(find_problem(document[name], field.type), name))
    return problems


def dump_card(card: ExperimentCardV1) -> bytes:
    """The canonical bytes of a card, as written to disk: never those of an invalid card.

    Raises:
        CardInvalid: `card` breaks a rule (a struct built or replaced without `validated`).
    """
    document = msgspec.to_builtins(validated(card))
    for name in ("derived_from", "query", "table_read"):  # unset: the bytes it always had
        if not document[name]:
            del document[name]
    return canonical_json(document)


def parse_card(raw: bytes) -> ExperimentCardV1:
    """Validate a card read from disk.

    Raises:
        UnsupportedVersion: the card (or its artifact reference) has another schema version.
        CardInvalid: the bytes are not a valid `ExperimentCardV1`.
    """
    try:
        return _DECODER.decode(raw)
    except msgspec.ValidationError:
        pass
    except (msgspec.DecodeError, RecursionError):  # a hostile file may nest without end
        raise CardInvalid(_NOT_JSON) from None
    try:
        document = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # refused a field before reaching bad JSON
        raise CardInvalid(_NOT_JSON) from None
    _refuse_other_versions(document)
    problem = describe(find_problem(document, ExperimentCardV1))
    raise CardInvalid(f"invalid experiment card: {problem}")


def validated(card: ExperimentCardV1) -> ExperimentCardV1:
    """`card` checked by every rule a read applies (a struct's constructor checks none).

    Raises:
        CardInvalid: a field breaks the card's rules (the builders pass checked values).
    """
    document = msgspec.to_builtins(card, builtin_types=(datetime,))
    try:
        return msgspec.convert(document, ExperimentCardV1)
    except msgspec.ValidationError:
        problem = describe(find_problem(document, ExperimentCardV1))
        raise CardInvalid(f"invalid experiment card: {problem}") from None


def _refuse_other_versions(document: object) -> None:
    """Raise `UnsupportedVersion` if the card or its artifact names another schema version."""
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


# What a pattern-checked field must look like, by field name (the pattern itself helps nobody).
FORMS = {
    "query_fingerprint": "64 lowercase hex characters (a SHA-256 digest)",
    "media_type": "a lowercase media type such as text/csv or application/vnd.apache.parquet",
    "sha256": "64 lowercase hex characters",
    "chunk_manifest_sha256": "64 lowercase hex characters",
    "projection_revision": "64 lowercase hex characters",
    "experiment_id": "exp_ followed by 52 characters a-z and 2-7",
    "artifact_id": "art_ followed by 52 characters a-z and 2-7",
    "session_id": "a letter or digit, then up to 199 letters, digits, '.', '_' or '-'",
    "summary": "printable text with at least one non-space character (newlines and tabs allowed)",
    "last_error": "an error code: 1-64 of a-z, 0-9, '_' and '.'",
    "query": "printable text with at least one non-space character (newlines and tabs allowed)",
    "derived_from": "experiment ids (exp_ followed by 52 characters a-z and 2-7)",
}
LINE_FORM = "one line of printable text with at least one non-space character"
_NOT_JSON = "invalid experiment card: <card>: not a JSON document"


def describe(problem: Problem, within: str = "") -> str:
    """Where a card broke a rule and the form the field must take: never the value itself.

    A pattern's text and an enum's allowed values are replaced by the field's form, and a
    foreign key's name is bounded. `within` names the field `problem` is about when it came from
    checking that field alone.
    """
    path = [p for p in (within, *problem.path) if p]
    field = next((p for p in reversed(path) if not p.isdigit()), "")
    fault = problem.fault
    if fault is Fault.UNKNOWN:
        path[-1] = excerpt(path[-1])
        message = "is not a known field (extra_forbidden)"
    elif fault is Fault.PATTERN:
        message = f"must be {FORMS.get(field, LINE_FORM)} (pattern)"
    elif fault is Fault.CHOICE:
        message = "is not one of the allowed values (enum)"
    elif fault is Fault.MISSING:
        message = "is required (missing)"
    elif fault is Fault.TYPE:
        message = f"must be {problem.detail}"
    else:
        message = problem.detail
    return f"{'.'.join(path) or '<card>'}: {message}"
