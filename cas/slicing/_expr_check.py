"""Check a parsed filter against a schema and convert it to a `pyarrow.compute.Expression`.

Literal types must fit the column: an int literal fits integer columns (in range) and float
columns; a float literal only float columns; strings only string columns; true and false only
boolean columns; `date` fits date and timestamp columns, `timestamp` only timestamp columns (a
naive timestamp is read as UTC against a column with a time zone).

Nulls follow SQL: a comparison with a null is unknown, and the row is dropped under `not` too.
Arrow's `is_in` answers false rather than unknown for a null, so `in` is rewritten by polarity:
where an even number of `not`s encloses it, unknown and false drop a row alike; under an odd
number, unknown and true do. That keeps plain `is_in` (which statistics can prune) where it counts.

The checked filter is one tree of compute calls (`_mask`): `compile_predicate` builds its
expression (row-group pruning) and its per-batch mask.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc

from cards import excerpt
from cards.errors import FilterTypeError, UnknownColumn
from cas.slicing._expr import And, Column, Compare, InList, IsNull, Literal, Node, Not, Or, Truth
from cas.slicing._mask import Argument, Call, Field, Predicate

_ACCEPTS = {
    "int": ("int",),
    "float": ("int", "float"),
    "string": ("string",),
    "bool": ("bool",),
    "date": ("date",),
    "timestamp": ("date", "timestamp"),
}
_COMPARABLE = {"int": "number", "float": "number"}
_FUNCTIONS = {
    "=": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}
_IS_NULL = pc.NullOptions(nan_is_null=False)  # what `Expression.is_null()` passes
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def compile_predicate(node: Node, schema: pa.Schema) -> Predicate:
    """Check a parsed filter against `schema`: its pruning expression and its batch mask.

    Raises:
        UnknownColumn: a name is not a column of `schema` (or names several).
        FilterTypeError: a literal or comparison does not fit its column's type.
    """
    return Predicate.of(_Converter(schema).convert(node, positive=True))


def column_kind(dtype: pa.DataType) -> str | None:
    """The filter kind of an Arrow type (dictionaries by their values), or None if unsupported."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    checks = (
        ("int", pa.types.is_integer),
        ("float", pa.types.is_floating),
        ("string", _is_string),
        ("bool", pa.types.is_boolean),
        ("date", pa.types.is_date),
        ("timestamp", pa.types.is_timestamp),
    )
    return next((kind for kind, check in checks if check(dtype)), None)


def _is_string(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_string_view(dtype)
    )


class _Converter:
    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema

    def convert(self, node: Node, *, positive: bool) -> Call | Field:
        if isinstance(node, And | Or):
            parts = [self.convert(part, positive=positive) for part in node.parts]
            function = "and_kleene" if isinstance(node, And) else "or_kleene"
            return reduce(lambda a, b: Call(function, (a, b)), parts)
        if isinstance(node, Not):
            return _invert(self.convert(node.operand, positive=not positive))
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, InList):
            return self.membership(node, positive=positive)
        if isinstance(node, IsNull):
            self.dtype(node.column)
            field = Field(node.column.name)
            return Call("is_valid", (field,)) if node.negated else _is_null(field)
        return self.truth(node)

    def dtype(self, column: Column) -> pa.DataType:
        index = self._schema.get_field_index(column.name)
        if index < 0:
            raise UnknownColumn(column.name, self._schema.names, position=column.pos)
        dtype = self._schema.field(index).type
        return dtype.value_type if pa.types.is_dictionary(dtype) else dtype

    def kind(self, column: Column) -> tuple[pa.DataType, str]:
        dtype = self.dtype(column)
        kind = column_kind(dtype)
        if kind is None:
            raise FilterTypeError(
                f"column {excerpt(column.name)} of type {dtype} cannot be compared",
                position=column.pos,
            )
        return dtype, kind

    def compare(self, node: Compare) -> Call:
        left, right, op = node.left, node.right, node.op
        if isinstance(left, Literal):
            if isinstance(right, Literal):
                raise FilterTypeError("a comparison needs a column", position=node.pos)
            left, right, op = right, left, _FLIPPED[op]
        dtype, kind = self.kind(left)
        if kind == "bool" and op not in ("=", "!="):
            raise FilterTypeError("booleans compare only with = and !=", position=node.pos)
        if isinstance(right, Column):
            other = self.kind(right)[1]
            if _COMPARABLE.get(kind, kind) != _COMPARABLE.get(other, other):
                raise FilterTypeError(f"cannot compare {kind} with {other}", position=node.pos)
            value: Argument = Field(right.name)
        else:
            value = _scalar(right, dtype, kind)
        return Call(_FUNCTIONS[op], (Field(left.name), value))

    def membership(self, node: InList, *, positive: bool) -> Call:
        dtype, kind = self.kind(node.column)
        scalars = [_scalar(item, dtype, kind) for item in node.items]
        values = pa.array([s.as_py() for s in scalars], type=scalars[0].type)
        field = Field(node.column.name)
        found = Call("is_in", (field,), pc.SetLookupOptions(value_set=values))
        # Where unknown drops a row like false does, a null may answer false; elsewhere true.
        if node.negated and positive:
            return Call("and_kleene", (_invert(found), Call("is_valid", (field,))))
        if node.negated:
            return _invert(found)
        return found if positive else Call("or_kleene", (found, _is_null(field)))

    def truth(self, node: Truth) -> Field:
        dtype, kind = self.kind(node.column)
        if kind != "bool":
            raise FilterTypeError(
                f"column {excerpt(node.column.name)} of type {dtype} is not a condition; "
                "compare it with a value",
                position=node.column.pos,
            )
        return Field(node.column.name)


def _invert(operand: Call | Field) -> Call:
    return Call("invert", (operand,))


def _is_null(field: Field) -> Call:
    return Call("is_null", (field,), _IS_NULL)


def _scalar(literal: Literal, dtype: pa.DataType, kind: str) -> pa.Scalar:
    if literal.kind not in _ACCEPTS[kind]:
        what = f"{_article(literal.kind)} {literal.kind} literal"
        raise FilterTypeError(f"{what} does not fit a column of type {dtype}", position=literal.pos)
    value = literal.value
    if kind == "int":
        _check_range(value, dtype, literal.pos)
    try:
        if kind == "float":
            return pa.scalar(value, pa.float64())
        if kind == "timestamp":
            return _timestamp(literal, dtype)
        return pa.scalar(value, dtype)
    except FilterTypeError:
        raise
    except (pa.ArrowInvalid, OverflowError, ValueError) as exc:
        raise FilterTypeError(
            f"the literal is out of range for type {dtype}", position=literal.pos
        ) from exc


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _check_range(value: object, dtype: pa.DataType, pos: int) -> None:
    assert isinstance(value, int)
    bits = dtype.bit_width
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if pa.types.is_unsigned_integer(dtype):
        low, high = 0, 2**bits - 1
    if not low <= value <= high:
        raise FilterTypeError(f"{value} is out of range for type {dtype}", position=pos)


def _timestamp(literal: Literal, dtype: pa.DataType) -> pa.Scalar:
    value = literal.value
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    assert isinstance(value, datetime)
    if dtype.tz is None and value.tzinfo is not None:
        raise FilterTypeError(
            f"a timestamp with a time zone does not fit a column of type {dtype}",
            position=literal.pos,
        )
    if dtype.tz is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    unit = "ns" if dtype.unit == "ns" else "us"
    return pa.scalar(value, pa.timestamp(unit, dtype.tz))
