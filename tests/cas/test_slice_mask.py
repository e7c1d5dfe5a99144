"""The mask a checked filter computes on a batch keeps exactly the rows its Acero expression keeps.

Random tables of every filterable type (with nulls, NaNs, dictionaries, two string layouts,
dates and timestamps with and without a zone) meet random filters drawn from the grammar:
comparisons with literals on either side, column-against-column comparisons, `in` lists, null
checks, bare booleans, and `not`/`and`/`or` nested. Where Acero refuses a filter, the mask
refuses it too.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
import math

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from filter_helpers import compile_filter
from hypothesis import given, settings
from hypothesis import strategies as st

from cards.errors import TableUnreadable
from cas.slicing._answer import Answer, Bounds
from cas.slicing._collect import IpcSink, collect, read_stream
from cas.slicing._expr import filter_columns, parse_filter
from cas.slicing._expr_check import compile_predicate
from cas.slicing._formats import open_table
from cas.slicing._isolated import run_bounded
from cas.slicing._limits import DEFAULT_SLICE_LIMITS
from cas.slicing._mask import Predicate
from cas.slicing._media import ARROW_FILE, PARQUET
from cas.slicing._reader import VerifiedReader, load_manifest, verified_object
from cas.slicing._slice import SliceRequest, read_slice
from cas.slicing._tables import Scan, filtered, prepare_child

UTC = dt.UTC
DAY = dt.date(2026, 1, 1)
MOMENT = dt.datetime(2026, 1, 1, 12, 0)

SCHEMA = pa.schema(
    [
        ("i8", pa.int8()),
        ("i64", pa.int64()),
        ("u32", pa.uint32()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("s", pa.string()),
        ("ls", pa.large_string()),
        ("cat", pa.dictionary(pa.int32(), pa.string())),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("ms", tz="UTC")),
    ]
)
KINDS = {
    "i8": "int",
    "i64": "int",
    "u32": "uint",
    "f32": "float",
    "f64": "float",
    "s": "string",
    "ls": "string",
    "cat": "string",
    "b": "bool",
    "d": "date",
    "ts": "timestamp",
    "tz": "timestamp",
}
COMPARABLE = {"int": "number", "uint": "number", "float": "number"}
WORDS = ["", "a", "b", "ab", "it's", "é", "Z"]
DAYS = [DAY + dt.timedelta(days=n) for n in (-1, 0, 1, 40)]
MOMENTS = [MOMENT + dt.timedelta(seconds=n) for n in (-86_400, -1, 0, 1, 3_600)]
FLOATS = [-1.5, -0.0, 0.0, 0.5, 2.0, 3.25, math.nan, math.inf]


def nullable(values: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(st.none(), values)


VALUES: dict[str, st.SearchStrategy[object]] = {
    "int": nullable(st.integers(-3, 3)),
    "uint": nullable(st.integers(0, 4)),
    "float": nullable(st.sampled_from(FLOATS)),
    "string": nullable(st.sampled_from(WORDS)),
    "bool": nullable(st.booleans()),
    "date": nullable(st.sampled_from(DAYS)),
    "timestamp": nullable(st.sampled_from(MOMENTS)),
}


def render_timestamp(value: dt.datetime, zoned: bool) -> str:
    text = value.isoformat(sep=" ")
    return f"timestamp '{text}Z'" if zoned else f"timestamp '{text}'"


@st.composite
def literals(draw: st.DrawFn, column: str) -> str:
    """A literal that types against `column` (a date fits a timestamp, an int fits a float)."""
    kind = KINDS[column]
    if kind in ("int", "uint"):
        return str(draw(st.integers(-3 if kind == "int" else 0, 4)))
    if kind == "float":
        number = draw(st.one_of(st.integers(-2, 3), st.sampled_from([-1.5, 0.0, 0.5, 2.0, 3.25])))
        return repr(number) if isinstance(number, float) else str(number)
    if kind == "string":
        return "'" + draw(st.sampled_from(WORDS)).replace("'", "''") + "'"
    if kind == "bool":
        return draw(st.sampled_from(["true", "false"]))
    if kind == "date" or draw(st.booleans()):
        return f"date '{draw(st.sampled_from(DAYS)).isoformat()}'"
    return render_timestamp(draw(st.sampled_from(MOMENTS)), zoned=column == "tz")


@st.composite
def comparisons(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(sorted(KINDS)))
    kind = KINDS[column]
    op = draw(
        st.sampled_from(["=", "!=", "<>"] if kind == "bool" else ["=", "!=", "<", "<=", ">", ">="])
    )
    if draw(st.integers(0, 3)) == 0:  # against another column of a comparable kind
        same = COMPARABLE.get(kind, kind)
        others = [c for c, k in KINDS.items() if COMPARABLE.get(k, k) == same]
        return f"{column} {op} {draw(st.sampled_from(others))}"
    literal = draw(literals(column))
    if draw(st.booleans()):
        flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        return f"{literal} {flipped} {column}"
    return f"{column} {op} {literal}"


@st.composite
def memberships(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(sorted(c for c, k in KINDS.items() if k != "bool")))
    items = draw(st.lists(literals(column), min_size=1, max_size=4))
    negated = draw(st.booleans())
    return f"{column} {'not in' if negated else 'in'} ({', '.join(items)})"


@st.composite
def null_checks(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(sorted(KINDS)))
    return f"{column} is {'not ' if draw(st.booleans()) else ''}null"


def combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def join(word: str) -> st.SearchStrategy[str]:
        parts = st.lists(children, min_size=2, max_size=3)
        return parts.map(lambda texts: f" {word} ".join(f"({text})" for text in texts))

    return children.map(lambda text: f"not ({text})") | join("and") | join("or")


filters = st.recursive(
    comparisons() | memberships() | null_checks() | st.just("b"),
    combine,
    max_leaves=8,
)


@st.composite
def batches(draw: st.DrawFn) -> pa.RecordBatch:
    rows = draw(st.integers(0, 12))
    columns = {}
    for field in SCHEMA:
        values = draw(st.lists(VALUES[KINDS[field.name]], min_size=rows, max_size=rows))
        if pa.types.is_dictionary(field.type):
            columns[field.name] = pa.array(values, pa.string()).dictionary_encode()
        else:
            columns[field.name] = pa.array(values, field.type)
    columns["row"] = pa.array(range(rows), pa.int64())
    return pa.record_batch(columns, schema=SCHEMA.append(pa.field("row", pa.int64())))


def acero_rows(batch: pa.RecordBatch, text: str) -> pa.RecordBatch | None:
    """What the Acero expression keeps, or None where Acero refuses the filter."""
    try:
        return batch.filter(compile_filter(parse_filter(text), batch.schema))
    except (pa.ArrowException, TypeError):
        return None


@settings(max_examples=400)
@given(batch=batches(), text=filters)
def test_the_mask_keeps_exactly_what_the_acero_expression_keeps(batch, text):
    predicate = compile_predicate(parse_filter(text), batch.schema)
    expected = acero_rows(batch, text)
    if expected is None:
        with pytest.raises((pa.ArrowException, TypeError, TableUnreadable)):
            predicate.filter(batch)
        return
    kept = predicate.filter(batch)
    assert kept.schema == expected.schema
    assert kept.column("row").to_pylist() == expected.column("row").to_pylist()  # NaN != NaN


@settings(max_examples=100)
@given(batch=batches(), text=filters)
def test_the_pruning_expression_is_the_one_compile_filter_builds(batch, text):
    node = parse_filter(text)
    assert compile_predicate(node, batch.schema).expression.equals(
        compile_filter(node, batch.schema)
    )


# -- edges ------------------------------------------------------------------------------------


def test_nulls_follow_three_valued_logic_under_not():
    batch = pa.record_batch({"i": pa.array([1, None, 3], pa.int64())})
    for text, rows in [
        ("i > 1", [3]),
        ("not (i > 1)", [1]),
        ("i in (1, 2)", [1]),
        ("not (i in (1, 2))", [3]),
        ("i not in (1, 2)", [3]),
        ("not (i not in (1))", [1]),
        ("i is null or i = 3", [None, 3]),
    ]:
        kept = compile_predicate(parse_filter(text), batch.schema).filter(batch)
        assert kept.column("i").to_pylist() == rows, text


def test_a_dictionary_column_compares_by_its_values():
    batch = pa.record_batch({"c": pa.array(["x", None, "y", "x"]).dictionary_encode()})
    predicate = compile_predicate(parse_filter("c = 'x' or c in ('y')"), batch.schema)
    assert predicate.mask(batch).to_pylist() == [True, None, True, True]


def test_a_batch_lacking_the_filter_column_is_unreadable_not_a_crash():
    predicate = compile_predicate(parse_filter("i > 1"), pa.schema([("i", pa.int64())]))
    with pytest.raises(TableUnreadable, match="lacks the filter's column"):
        predicate.mask(pa.record_batch({"j": pa.array([1], pa.int64())}))


def test_a_filter_that_is_no_boolean_column_is_unreadable():
    odd = Predicate.of(
        compile_predicate(parse_filter("i > 1"), pa.schema([("i", pa.int64())])).tree.args[0]
    )
    with pytest.raises(TableUnreadable, match="boolean"):
        odd.mask(pa.record_batch({"i": pa.array([1], pa.int64())}))


def test_filtered_batches_use_the_predicate_and_project():
    schema = pa.schema([("k", pa.int64()), ("a", pa.float64())])
    node = parse_filter("k >= 2 and a < 0.5")
    predicate = compile_predicate(node, schema)
    scan = Scan(["a"], predicate.expression, frozenset({"k", "a"}), 0, 10, predicate)
    batch = pa.record_batch({"k": [1, 2, 3, 4], "a": [0.1, 0.2, 0.9, None]}, schema=schema)
    kept = list(filtered(iter([batch, batch.slice(1, 1)]), scan))
    assert [b.to_pylist() for b in kept] == [[{"a": 0.2}], [{"a": 0.2}]]


# -- end to end: a real recorded file, read in the bounded child, filtered by the mask ---------

END_TO_END = pa.table(
    {
        "k": pa.array(range(3_000), pa.int64()),
        "x": pa.array([None if i % 7 == 3 else i / 4 for i in range(3_000)], pa.float32()),
        "c": pa.array([f"v{i % 11}" for i in range(3_000)]).dictionary_encode(),
        "t": pa.array(
            [MOMENT + dt.timedelta(minutes=i) for i in range(3_000)], pa.timestamp("ms", "UTC")
        ),
    }
)


def _slice_with_predicate(
    reader: VerifiedReader, media_type: str, where: str, columns: tuple[str, ...]
) -> Answer:
    """In the child: what `_slice` runs, with the scan filtering by the predicate's mask."""
    prepare_child()
    table_file = open_table(media_type, reader, DEFAULT_SLICE_LIMITS.table_bounds)
    node = parse_filter(where)
    predicate = compile_predicate(node, table_file.schema)
    needed = frozenset(columns) | filter_columns(node)
    scan = Scan(list(columns), predicate.expression, needed, 0, 10_000, predicate)
    sink = IpcSink()
    collect(table_file, scan, 0, 10_000, 1 << 26, sink).finish()
    return Answer({}, sink.getvalue())


