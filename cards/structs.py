"""What every msgspec struct of ours shares: whole-string patterns, and what a failure was.

msgspec matches a `Meta(pattern=...)` with `re.search`, so a pattern must be anchored at both
ends, and with the end-of-text anchor: a `$` would let a final newline through.

msgspec validates in C and stops at the first failure, which it reports as one sentence for
people. We never read that sentence: when a document fails, `find_problem` walks it against the
target type's own description (`msgspec.inspect`) and says where it fails and how, as values a
caller can branch on. Only the failure path pays for the walk; decoding stays msgspec's.
"""

from __future__ import annotations

import enum
import functools
import operator
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, NamedTuple

import msgspec
from msgspec import inspect as mi

from cards import _ids


def whole(body: str) -> str:
    """`body` matching a whole string only."""
    return rf"^(?:{body})\Z"


HONCHO_ID = whole(_ids.HONCHO_ID.pattern)  # a Honcho workspace, peer or session id


class Fault(enum.StrEnum):
    """How a value fails its type."""

    UNKNOWN = "unknown"  # a key the object does not have (the path ends with it)
    MISSING = "missing"  # a required key is absent (the path ends with it)
    TYPE = "type"  # the wrong kind of value
    PATTERN = "pattern"  # a string outside its pattern
    CHOICE = "choice"  # not one of an enum's or literal's values
    LENGTH = "length"  # too long or too short
    RANGE = "range"  # a number out of its bounds
    RULE = "rule"  # a struct's own check (`__post_init__`) refused it


class Problem(NamedTuple):
    """Where a value fails (keys and indices) and how; `detail` is for people, never the value.

    `detail` is what was expected ("a string", "at most 200 characters"), a pattern for
    `PATTERN`, or the struct's own message for `RULE`.
    """

    path: tuple[str, ...]
    fault: Fault
    detail: str


def find_problem(value: object, target: object) -> Problem:
    """Why `value` does not convert to `target`, which msgspec has just refused it as.

    The walk reports the first failure in field order, as msgspec does.
    """
    found = next(_problems(value, _type_info(target), ()), None)
    return found or Problem((), Fault.RULE, "does not match its schema")


@functools.lru_cache(maxsize=64)  # a handful of targets: the card, its metadata, the config
def _type_info(target: object) -> mi.Type:
    return mi.type_info(target)


def _problems(value: object, t: mi.Type, path: tuple[str, ...]) -> Iterator[Problem]:
    if isinstance(t, mi.UnionType):
        yield from _union(value, t, path)
    elif isinstance(t, mi.StructType):
        yield from _struct(value, t, path)
    elif isinstance(t, mi.DictType):
        if not isinstance(value, dict):
            yield Problem(path, Fault.TYPE, "an object")
            return
        yield from _length(len(value), t, path, "entries")
        for key, item in value.items():
            yield from _problems(key, t.key_type, (*path, str(key)))
            yield from _problems(item, t.value_type, (*path, str(key)))
    elif isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        if not isinstance(value, (list, tuple, set, frozenset)):
            yield Problem(path, Fault.TYPE, "an array")
            return
        yield from _length(len(value), t, path, "entries")
        for i, item in enumerate(value):
            yield from _problems(item, t.item_type, (*path, str(i)))
    elif isinstance(t, mi.TupleType):
        if not isinstance(value, (list, tuple)) or len(value) != len(t.item_types):
            yield Problem(path, Fault.TYPE, f"an array of {len(t.item_types)} entries")
            return
        for i, (item, item_type) in enumerate(zip(value, t.item_types, strict=True)):
            yield from _problems(item, item_type, (*path, str(i)))
    else:
        yield from _scalar(value, t, path)


def _union(value: object, t: mi.UnionType, path: tuple[str, ...]) -> Iterator[Problem]:
    branches = []
    for branch in t.types:
        problem = next(_problems(value, branch, path), None)
        if problem is None:
            return
        branches.append(problem)
    # The branch of the value's own kind explains it (a list's bad item, not "null").
    for problem in branches:
        if problem.fault is not Fault.TYPE or problem.path != path:
            yield problem
            return
    yield Problem(path, Fault.TYPE, " or ".join(_kind(branch) for branch in t.types))


