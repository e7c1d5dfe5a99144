"""A filter's pruning expression alone, for tests that filter a table the way pyarrow would."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cas.slicing._expr import Node
from cas.slicing._expr_check import compile_predicate


def compile_filter(node: Node, schema: pa.Schema) -> pc.Expression:
    """`node` checked against `schema`, as one compute expression (what the slicer prunes with)."""
    return compile_predicate(node, schema).expression
