"""A checked filter as calls of compute functions, and its two evaluations.

`_expr_check` turns a filter into one tree of `Call`s (compute function names over `Field`s
and scalars). That one tree is evaluated two ways, so they cannot drift apart:

- `expression` builds the `pyarrow.compute.Expression` that prunes Parquet row groups by their
  statistics (and that tests filter whole tables with);
- `Predicate.mask` calls the same kernels, with the same options, directly on a batch's arrays
  and returns the boolean mask that `RecordBatch.filter` drops null and false rows by.

Filtering a batch through an expression plans and runs an Acero exec plan per batch (a few
hundred microseconds each, several milliseconds for the first); the kernels alone cost what
the comparison costs. Implicit casts (an int32 column against an int64 literal, a float32
column against a float64 one, two timestamp units, a dictionary's values) are the kernels' own
dispatch in both cases.
"""

from __future__ import annotations

from typing import TypeAlias

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cards import excerpt
from cards.errors import TableUnreadable


class Field(msgspec.Struct, frozen=True):
    """A column of the batch, by name."""

    name: str


class Call(msgspec.Struct, frozen=True, eq=False):
    """`function(*args)` of `pyarrow.compute`, with its options."""

    function: str
    args: tuple[Argument, ...]
    options: pc.FunctionOptions | None = None


Argument: TypeAlias = "Call | Field | pa.Scalar"


def expression(argument: Argument) -> pc.Expression:
    """The compute expression of a call tree, as pyarrow's own operators would build it."""
    if isinstance(argument, Field):
        return pc.field(argument.name)
    if isinstance(argument, pa.Scalar):
        return pc.scalar(argument)
    args = [expression(arg) for arg in argument.args]
    function = getattr(pc, argument.function)  # given an expression, it builds a call of one
    options = {} if argument.options is None else {"options": argument.options}
    result: pc.Expression = function(*args, **options)
    return result


def evaluate(argument: Argument, batch: pa.RecordBatch) -> pa.Array | pa.Scalar:
    """The value of a call tree over one batch's arrays.

    Raises:
        TableUnreadable: the batch lacks a column the tree reads.
    """
    if isinstance(argument, Field):
        index = batch.schema.get_field_index(argument.name)
        if index < 0:
            raise TableUnreadable(f"a batch lacks the filter's column {excerpt(argument.name)}")
        return batch.column(index)
    if isinstance(argument, pa.Scalar):
        return argument
    args = [evaluate(arg, batch) for arg in argument.args]
    return pc.call_function(argument.function, args, argument.options)


class Predicate(msgspec.Struct, frozen=True, eq=False):
    """A checked filter: the expression that prunes, and the mask that filters a batch."""

    tree: Call | Field
    expression: pc.Expression

    @classmethod
    def of(cls, tree: Call | Field) -> Predicate:
        """The predicate of a checked call tree."""
        return cls(tree, expression(tree))

    def mask(self, batch: pa.RecordBatch) -> pa.Array:
        """Which rows of `batch` hold: true keeps a row, false and null drop it.

        Raises:
            TableUnreadable: the batch lacks a column, or the filter is not a boolean.
        """
        value = evaluate(self.tree, batch)
        if not isinstance(value, pa.Array) or not pa.types.is_boolean(value.type):
            raise TableUnreadable("the filter does not evaluate to a boolean column")
        return value

    def filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of `batch` where the filter holds, in order.

        Raises:
            TableUnreadable: as for `mask`.
        """
        return batch.filter(self.mask(batch))
