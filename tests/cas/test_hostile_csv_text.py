"""Awkward text tables a scientist or a compromised kernel may write (CSV, TSV, JSON Lines).

Each case is a real file recorded into a real store and sliced in the bounded child: it must
give the rows a careful reader expects, or a typed error that says what is wrong and what to
do, never garbage columns nor silently rounded values.
"""

from __future__ import annotations

import csv
import gzip
import io

import pyarrow.csv as pacsv
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cards.errors import InvalidInput, TableUnreadable, UnknownColumn
from cas import Located
from cas.slicing._export import export_slice
from cas.slicing._limits import DEFAULT_SLICE_LIMITS
from cas.slicing._media import CSV, JSONL, TSV
from cas.slicing._slice import SliceRequest, describe, read_slice
from cas.slicing._text_tables import WHOLE_FILE_BYTES, block_bytes

BLOCK = block_bytes(DEFAULT_SLICE_LIMITS.table_bounds)


def record(ws, store, data: bytes, media_type: str = CSV) -> Located:
    card = ws.record_data(store, data, media_type).card
    return store.locate(card.experiment_id)


def sliced(located: Located, **request):
    return read_slice(located.source, SliceRequest(**request))


@pytest.fixture
def store(ws):
    return ws.store()


# -- line endings -----------------------------------------------------------------------------


@pytest.mark.parametrize("media_type", [CSV, TSV])
def test_a_csv_with_carriage_returns_only_is_read_past_its_first_block(ws, store, media_type):
    sep = b"," if media_type == CSV else b"\t"
    rows = 2 * BLOCK // 8
    data = sep.join([b"k", b"s", b"t"]) + b"\r"
    data += b"".join(sep.join([b"%d" % i, b"a", b"b"]) + b"\r" for i in range(rows))
    assert len(data) > 2 * BLOCK
    located = record(ws, store, data, media_type)
    result = sliced(located, columns=("k", "s"), where=f"k >= {rows - 2}")
    assert result.table.to_pylist() == [{"k": rows - 2, "s": "a"}, {"k": rows - 1, "s": "a"}]


def test_a_small_csv_with_carriage_returns_only_is_not_counted_as_one_wide_header(ws, store):
    data = b"k,s,t\r" + b"1,a,b\r" * DEFAULT_SLICE_LIMITS.max_columns  # > max_columns commas
    located = record(ws, store, data)
    result = sliced(located, where="k = 1", limit=2)
    assert result.table.to_pylist() == [{"k": 1, "s": "a", "t": "b"}] * 2


# -- encodings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ("k,s\n1,a\n".encode("utf-16-le"), "UTF-16"),
        ("k,s\n1,a\n".encode("utf-16-be"), "UTF-16"),
        ("k,s\n1,a\n".encode("utf-16"), "UTF-16"),
        (b"k,s\x00t\n1,a\n", "NUL"),
        (gzip.compress(b"k,s\n1,a\n"), "gzip"),
    ],
    ids=["utf16le", "utf16be", "utf16bom", "nul", "gzip"],
)
def test_text_that_is_not_utf8_is_refused_saying_what_it_looks_like(ws, store, data, words):
    located = record(ws, store, data)
    with pytest.raises(TableUnreadable, match=words):
        sliced(located)


# -- integers beyond int64 --------------------------------------------------------------------

INT64 = 2**63


def test_integers_beyond_int64_in_the_first_block_are_kept_exact_as_text(ws, store):
    ids = [12345678901234567890123, 2**64 - 1, INT64, -INT64 - 1, 7]
    data = b"k,id\n" + b"".join(b"%d,%d\n" % (k, v) for k, v in enumerate(ids))
    result = sliced(record(ws, store, data))
    assert result.table.column("id").to_pylist() == [str(v) for v in ids]
    assert result.notes and "'id'" in result.notes[0] and "string" in result.notes[0]


def test_signed_integers_pyarrow_reads_as_double_stay_double(ws, store):
    data = b"t,x\n1733000000000000000,+5\n1733000000000000001,-3\n"  # pyarrow: +5 is a double
    result = sliced(record(ws, store, data))
    assert result.table.to_pylist() == [
        {"t": 1733000000000000000, "x": 5.0},
        {"t": 1733000000000000001, "x": -3.0},
    ]
    assert result.notes == ()


