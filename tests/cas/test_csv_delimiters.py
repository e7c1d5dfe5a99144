"""A `.csv` that is not separated by commas: semicolons (a spreadsheet's where the decimal mark
is a comma), tabs, or `|`. Each case is a real file recorded into a real store and read in the
bounded child; the record, `show`, a slice and an export all read it the same way.
"""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cas.slicing._limits import DEFAULT_SLICE_LIMITS
from cas.slicing._media import CSV, TSV
from cas.slicing._slice import SliceRequest, describe, read_slice
from cas.slicing._text_checks import sniff_delimiter
from cas.slicing._text_tables import WHOLE_FILE_BYTES, block_bytes

BLOCK = block_bytes(DEFAULT_SLICE_LIMITS.table_bounds)


def record(ws, store, data: bytes, media_type: str = CSV):
    """Record `data` as the table reader would meet it; the record's warnings and its location."""
    recorded = ws.record_data(store, data, media_type, measured=True)
    return recorded, store.locate(recorded.card.experiment_id)


@pytest.fixture
def store(ws):
    return ws.store()


@pytest.mark.parametrize(("sep", "name"), [(b";", "';'"), (b"\t", "tabs"), (b"|", "'|'")])
def test_a_csv_separated_otherwise_is_read_by_its_header(ws, store, sep, name):
    data = sep.join([b"id", b"dose", b"note"]) + b"\n"
    data += b"".join(sep.join([b"%d" % i, b"%d.5" % i, b"n,%d" % i]) + b"\n" for i in range(50))
    recorded, located = record(ws, store, data)
    assert list(recorded.card.columns) == ["id", "dose", "note"]
    note = f"values are separated by {name}, not commas (the header has no comma)"
    assert note in recorded.warnings
    info = describe(located.source)
    assert [f.name for f in info.fields] == ["id", "dose", "note"]
    assert [f.type for f in info.fields] == ["int64", "double", "string"]
    assert note in info.notes
    result = read_slice(located.source, SliceRequest(where="dose > 47.5", columns=("id", "note")))
    assert result.table.to_pylist() == [{"id": 48, "note": "n,48"}, {"id": 49, "note": "n,49"}]
    assert not any(n.startswith("values are") for n in result.notes)  # said at record and show


def test_a_semicolon_csv_larger_than_the_whole_file_bound_streams_past_its_first_block(ws, store):
    rows = (WHOLE_FILE_BYTES + 2 * BLOCK) // 16 + 1
    data = b"id;x;t\n" + b"".join(b"%d;%d;abcdef\n" % (i, i % 7) for i in range(rows))
    assert len(data) > WHOLE_FILE_BYTES
    _, located = record(ws, store, data)
    result = read_slice(located.source, SliceRequest(where=f"id >= {rows - 2}"))
    assert result.table.to_pylist() == [
        {"id": rows - 2, "x": (rows - 2) % 7, "t": "abcdef"},
        {"id": rows - 1, "x": (rows - 1) % 7, "t": "abcdef"},
    ]


def test_decimal_commas_stay_text_and_are_named(ws, store):
    data = b"id;dose;pair;label\n1;1,5;3,7;a\n2;-2,25;12,40;b\n3;3;5;c\n4;;1;d\n"
    recorded, located = record(ws, store, data)
    info = describe(located.source)
    assert [(f.name, f.type) for f in info.fields] == [
        ("id", "int64"),
        ("dose", "string"),
        ("pair", "string"),
        ("label", "string"),
    ]
    said = (
        "values are separated by ';', not commas (the header has no comma); columns 'dose', "
        "'pair' hold numbers with a decimal comma (such as 1,5), read as text: declare the decimal "
        "comma (--csv-decimal ,) to read them as numbers"
    )
    assert said in info.notes and said in recorded.warnings
    result = read_slice(located.source, SliceRequest(where="dose = '-2,25'"))
    assert result.table.to_pylist() == [{"id": 2, "dose": "-2,25", "pair": "12,40", "label": "b"}]


def test_an_export_of_a_semicolon_csv_writes_commas(ws, store, tmp_path):
    from cas.slicing._export import export_slice

    _, located = record(ws, store, b"a;b\n1;x,y\n2;z\n")
    out = tmp_path / "out.csv"
    export_slice(located.source, SliceRequest(), str(out), "csv")
    assert list(csv.reader(io.StringIO(out.read_text()))) == [["a", "b"], ["1", "x,y"], ["2", "z"]]


@pytest.mark.parametrize(
    ("data", "columns"),
    [
        (b"name; remark\nx\ny\n", ["name; remark"]),  # one name holding a semicolon
        (b"a;b,c\n1;2,3\n", ["a;b", "c"]),  # a comma in the header: commas
        (b'"a,b";c\n1;2\n', ["a,b", "c"]),  # a comma only inside a quoted name
        (b"a;b|c\n1;2|3\n", ["a;b|c"]),  # two candidates: neither is guessed
        (b"a;b\n1;2;3\n", None),  # the first row disagrees: commas, and the header is one name
        (b"a;b\n", ["a", "b"]),  # a header alone
        (b'\xef\xbb\xbf\r\n\r\na\tb\r\n"x\ny"\t2\r\n', ["a", "b"]),  # a BOM, blank lines, a
        # quoted line end in the first row
    ],
)
def test_only_a_header_without_commas_and_one_other_delimiter_is_sniffed(ws, store, data, columns):
    recorded, located = record(ws, store, data)
    if columns is None:
        assert sniff_delimiter(data) == (b",", None)
        return
    assert [f.name for f in describe(located.source).fields] == columns
    assert list(recorded.card.columns) == columns


