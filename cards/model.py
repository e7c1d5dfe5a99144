"""The tools' metadata arguments as a pydantic model (`MetadataFields`), for their JSON Schema.

The store takes `cards.card.CardMetadata` (a msgspec struct); a tool's arguments become one
through `parse_metadata`, which checks them again by the same rules (the same pattern bodies, and
a test that both accept exactly the same text). `validation_message` describes any pydantic
validation failure without echoing the offending value.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from cards import _ids
from cards.card import (
    FORMS,
    LABEL_CHARS,
    LINE_BODY,
    LINE_FORM,
    MAX_PARENTS,
    MEDIA_TYPE_BODY,
    OCTET_STREAM,
    TEXT_BODY,
)
from cards.policy import DEFAULT_LIMITS


def _whole(body: str) -> str:
    """`body` matching a whole string (pydantic-core's regex: `$` is the end of the text)."""
    return f"^(?:{body})$"


_LINE = _whole(LINE_BODY)
_L = DEFAULT_LIMITS
Title = Annotated[str, Field(min_length=1, max_length=_L.title_chars, pattern=_LINE)]
Summary = Annotated[
    str, Field(min_length=1, max_length=_L.summary_chars, pattern=_whole(TEXT_BODY))
]
Label = Annotated[str, Field(min_length=1, max_length=LABEL_CHARS, pattern=_LINE)]
Tag = Annotated[str, Field(min_length=1, max_length=_L.tag_chars, pattern=_LINE)]
Column = Annotated[str, Field(min_length=1, max_length=_L.column_chars, pattern=_LINE)]
MediaType = Annotated[str, Field(pattern=_whole(MEDIA_TYPE_BODY))]
FingerprintField = Annotated[str, Field(pattern=_whole(_ids.SHA256_HEX.pattern))]

Shape = Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=8)]
Tags = Annotated[list[Tag], Field(max_length=_L.tags)]
Columns = Annotated[list[Column], Field(max_length=_L.columns)]
Parents = Annotated[
    list[Annotated[str, Field(pattern=_whole(_ids.EXPERIMENT_ID.pattern))]],
    Field(max_length=MAX_PARENTS),
]


class MetadataFields(BaseModel):
    """The card metadata a tool's caller gives (`cards.card.CardMetadata`), as arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    title: Title
    summary: Summary
    source: Label = Field(description="where the data came from, e.g. a warehouse name")
    shape: Shape | None = None
    columns: Columns = []
    tags: Tags = []
    query_fingerprint: FingerprintField = Field(
        description="lowercase SHA-256 hex of a stable description of the query and parameters"
    )
    source_version: Label = Field(description="dataset snapshot or commit; 'unknown' allowed")
    media_type: MediaType = OCTET_STREAM
    derived_from: Parents = Field(
        default=[],
        description="experiment ids of this project that this result was derived from; each "
        "must exist already (a re-record keeps the parents the card was first recorded with)",
    )


def _summarise(exc: ValidationError) -> str:
    """Field locations and the form each must take: never the offending (possibly hostile) value."""
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or '<card>'}: {_explain(err)}"
        for err in exc.errors(include_input=False, include_url=False)[:5]
    ]
    return "; ".join(parts)


def _explain(err: ErrorDetails) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    field = next((str(p) for p in reversed(err["loc"]) if isinstance(p, str)), "")
    if kind == "string_pattern_mismatch":
        return f"must be {FORMS.get(field, LINE_FORM)} ({kind})"
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
