"""Slicing CSV, TSV and JSON Lines results (issue 10 item 13): same language, bounds and proofs.

Real files recorded into a real store; slices compared with a full read by pyarrow; hostile
text (a 100 MB line, a quote never closed, ragged rows, invalid UTF-8, a type that changes
after the first block) fails with a typed error inside the bounded child.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os

import msgspec
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pytest
from filter_helpers import compile_filter
from hypothesis import given
from hypothesis import strategies as st

from cards.errors import (
    FilterTypeError,
    IntegrityError,
    TableTooLarge,
    TableUnreadable,
    UnknownColumn,
    UnsupportedMediaType,
)
from cas import Located
from cas.slicing._expr import parse_filter
from cas.slicing._limits import DEFAULT_SLICE_LIMITS, SliceLimits
from cas.slicing._media import CSV, JSONL, NDJSON, TSV
from cas.slicing._slice import BYTE_BUDGET, ROW_LIMIT, SliceRequest, describe, read_slice
from cas.slicing._text_tables import READ_AHEAD_BLOCKS, block_bytes
from fsedge import CHUNK_BYTES

MIB = 1 << 20
TEXT_TYPES = [CSV, JSONL]
BLOCK = block_bytes(DEFAULT_SLICE_LIMITS.table_bounds)
SMALL = SliceLimits().lowered(max_memory_bytes=16 * MIB)  # blocks of 4 MiB / 4 / 33 bytes


def csv_bytes(rows: list[dict[str, object]], delimiter: str = ",") -> bytes:
    names = list(rows[0])
    lines = [delimiter.join(names)]
    lines += [delimiter.join("" if r[n] is None else str(r[n]) for n in names) for r in rows]
    return ("\n".join(lines) + "\n").encode()


def jsonl_bytes(rows: list[dict[str, object]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def text_bytes(rows: list[dict[str, object]], media_type: str) -> bytes:
    if media_type == CSV:
        return csv_bytes(rows)
    if media_type == TSV:
        return csv_bytes(rows, "\t")
    return jsonl_bytes(rows)


def full_read(data: bytes, media_type: str) -> pa.Table:
    if media_type in (JSONL, NDJSON):
        return pajson.read_json(io.BytesIO(data))
    delimiter = "\t" if media_type == TSV else ","
    options = pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
    nulls = pacsv.ConvertOptions(strings_can_be_null=True)  # a blank cell is null, as in pandas
    return pacsv.read_csv(io.BytesIO(data), parse_options=options, convert_options=nulls)


def rows_of(count: int) -> list[dict[str, object]]:
    return [{"k": i, "s": f"v{i % 11}", "x": i / 4} for i in range(count)]


def record(ws, store, data: bytes, media_type: str) -> Located:
    name = "t-" + hashlib.sha256(data).hexdigest()[:16]
    ws.export(name, data)
    card = ws.record(store, name, media_type=media_type, columns=["k"]).card
    return store.locate(card.experiment_id)


def sliced(located: Located, limits: SliceLimits | None = None, **request):
    return read_slice(located.source, SliceRequest(**request), limits=limits)


@pytest.fixture
def store(ws):
    return ws.store()


@pytest.fixture(params=[CSV, TSV, JSONL, NDJSON])
def media_type(request):
    return request.param


# -- behaviour --------------------------------------------------------------------------------


def test_a_text_slice_projects_filters_and_keeps_file_order(ws, store, media_type):
    located = record(ws, store, text_bytes(rows_of(1000), media_type), media_type)
    result = sliced(located, columns=("s", "k"), where="k >= 250 and s in ('v1', 'v2')")
    assert result.columns == ["s", "k"]
    assert result.table.column("k").to_pylist() == [k for k in range(250, 1000) if k % 11 in (1, 2)]
    assert not result.truncated and result.chunks_verified >= 1


def test_offset_limit_and_byte_budget_bound_a_text_slice(ws, store, media_type):
    located = record(ws, store, text_bytes(rows_of(2000), media_type), media_type)
    page = sliced(located, columns=("k",), limit=42, offset=7)
    assert page.table.column("k").to_pylist() == list(range(7, 49))
    assert page.truncated_reason == ROW_LIMIT
    small = sliced(located, columns=("k", "s"), max_bytes=5000)
    assert small.truncated_reason == BYTE_BUDGET and 0 < small.rows < 2000 and small.bytes <= 5000
    counted = sliced(located, columns=(), where="k < 100")
    assert counted.rows == 100 and counted.columns == []


def test_describe_reports_inferred_columns_without_a_row_count(ws, store, media_type):
    located = record(ws, store, text_bytes(rows_of(10), media_type), media_type)
    info = describe(located.source)
    assert [(f.name, f.type) for f in info.fields] == [
        ("k", "int64"),
        ("s", "string"),
        ("x", "double"),
    ]
    assert info.num_rows is None and info.media_type == media_type
    assert "the whole file" in info.notes[0]  # not "the first 2097152 bytes" of 70 bytes


def test_filters_are_typed_against_the_inferred_schema(ws, store):
    located = record(ws, store, csv_bytes(rows_of(10)), CSV)
    with pytest.raises(FilterTypeError):
        sliced(located, where="s > 3")
    with pytest.raises(UnknownColumn):
        sliced(located, columns=("nope",))


def test_a_column_empty_in_the_first_block_is_text(ws, store):
    data = b"k,note\n" + b"1,\n" * (BLOCK // 3) + b"2,late\n"
    located = record(ws, store, data, CSV)
    assert [f.type for f in describe(located.source).fields] == ["int64", "string"]
    result = sliced(located, where="note != ''")  # an empty text cell is '', as pyarrow reads it
    assert result.table.to_pylist() == [{"k": 2, "note": "late"}]


def test_a_quoted_value_may_hold_newlines_and_delimiters(ws, store):
    located = record(ws, store, b'k,text\n1,"a,\nb"\n2,c\n', CSV)
    assert sliced(located).table.to_pylist() == [{"k": 1, "text": "a,\nb"}, {"k": 2, "text": "c"}]


def test_json_lines_tolerate_blank_lines_crlf_and_a_missing_last_newline(ws, store):
    data = b'{"k": 1, "s": "a"}\r\n\n{"k": 2}\n{"k": 3, "s": "c", "extra": true}'
    located = record(ws, store, data, JSONL)
    assert sliced(located).table.to_pylist() == [  # the first block names every field here
        {"k": 1, "s": "a", "extra": None},
        {"k": 2, "s": None, "extra": None},
        {"k": 3, "s": "c", "extra": True},
    ]


# -- streaming: a small slice reads a small part --------------------------------------------


def test_a_small_slice_of_a_large_text_file_reads_only_its_first_chunks(ws, store, media_type):
    rows = rows_of(800_000)  # about 15 MB of CSV, 30 MB of JSON Lines: several chunks
    data = text_bytes(rows, media_type)
    assert len(data) > 3 * CHUNK_BYTES
    located = record(ws, store, data, media_type)
    result = sliced(located, SMALL, columns=("k",), limit=10)
    assert result.table.column("k").to_pylist() == list(range(10))
    # CSV's read-ahead is at most READ_AHEAD_BLOCKS blocks: 4.2 MB here, within two chunks.
    assert READ_AHEAD_BLOCKS * block_bytes(SMALL.table_bounds) < CHUNK_BYTES
    assert result.bytes_read <= 2 * CHUNK_BYTES < len(data)


# -- slices agree with a full read ------------------------------------------------------------

WHERE = st.sampled_from(
    [None, "k >= {a}", "k < {a} or k > {b}", "s = 'v{c}'", "x is null", "not (k in ({c}, 3))"]
)


@st.composite
def text_cases(draw):
    count = draw(st.integers(1, 80))
    rows = [
        {
            "k": i,
            "s": f"v{draw(st.integers(0, 5))}",
            "x": draw(st.one_of(st.none(), st.integers(-5, 5))),
        }
        for i in range(count)
    ]
    rows[0]["x"] = 1  # a first block that types x as a number, for CSV and JSON alike
    where = draw(WHERE)
    if where is not None:
        where = where.format(a=draw(st.integers(0, 80)), b=draw(st.integers(0, 80)), c=2)
    columns = draw(st.one_of(st.none(), st.permutations(["k", "s", "x"]).map(tuple)))
    offset = draw(st.integers(0, 90))
    limit = draw(st.integers(0, 90))
    return rows, SliceRequest(columns=columns, where=where, limit=limit, offset=offset)


@given(case=text_cases(), media_type=st.sampled_from(TEXT_TYPES))
def test_text_slices_equal_a_full_read(ws, store, case, media_type):
    rows, request = case
    data = text_bytes(rows, media_type)
    located = record(ws, store, data, media_type)
    table = full_read(data, media_type)
    if request.where is not None:
        table = table.filter(compile_filter(parse_filter(request.where), table.schema))
    table = table.slice(request.offset, request.limit)
    if request.columns is not None:
        table = table.select(list(request.columns))
    result = read_slice(located.source, request)
    assert result.table.to_pylist() == table.to_pylist()


notes = st.text(alphabet=st.sampled_from('ab ,"\n\r'), max_size=6)


@given(values=st.lists(notes, min_size=1, max_size=40), where=st.sampled_from([None, "k > 3"]))
def test_quoted_csv_values_slice_as_a_full_read_parses_them(ws, store, values, where):
    sink = io.StringIO()
    writer = csv.writer(sink)  # quotes a value holding a delimiter, a quote, \r or \n
    writer.writerow(["k", "note"])
    writer.writerows([i, value] for i, value in enumerate(values))
    data = sink.getvalue().encode()
    located = record(ws, store, data, CSV)
    expected = full_read(data, CSV)
    if pa.types.is_null(expected.schema.field("note").type):  # read as text here: all null
        expected = expected.set_column(1, "note", pa.array([None] * expected.num_rows, pa.string()))
    if where is not None:
        expected = expected.filter(compile_filter(parse_filter(where), expected.schema))
    assert read_slice(located.source, SliceRequest(where=where)).table.to_pylist() == (
        expected.to_pylist()
    )


# -- hostile text -----------------------------------------------------------------------------


def test_a_header_wider_than_the_bound_is_refused_before_parsing(ws, store):
    header = b",".join(b"c%d" % i for i in range(DEFAULT_SLICE_LIMITS.max_columns + 1))
    located = record(ws, store, header + b"\n" + b"1" * 1 + b"\n", CSV)
    with pytest.raises(TableTooLarge, match="columns"):
        sliced(located)


@pytest.mark.parametrize("media_type", TEXT_TYPES)
def test_a_100_mb_line_is_too_large_in_bounded_memory(ws, store, media_type):
    line = b"x" * (100 * MIB)
    data = b"k,s\n1," + line + b"\n" if media_type == CSV else b'{"s": "' + line + b'"}\n'
    located = record(ws, store, data, media_type)
    with pytest.raises(TableTooLarge) as caught:
        sliced(located)
    assert caught.value.limit == BLOCK
    assert located.source.size > 10 * BLOCK  # what was refused was never held


def test_a_quote_never_closed_is_too_large_not_swallowed(ws, store):
    data = b'k,s\n1,"open\n' + b"2,b\n" * (2 * MIB)
    located = record(ws, store, data, CSV)
    with pytest.raises(TableTooLarge, match="quote is never closed"):
        sliced(located, where="k > 1")


@pytest.mark.parametrize(
    ("media_type", "data", "words"),
    [
        (CSV, b"k,s\n1,a\n2,b,extra\n", "Expected 2 columns"),
        (CSV, b"k,s\n1,\xff\xfe\n", "not UTF-8"),
        (CSV, b"k\xff,s\n1,a\n", "header row is not UTF-8"),
        (CSV, b"", "no header row"),
        (JSONL, b'{"k": 1, "s": "\xff"}\n', "UTF8"),
        (JSONL, b'{"k": 1, "s": "never closed}\n', "JSON parse error"),
        (JSONL, b"[1, 2]\n", "JSON parse error"),
        (JSONL, b"\n\n", "no object"),
    ],
    ids=["ragged", "binary", "header", "empty", "utf8", "unclosed", "array", "blank"],
)
def test_malformed_text_is_unreadable(ws, store, media_type, data, words):
    located = record(ws, store, data, media_type)
    with pytest.raises(TableUnreadable, match=words):
        sliced(located)


def test_a_later_json_value_that_breaks_the_inferred_type_widens_its_field(ws, store):
    rows = [{"k": i, "s": "a"} for i in range(BLOCK // 4)] + [{"k": "oops", "s": "b"}]
    located = record(ws, store, text_bytes(rows, JSONL), JSONL)
    result = sliced(located, where="s = 'b'")
    assert result.table.to_pylist() == [{"k": "oops", "s": "b"}]
    assert result.notes == (
        f"field 'k' changes from number to string on line {len(rows)}: read as its JSON text",
    )


def test_a_later_csv_value_that_breaks_the_inferred_type_widens_its_column(ws, store):
    rows = [{"k": i, "s": "a"} for i in range(BLOCK // 4)] + [{"k": "oops", "s": "b"}]
    located = record(ws, store, text_bytes(rows, CSV), CSV)
    result = sliced(located, where="s = 'b'")
    assert result.table.to_pylist() == [{"k": "oops", "s": "b"}]
    row = len(rows) + 1
    assert result.notes == (
        f"column 'k' holds 'oops' in row {row} (the header is row 1): read as string, not int64",
    )


def test_invalid_utf8_after_the_first_block_is_unreadable(ws, store):
    data = b"k,s\n" + b"1,a\n" * (BLOCK // 4) + b"2,\xff\n"
    located = record(ws, store, data, CSV)
    with pytest.raises(TableUnreadable, match="UTF8"):
        sliced(located, where="k = 2")


@pytest.mark.parametrize("media_type", TEXT_TYPES)
def test_a_lowered_memory_bound_lowers_the_block(ws, store, media_type):
    line = b"x" * MIB
    data = b"s\n" + line + b"\n" if media_type == CSV else b'{"s": "' + line + b'"}\n'
    located = record(ws, store, data, media_type)
    assert sliced(located).rows == 1  # within the default block of about 2 MB
    with pytest.raises(TableTooLarge) as caught:
        sliced(located, limits=SMALL)
    assert caught.value.limit == block_bytes(SMALL.table_bounds) < MIB


def test_a_flipped_byte_in_a_text_chunk_fails_the_slice(ws, store):
    located = record(ws, store, csv_bytes(rows_of(100)), CSV)
    path = located.source.path
    os.chmod(path, 0o600)
    with open(path, "r+b") as handle:
        handle.seek(20)
        byte = handle.read(1)
        handle.seek(20)
        handle.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(IntegrityError):
        sliced(located)


def test_a_json_document_is_not_sliced_as_json_lines(ws, store):
    located = record(ws, store, b'[{"k": 1}]', "application/json")
    with pytest.raises(UnsupportedMediaType):
        sliced(located)
    claimed = msgspec.structs.replace(located.source, media_type=JSONL)
    with pytest.raises(TableUnreadable):
        read_slice(claimed, SliceRequest())