def test_a_tsv_is_read_with_tabs_whatever_its_header_holds(ws, store):
    _, located = record(ws, store, b"a;b\tc\n1;2\t3\n", TSV)
    assert [f.name for f in describe(located.source).fields] == ["a;b", "c"]


_NAME = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
_VALUE = st.text(alphabet='abc xyz,.;|\t"\n', max_size=8)


@given(
    delimiter=st.sampled_from([",", ";", "\t", "|"]),
    names=st.lists(_NAME, min_size=2, max_size=5, unique=True),
    rows=st.lists(st.lists(_VALUE, min_size=5, max_size=5), min_size=1, max_size=5),
)
def test_a_table_written_with_any_one_delimiter_reads_back_its_header(delimiter, names, rows):
    """What Python's csv writer makes with `;`, tab, `|` or `,` is read with that delimiter.

    Values may hold any of the delimiters and quotes and line ends; the writer quotes them.
    """
    text = io.StringIO()
    writer = csv.writer(text, delimiter=delimiter, lineterminator="\n")
    writer.writerow(names)
    writer.writerows(row[: len(names)] for row in rows)
    sniffed, note = sniff_delimiter(text.getvalue().encode())
    assert sniffed == delimiter.encode()
    assert (note is None) == (delimiter == ",")


def test_a_filter_that_no_longer_types_after_a_widening_says_why(ws, store, tmp_path):
    """Past the whole-file bound a column is widened when a late value does not fit: a filter
    written for the first block's type then fails, and says which value widened what."""
    from cards.errors import FilterTypeError
    from cas.slicing._export import export_slice

    rows = WHOLE_FILE_BYTES // 9
    lines = [b"id,x\n"]
    lines += [b"%d,%d\n" % (i, i % 100) for i in range(rows - 10)]
    lines += [b"%d,unknown\n" % i for i in range(rows - 10, rows)]
    data = b"".join(lines)
    assert len(data) > WHOLE_FILE_BYTES
    _, located = record(ws, store, data)
    first = read_slice(located.source, SliceRequest(where="x > 95", limit=3))
    assert first.table.column("id").to_pylist() == [96, 97, 98]  # the first block's int64
    with pytest.raises(FilterTypeError) as late:  # the slice met "unknown" and widened x
        read_slice(located.source, SliceRequest(where="x > 95", offset=rows // 25 - 5, limit=10))
    assert "does not fit a column of type string" in late.value.message
    assert "wider types than its first block said" in late.value.message
    assert "column 'x' holds 'unknown'" in late.value.message and "--csv-type" in late.value.message
    with pytest.raises(FilterTypeError) as exported:
        export_slice(located.source, SliceRequest(where="x > 95"), str(tmp_path / "x.csv"), "csv")
    assert "wider types than its first block said" in exported.value.message


def test_a_latin_1_column_is_refused_saying_what_to_do(ws, store):
    from cards.errors import TableUnreadable

    _, located = record(ws, store, "Patient;Dosis\r\nJosé;1\r\n".encode("latin-1"))
    with pytest.raises(TableUnreadable) as refused:
        read_slice(located.source, SliceRequest(columns=("Dosis",)))
    assert "column 'Patient' holds text that is not UTF-8" in refused.value.message
    assert "save the file as UTF-8" in refused.value.message


def test_points_that_may_group_thousands_are_named_in_a_semicolon_csv(ws, store):
    recorded, located = record(
        ws, store, b"a;b;c\r\n1.000;0.125;x\r\n2.500;0.250;y\r\n12.000;1;z\r\n"
    )
    info = describe(located.source)
    assert [(f.name, f.type) for f in info.fields] == [
        ("a", "double"),
        ("b", "double"),
        ("c", "string"),
    ]
    said = (
        "; column 'a' holds numbers such as 1.000, read with a decimal point (1.0): if the point "
        "groups thousands, declare the column as text (--csv-type NAME=string)"
    )
    assert any(n.endswith(said) for n in info.notes)
    assert any(w.endswith(said) for w in recorded.warnings)
    _, plain = record(ws, store, b"a,b\n1.000,2\n")  # a comma CSV: a point is a decimal point
    assert not any("groups thousands" in n for n in describe(plain.source).notes)


def test_a_title_line_above_the_header_is_named_as_the_likely_cause(ws, store):
    from cards.errors import UnknownColumn

    _, located = record(ws, store, b"Report of trial 7,,,\nid,dose,site,note\n1,2.5,a,x\n")
    with pytest.raises(UnknownColumn) as refused:
        read_slice(located.source, SliceRequest())
    assert "the table has 3 columns named ''" in refused.value.message
    assert "a title above the header, remove it" in refused.value.message
    assert read_slice(located.source, SliceRequest(columns=("Report of trial 7",))).rows == 2


def test_a_ragged_row_says_rows_must_match_the_header(ws, store):
    from cards.errors import TableUnreadable

    _, located = record(ws, store, b"a,b,c\n1,2,3\n4,5\n")
    with pytest.raises(TableUnreadable) as refused:
        read_slice(located.source, SliceRequest())
    assert "Expected 3 columns, got 2" in refused.value.message
    assert "every row must hold as many values as the header names" in refused.value.message
    assert "inferred from the first" not in refused.value.message