def test_a_large_csv_with_long_integers_in_its_first_blocks_still_reads(ws, store):
    row = b"1,1.5,12345678901234567890123,abc\n"
    data = b"k,x,id,s\n" + row * (3 * BLOCK // len(row))  # the two-block head cuts a row
    result = sliced(record(ws, store, data), limit=2)
    assert result.table.column("id").to_pylist() == ["12345678901234567890123"] * 2


@pytest.mark.parametrize("rows", [BLOCK // 4, (WHOLE_FILE_BYTES + BLOCK) // 4])
def test_an_integer_beyond_int64_after_the_first_block_turns_its_column_to_text(ws, store, rows):
    data = b"k,s\n" + b"1,a\n" * rows + b"99999999999999999999,b\n"
    result = sliced(record(ws, store, data), where="s = 'b'")
    assert result.table.to_pylist() == [{"k": "99999999999999999999", "s": "b"}]
    assert "read as string, not int64" in result.notes[0]


def test_a_column_of_floats_stays_a_float_column(ws, store):
    data = b"k,x\n1,1.5\n2,12345678901234567890123\n3,NA\n"
    result = sliced(record(ws, store, data))
    assert result.table.column("x").to_pylist() == [1.5, 1.2345678901234568e22, None]
    assert result.notes == ()


@pytest.mark.parametrize("digits", [4301, 6000])
def test_an_integer_longer_than_python_converts_is_kept_as_text(ws, store, digits):
    # int() refuses more than 4,300 digits: the check must not, nor say so to the user
    data = b"k,id\n1,5\n2," + b"7" * digits + b"\n"
    result = sliced(record(ws, store, data))
    assert result.table.column("id").to_pylist() == ["5", "7" * digits]


@given(st.lists(st.integers(min_value=-(2**70), max_value=2**70), min_size=1, max_size=20))
def test_an_integer_column_is_never_rounded(ws, store, values):
    data = b"id\n" + b"".join(b"%d\n" % v for v in values)
    column = sliced(record(ws, store, data)).table.column("id").to_pylist()
    assert [int(v) for v in column] == values


# -- JSON Lines -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "line"),
    [
        (b'{"k": 0, "id": 1.5}', b'{"k": 1, "id": 12345678901234567890123}'),
        (b'{"k": 0, "id": 1.5}', b'{"k": 1, "id": -9223372036854775809}'),
        (b'{"k": 0, "id": [{"a": 1}]}', b'{"k": 1, "id": [{"a": 18446744073709551615}]}'),
    ],
    ids=["top", "negative", "nested"],
)
def test_a_json_integer_beyond_int64_is_refused_not_rounded(ws, store, first, line):
    located = record(ws, store, first + b"\n" + line + b"\n", JSONL)
    with pytest.raises(TableUnreadable, match="beyond int64"):
        sliced(located, columns=("id",))
    assert sliced(located, columns=("k",)).rows == 2  # the other fields still slice


@pytest.mark.parametrize("digits", [4301, 6000])
def test_a_json_integer_longer_than_python_converts_is_refused_not_infinity(ws, store, digits):
    data = b'{"k": 0, "id": 5}\n{"k": 1, "id": ' + b"7" * digits + b"}\n"
    with pytest.raises(TableUnreadable, match="beyond int64"):
        sliced(record(ws, store, data, JSONL), columns=("id",))


def test_long_digits_in_json_strings_and_floats_are_read_as_written(ws, store):
    data = b'{"k": 0, "id": 0.1234567890123456789, "s": "x: 12345678901234567890123}"}\n'
    result = sliced(record(ws, store, data, JSONL))
    assert result.table.to_pylist() == [
        {"k": 0, "id": 0.1234567890123456789, "s": "x: 12345678901234567890123}"}
    ]


@given(st.lists(st.integers(min_value=-(2**70), max_value=2**70), min_size=1, max_size=20))
def test_a_json_integer_field_is_exact_or_refused(ws, store, values):
    data = b"".join(b'{"id": %d}\n' % v for v in values)
    try:
        column = sliced(record(ws, store, data, JSONL)).table.column("id").to_pylist()
    except TableUnreadable as exc:
        assert "beyond int64" in str(exc) or "inferred from the first" in str(exc)
        assert any(v not in range(-(2**63), 2**63) for v in values)
    else:
        assert column == values


# -- a file of one to two blocks --------------------------------------------------------------


def test_a_csv_drifting_in_its_second_block_is_typed_before_an_export(ws, store, tmp_path):
    rows = BLOCK // 4 + 1000  # past the first block pyarrow types, within the two it is given
    data = b"k,x\n" + b"1,5\n" * rows + b"2,1.5\n"
    assert BLOCK < len(data) <= 2 * BLOCK
    located = record(ws, store, data)
    assert describe(located.source).fields[1].type == "double"
    out = tmp_path / "x.csv"
    result = export_slice(located.source, SliceRequest(where="k = 2"), str(out), "csv")
    assert out.read_text().splitlines() == ['"k","x"', "2,1.5"]
    assert "read as double, not int64" in result.notes[0]


# -- column names -----------------------------------------------------------------------------


def test_a_repeated_header_name_is_named_as_repeated_and_the_others_slice(ws, store):
    located = record(ws, store, b"k,k,s\n1,2,a\n")
    with pytest.raises(UnknownColumn, match="2 columns named 'k'"):
        sliced(located)
    assert sliced(located, columns=("s",), where="s = 'a'").table.to_pylist() == [{"s": "a"}]


# -- timestamps -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "later"),
    [
        (b"2026-01-01 00:00:00", b"2026-01-02T00:00:00+02:00"),
        (b"2026-01-01T00:00:00Z", b"2026-01-02 00:00:00"),
    ],
    ids=["naive-then-offset", "offset-then-naive"],
)
@pytest.mark.parametrize("rows", [BLOCK // 20 * 2, (WHOLE_FILE_BYTES + BLOCK) // 20])
def test_a_timestamp_column_that_changes_its_zone_form_is_widened_to_text(
    ws, store, first, later, rows
):
    data = b"k,t\n" + (b"1," + first + b"\n") * rows + b"2," + later + b"\n"
    result = sliced(record(ws, store, data), where="k = 2")
    assert result.table.to_pylist() == [{"k": 2, "t": later.decode()}]
    assert "read as string" in result.notes[0]


# -- quotes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b'k,s\n1,"oops\n2,b\n3,c\n',
        b'k,s\n1,a\n2,"b""c\n',
        b'k,s\n1,"a"\n2,"',
    ],
    ids=["swallows-rows", "escaped-then-open", "open-at-eof"],
)
def test_a_quote_never_closed_in_a_small_file_is_unreadable_not_swallowed(ws, store, data):
    with pytest.raises(TableUnreadable, match="never closed"):
        sliced(record(ws, store, data))


def test_quotes_inside_unquoted_values_are_text(ws, store):
    data = b'k,s\n1,5" screen\n2,"a ""b"", c"\n3,x"y"z\n'
    result = sliced(record(ws, store, data))
    assert result.table.column("s").to_pylist() == ['5" screen', 'a "b", c', 'x"y"z']


@given(
    st.lists(st.text(alphabet=st.sampled_from('ab ,"\n\r'), max_size=6), min_size=1, max_size=30)
)
def test_a_valid_csv_with_an_odd_number_of_quotes_reads_as_pyarrow_reads_it(ws, store, values):
    sink = io.StringIO()
    writer = csv.writer(sink)  # quotes a value holding a delimiter, a quote, \r or \n
    writer.writerow(["k", "note"])
    writer.writerows([i, value] for i, value in enumerate(values))
    data = sink.getvalue().encode() + b'%d,x"y\n' % len(values)  # a quote that is text
    assert data.count(b'"') % 2 == 1
    options = pacsv.ParseOptions(newlines_in_values=True)
    convert = pacsv.ConvertOptions(column_types={"note": "string"}, strings_can_be_null=True)
    expected = pacsv.read_csv(io.BytesIO(data), parse_options=options, convert_options=convert)
    assert sliced(record(ws, store, data)).table.to_pylist() == expected.to_pylist()


# -- a header and no rows ---------------------------------------------------------------------


@pytest.mark.parametrize("media_type", [CSV, TSV])
@pytest.mark.parametrize("end", [b"", b"\n", b"\r\n", b"\r", b"\n\n"], ids=repr)
def test_a_header_without_rows_slices_to_an_empty_table_with_its_columns(
    ws, store, media_type, end
):
    sep = b"," if media_type == CSV else b"\t"
    located = record(ws, store, b"k" + sep + b"s" + end, media_type)
    result = sliced(located)
    assert result.table.column_names == ["k", "s"]  # as pandas reads it: text, no rows
    assert result.table.num_rows == 0
    assert [str(t) for t in result.table.schema.types] == ["string", "string"]
    assert sliced(located, columns=("s",), where="k = 'x'").table.num_rows == 0
    info = describe(located.source)
    assert [f.name for f in info.fields] == ["k", "s"]


@pytest.mark.parametrize("data", [b"", b"\n", b"\r\n", b"\n\n"], ids=repr)
def test_a_csv_without_a_header_is_unreadable_saying_so(ws, store, data):
    located = record(ws, store, data)
    with pytest.raises(TableUnreadable, match="no header row"):
        sliced(located)
    with pytest.raises(TableUnreadable, match="no header row"):
        describe(located.source)


# -- JSON Lines errors name the line in the file ----------------------------------------------


def json_lines_with_a_bad_line(rows: int, bad: bytes) -> tuple[bytes, int]:
    """`rows` objects, a blank line every 100, then `bad`: the data, and the line of `bad`."""
    lines = [b'{"k": %d, "s": "a"}' % i if i % 100 else b"" for i in range(1, rows + 1)]
    return b"\n".join([*lines, bad, b'{"k": 0, "s": "z"}']) + b"\n", len(lines) + 1


@pytest.mark.parametrize("rows", [50, BLOCK // 16], ids=["first-block", "later-block"])
@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (b'{"k": 1e400, "s": "b"}', "Number too big"),
        (b'{"k": 1 "s": "b"}', "Missing a comma"),
    ],
    ids=["number", "syntax"],
)
def test_a_json_lines_error_names_the_line_in_the_file(ws, store, rows, bad, words):
    data, line = json_lines_with_a_bad_line(rows, bad)
    assert (len(data) > BLOCK) == (rows > 50)  # the bad line in a later block
    located = record(ws, store, data, JSONL)
    with pytest.raises(TableUnreadable, match=words) as raised:
        sliced(located, where="s = 'b'")
    assert f"on line {line}" in str(raised.value)
    assert "row" not in str(raised.value)


def test_a_json_lines_error_after_two_objects_on_a_line_names_no_line(ws, store):
    data = b'{"k": 1}\n{"k": 2} {"k": 3}\n{"k": 1e400}\n'  # pyarrow counts the objects
    with pytest.raises(TableUnreadable, match="Number too big") as raised:
        sliced(record(ws, store, data, JSONL))
    assert "row" not in str(raised.value) and "line" not in str(raised.value)


# -- JSON Lines with CR line ends -------------------------------------------------------------


def test_json_lines_ending_with_cr_only_past_one_block_say_to_convert_them_to_lf(ws, store):
    data = b"".join(b'{"k": %d, "s": "a"}\r' % i for i in range(2 * BLOCK // 16))
    assert len(data) > BLOCK
    located = record(ws, store, data, JSONL)
    for read in (lambda: sliced(located, limit=2), lambda: describe(located.source)):
        with pytest.raises(TableUnreadable, match="end with CR only") as raised:
            read()
        assert "convert them to LF" in str(raised.value)


def test_json_lines_ending_with_cr_only_within_one_block_are_read(ws, store):
    located = record(ws, store, b'{"k": 1, "s": "a"}\r{"k": 2, "s": "b"}\r', JSONL)
    assert sliced(located, where="k = 2").table.to_pylist() == [{"k": 2, "s": "b"}]


# -- a column with no name --------------------------------------------------------------------


@pytest.mark.parametrize("header", [b"k,s,", b"k,,s"], ids=["trailing", "between"])
def test_a_column_with_no_name_slices_whole_and_naming_it_says_how_to_name_it(ws, store, header):
    located = record(ws, store, header + b"\n1,a,x\n2,b,y\n")
    assert "" in sliced(located).table.column_names  # as pyarrow reads it; pandas: "Unnamed: n"
    assert sliced(located, columns=("k",), where="k = 2").table.to_pylist() == [{"k": 2}]
    for request in ({"columns": ("k", "")}, {"where": "\"\" = 'x'"}):
        with pytest.raises(InvalidInput, match="no name") as raised:
            sliced(located, **request)
        assert "name it in the header" in str(raised.value)


def test_a_widening_note_counts_rows_not_lines(ws, store):
    # blank lines are no row, and a quoted value may span lines: the note names the row
    rows = BLOCK // 4  # the value that does not fit lies past the first block
    data = b'k,s\n1,"a\nb"\n\n\n' + b"2,x\n" * rows + b"zz,y\n"
    result = sliced(record(ws, store, data), columns=("k",), where="s = 'y'")
    assert result.table.column("k").to_pylist() == ["zz"]
    row = rows + 3  # the header, the quoted row, the rows of 2, then zz (its line: rows + 6)
    assert result.notes == (
        f"column 'k' holds 'zz' in row {row} (the header is row 1): read as string, not int64",
    )