def _recorded(ws, store, data: bytes, media_type: str):
    ws.export("table", data)
    recorded = ws.record(store, "table", media_type=media_type)
    return store.locate(recorded.card.experiment_id).source


@pytest.mark.parametrize("media_type", [PARQUET, ARROW_FILE])
@pytest.mark.parametrize(
    "where",
    [
        "k >= 1200 and k < 1230",
        "x > 100 or c in ('v3', 'v4')",
        "not (x < 500) and t >= timestamp '2026-01-02 20:00:00Z'",
        "c = 'v1' and x is null",
    ],
)
def test_a_slice_filtered_by_the_mask_equals_the_acero_slice(ws, media_type, where):
    sink = io.BytesIO()
    if media_type == PARQUET:
        pq.write_table(END_TO_END, sink, row_group_size=500)
    else:
        with ipc.new_file(sink, END_TO_END.schema) as writer:
            for batch in END_TO_END.to_batches(max_chunksize=700):
                writer.write_batch(batch)
    store = ws.store()
    source = _recorded(ws, store, sink.getvalue(), media_type)
    columns = ("k", "c")
    manifest = load_manifest(source)
    with verified_object(source, manifest, max_read_bytes=1 << 24) as reader:
        work = functools.partial(_slice_with_predicate, reader, media_type, where, columns)
        answer = run_bounded(
            work, reader, Bounds(seconds=60, memory_bytes=1 << 30, answer_bytes=1 << 26)
        )
    ours = read_stream(answer.payload)
    acero = read_slice(source, SliceRequest(columns=columns, where=where)).table
    expected = END_TO_END.filter(compile_filter(parse_filter(where), END_TO_END.schema))
    assert ours.column("k").to_pylist() == acero.column("k").to_pylist()
    assert ours.column("k").to_pylist() == expected.column("k").to_pylist()
    assert ours.num_rows > 0
