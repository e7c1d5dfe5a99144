"""The fields of a block of JSON Lines and their types, and how a type widens over the file.

pyarrow infers a block's schema, but fails the whole block on one field whose values change
kind (a number, then a string), and types a time with a UTC offset as a naive timestamp (the
offset applied and lost). Here, for `_json_lines`:

- `infer_block`: a block's fields and types. A field whose values change kind is taken out (the
  block is parsed again without it, `without`) and read as its JSON text; a top-level time
  field whose values all carry a UTC offset is `timestamp[s, tz=UTC]`, and one mixing both
  forms is text, as the CSV reader types them (Arrow's ISO 8601 cast decides, as for CSV).
- `merged`: a field's type over two blocks (int64 and double: double; times and text: string;
  structs and lists member by member), or None where the kinds differ: JSON text.
- `misfit`: where a field first holds a value its type does not, for a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from cards import excerpt
from cas.slicing._json_text import decoded, object_at, objects, without

_KIND_CHANGE = re.compile(r"Column\((/.*)\) changed from (\w+) to (\w+) in row (\d+)")
_OFFSET = re.compile(r"(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)$")
_TIMES = (pa.timestamp("s"), pa.timestamp("s", tz="UTC"))
_MIXED_ZONES = "holds times with and without a UTC offset"


def parse_block(block: bytes, schema: pa.Schema | None) -> pa.Table:
    """One block parsed by pyarrow: every field inferred, or `schema`'s fields only."""
    parse = pajson.ParseOptions(
        explicit_schema=schema,
        unexpected_field_behavior="infer" if schema is None else "ignore",
    )
    read = pajson.ReadOptions(use_threads=False, block_size=len(block) + 1)
    return pajson.read_json(pa.BufferReader(block), read_options=read, parse_options=parse)


def has_struct(dtype: pa.DataType) -> bool:
    """Whether `dtype` is a struct, or a list of one (at any depth)."""
    while pa.types.is_list(dtype):
        dtype = dtype.value_type
    return bool(pa.types.is_struct(dtype))


# -- types ------------------------------------------------------------------------------------


@dataclass
class Inferred:
    """A block's fields: pyarrow's types, the fields read as text, why a type is not pyarrow's."""

    types: dict[str, pa.DataType] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


def infer_block(block: bytes, line: int) -> Inferred:
    """The fields of `block` and their types, a field whose values change kind as text.

    Raises:
        pa.ArrowInvalid: pyarrow cannot read the block (its message counts rows, not lines).
        TableUnreadable: the block is not UTF-8 where a field is taken out.
    """
    inferred, data = Inferred(), block
    while True:
        try:
            table = parse_block(data, None)
            break
        except pa.ArrowInvalid as exc:
            change = _KIND_CHANGE.search(str(exc))
            if change is None:
                raise
            path, before, after, row = change.groups()
            text = decoded(block, line)
            try:
                at, names = object_at(text, int(row))
            except (ValueError, RecursionError):
                raise exc from None
            found = [n for n in names if path == f"/{n}" or path.startswith(f"/{n}/")]
            if not found or set(found) <= inferred.text.keys():
                raise
            for name in found:
                nested = "" if path == f"/{name}" else f" (at {excerpt(path, 60)})"
                inferred.text[name] = (
                    f"changes from {before} to {after} on line {line + at}{nested}"
                )
            data = without(block, line, inferred.text.keys())
    inferred.types = {f.name: f.type for f in table.schema}
    times = [name for name, dtype in inferred.types.items() if pa.types.is_timestamp(dtype)]
    if times:
        texts = parse_block(data, pa.schema([(name, pa.string()) for name in times]))
        for name in times:
            inferred.types[name] = time_type(texts.column(name))
            if inferred.types[name] == pa.string():
                inferred.why[name] = _MIXED_ZONES
    return inferred


def time_type(values: pa.ChunkedArray) -> pa.DataType:
    """Times' type as the CSV reader's: naive, UTC where every one has an offset, else text."""
    for dtype in _TIMES:
        try:
            pc.cast(values, dtype)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        return dtype
    return pa.string()


def merged(old: pa.DataType, new: pa.DataType) -> pa.DataType | None:
    """The type that holds values of both, or None where their kinds differ (JSON text)."""
    if old == new or pa.types.is_null(new):
        return old
    if pa.types.is_null(old):
        return new
    if _kind(old) != _kind(new):
        return None
    if _kind(old) == "number":
        return pa.float64()
    if _kind(old) == "string":
        return pa.string()
    try:
        if pa.types.is_list(old):
            item = merged(old.value_type, new.value_type)
            return None if item is None else pa.list_(old.value_field.with_type(item))
        fields = {f.name: f for f in new}
        both = [f for f in old] + [f for f in new if old.get_field_index(f.name) < 0]
        types = [merged(f.type, fields[f.name].type) if f.name in fields else f.type for f in both]
    except RecursionError:
        return None
    if any(dtype is None for dtype in types):
        return None
    return pa.struct([f.with_type(dtype) for f, dtype in zip(both, types, strict=True)])


def _kind(dtype: pa.DataType) -> str:
    """The JSON kind of values of `dtype`, as pyarrow names it in its errors."""
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        return "number"
    if pa.types.is_string(dtype) or pa.types.is_timestamp(dtype):
        return "string"
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_list(dtype):
        return "array"
    return "object" if pa.types.is_struct(dtype) else "null"


def misfit(block: bytes, line: int, name: str, dtype: pa.DataType) -> str:
    """Where the field `name` first holds a value `dtype` does not, for a note."""
    try:
        text = decoded(block, line)
        for start, members in objects(text):
            for key, _, at, end, value in members:
                if key == name and not _fits(value, dtype):
                    shown = text[at:end]
                    if len(shown) > 40 or not shown.isprintable():
                        shown = excerpt(shown, 40)
                    where = line + text.count("\n", 0, start)
                    kind, was = _value_kind(value), _kind(dtype)
                    if kind != was:
                        return f"changes from {was} to {kind} on line {where}"
                    return f"holds {shown} on line {where}"
    except (ValueError, RecursionError):
        pass
    return f"holds other values from line {line} on"


def _value_kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    return "string" if type(value) is str else "number"


def _fits(value: object, dtype: pa.DataType) -> bool:
    stack = [(value, dtype)]
    while stack:
        item, kind = stack.pop()
        if item is None:
            continue
        if _value_kind(item) != _kind(kind):
            return False
        if pa.types.is_integer(kind) and not (type(item) is int and -(2**63) <= item < 2**63):
            return False
        if pa.types.is_timestamp(kind):
            assert isinstance(item, str)
            if (_OFFSET.search(item) is not None) != (kind.tz is not None):
                return False
        if isinstance(item, list):
            stack.extend((v, kind.value_type) for v in item)
        elif isinstance(item, dict):
            names = {f.name: f.type for f in kind}
            if not item.keys() <= names.keys():
                return False
            stack.extend((v, names[k]) for k, v in item.items())
    return True
