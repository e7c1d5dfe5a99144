"""The tools' metadata arguments as a pydantic model (`MetadataFields`), for their JSON Schema.

The contract is written once, in `cards.card.CardMetadata` (a msgspec struct, what the store takes):
every bound and pattern here is read from that struct (`_rules`), patterns re-anchored for
pydantic-core's regex (`$` where Python's `re` ends on backslash-Z), so the schema a tool publishes
and the rules the store applies cannot drift. A tool's arguments become a `CardMetadata` through
`parse_metadata`, which checks them by those rules again. `validation_message` describes any
pydantic validation failure without echoing the offending value.
"""

from __future__ import annotations

from typing import Annotated

import msgspec.inspect as inspect
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from cards.card import FORMS, LABEL_CHARS, LINE_BODY, LINE_FORM, OCTET_STREAM, CardMetadata


def _fields() -> dict[str, inspect.Type]:
    info = inspect.type_info(CardMetadata)
    assert isinstance(info, inspect.StructType)
    return {field.name: field.type for field in info.fields}


_FIELDS = _fields()


def _rules(name: str, *, items: bool = False, description: str | None = None) -> FieldInfo:
    """Pydantic's `Field` with the bounds and pattern `CardMetadata` holds for `name`.

    `items`: the rules of each entry of a list field rather than of the list.
    """
    rules: FieldInfo
    kind = _FIELDS[name]
    if isinstance(kind, inspect.UnionType):  # optional: the rules of the value when present
        kind = next(t for t in kind.types if not isinstance(t, inspect.NoneType))
    if items:
        assert isinstance(kind, inspect.ListType)
        kind = kind.item_type
    if isinstance(kind, inspect.StrType):
        pattern = None if kind.pattern is None else kind.pattern.removesuffix("\\Z") + "$"
        rules = Field(
            min_length=kind.min_length,
            max_length=kind.max_length,
            pattern=pattern,
            description=description,
        )
    elif isinstance(kind, inspect.ListType):
        rules = Field(
            min_length=kind.min_length, max_length=kind.max_length, description=description
        )
    elif isinstance(kind, inspect.IntType):
        rules = Field(ge=kind.ge, le=kind.le, description=description)
    else:
        raise TypeError(f"no pydantic rules for {name}: {kind}")
    return rules


# A bounded one-line label (`source`, `source_version`), as the wire's other labels use it.
Label = Annotated[str, Field(min_length=1, max_length=LABEL_CHARS, pattern=f"^(?:{LINE_BODY})$")]


class MetadataFields(BaseModel):
    """The card metadata a tool's caller gives (`cards.card.CardMetadata`), as arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    title: Annotated[str, _rules("title")]
    summary: Annotated[str, _rules("summary")]
    source: Annotated[
        str, _rules("source", description="where the data came from, e.g. a warehouse name")
    ]
    shape: Annotated[list[Annotated[int, _rules("shape", items=True)]], _rules("shape")] | None = (
        None
    )
    columns: Annotated[list[Annotated[str, _rules("columns", items=True)]], _rules("columns")] = []
    tags: Annotated[list[Annotated[str, _rules("tags", items=True)]], _rules("tags")] = []
    query_fingerprint: Annotated[
        str,
        _rules(
            "query_fingerprint",
            description="lowercase SHA-256 hex of a stable description of the query and parameters",
        ),
    ]
    source_version: Annotated[
        str, _rules("source_version", description="dataset snapshot or commit; 'unknown' allowed")
    ]
    media_type: Annotated[str, _rules("media_type")] = OCTET_STREAM
    derived_from: Annotated[
        list[Annotated[str, _rules("derived_from", items=True)]],
        _rules(
            "derived_from",
            description="experiment ids of this project that this result was derived from; each "
            "must exist already (a re-record keeps the parents the card was first recorded with)",
        ),
    ] = []


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