def _struct(value: object, t: mi.StructType, path: tuple[str, ...]) -> Iterator[Problem]:
    if not isinstance(value, dict):
        yield Problem(path, Fault.TYPE, "an object")
        return
    names = {field.encode_name: field for field in t.fields}
    if t.forbid_unknown_fields:
        for key in value:
            if key not in names:
                yield Problem((*path, str(key)), Fault.UNKNOWN, "not a known field")
                return
    for name, field in names.items():
        if name in value:
            yield from _problems(value[name], field.type, (*path, name))
        elif field.required:
            yield Problem((*path, name), Fault.MISSING, "is required")
    try:  # every field is sound: the struct's own check is what refused it
        msgspec.convert(value, t.cls)
    except msgspec.ValidationError as exc:
        cause = exc.__cause__
        if isinstance(cause, (ValueError, TypeError)):
            yield Problem(path, Fault.RULE, str(cause))


def _scalar(value: object, t: mi.Type, path: tuple[str, ...]) -> Iterator[Problem]:
    kind = _kind(t)
    if isinstance(t, mi.StrType):
        if not isinstance(value, str):
            yield Problem(path, Fault.TYPE, kind)
            return
        yield from _length(len(value), t, path, "characters")
        if t.pattern is not None and re.search(t.pattern, value) is None:
            yield Problem(path, Fault.PATTERN, t.pattern)
    elif isinstance(t, (mi.IntType, mi.FloatType)):
        number = (int,) if isinstance(t, mi.IntType) else (int, float)
        if not isinstance(value, number) or isinstance(value, bool):
            yield Problem(path, Fault.TYPE, kind)
            return
        yield from _range(value, t, path)
    elif isinstance(t, (mi.LiteralType, mi.EnumType)):
        allowed = t.values if isinstance(t, mi.LiteralType) else [m.value for m in t.cls]
        if value not in allowed or isinstance(value, bool):
            yield Problem(path, Fault.CHOICE, "one of the allowed values")
    elif isinstance(t, mi.DateTimeType):
        aware = Annotated[datetime, msgspec.Meta(tz=t.tz)] if t.tz is not None else datetime
        try:
            msgspec.convert(value, aware)
        except msgspec.ValidationError:
            yield Problem(path, Fault.TYPE, kind)
    elif isinstance(t, mi.BoolType) and not isinstance(value, bool):
        yield Problem(path, Fault.TYPE, kind)
    elif isinstance(t, mi.NoneType) and value is not None:
        yield Problem(path, Fault.TYPE, kind)


def _length(
    n: int, t: mi.StrType | mi.CollectionType | mi.DictType, path: tuple[str, ...], unit: str
) -> Iterator[Problem]:
    if t.max_length is not None and n > t.max_length:
        yield Problem(path, Fault.LENGTH, f"too long: at most {t.max_length} {unit}")
    elif t.min_length is not None and n < t.min_length:
        yield Problem(path, Fault.LENGTH, f"too short: at least {t.min_length} {unit}")


def _range(value: float, t: mi.IntType | mi.FloatType, path: tuple[str, ...]) -> Iterator[Problem]:
    # Written as "not within", so NaN, which compares false with everything, is out of range.
    checks = (
        (t.ge, operator.ge, "at least"),
        (t.gt, operator.gt, "greater than"),
        (t.le, operator.le, "at most"),
        (t.lt, operator.lt, "less than"),
    )
    for bound, within, words in checks:
        if bound is not None and not within(value, bound):
            yield Problem(path, Fault.RANGE, f"out of range: {words} {bound}")
            return


_KINDS = {
    mi.StrType: "a string",
    mi.IntType: "an integer",
    mi.FloatType: "a number",
    mi.BoolType: "true or false",
    mi.NoneType: "null",
    mi.DateTimeType: "an RFC 3339 date and time",
    mi.StructType: "an object",
    mi.DictType: "an object",
}


def _kind(t: mi.Type) -> str:
    return _KINDS.get(type(t), "an array" if isinstance(t, mi.CollectionType) else "a value")
