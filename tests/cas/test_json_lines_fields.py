"""JSON Lines fields over the whole file: late fields, fields that change kind, UTC offsets.

Each case is a real file recorded into a real store and read in the bounded child through
`read_slice`, `describe` and `export_slice`. A field that first appears past the first block is
found (never dropped silently), a field whose values change kind is read as its JSON text (as a
CSV column is widened to text), and a time with a UTC offset keeps its zone as the CSV reader
keeps it.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cards.errors import TableTooLarge, TableUnreadable
from cas import Located
from cas.slicing._export import export_slice
from cas.slicing._limits import DEFAULT_SLICE_LIMITS, SliceLimits
from cas.slicing._media import CSV, JSONL
from cas.slicing._slice import SliceRequest, describe, read_slice
from cas.slicing._text_tables import WHOLE_FILE_BYTES, block_bytes

BLOCK = block_bytes(DEFAULT_SLICE_LIMITS.table_bounds)
SMALL = SliceLimits(max_memory_bytes=8 << 20)  # a 64 KiB block: several blocks in a small file
SMALL_BLOCK = block_bytes(SMALL.table_bounds)


def record(ws, store, data: bytes, media_type: str = JSONL) -> Located:
    card = ws.record_data(store, data, media_type).card
    return store.locate(card.experiment_id)


def sliced(located: Located, limits: SliceLimits | None = None, **request):
    return read_slice(located.source, SliceRequest(**request), limits=limits)


def lines(rows: list[dict[str, object]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


@pytest.fixture
def store(ws):
    return ws.store()


# -- a field that first appears past the first block ------------------------------------------


def late_field(count: int, late: int) -> bytes:
    """`count` lines of id and v; from line `late` + 1 on, an error too (the user's file)."""
    rows: list[dict[str, object]] = [{"id": i, "v": i * 0.5} for i in range(count)]
    for row in rows[late:]:
        row["error"] = "sensor fault"
    return lines(rows)


def test_a_field_first_appearing_past_the_first_block_is_in_show_a_slice_and_an_export(
    ws, store, tmp_path
):
    data = late_field(100_000, 95_000)
    assert data.find(b"error") > BLOCK and len(data) <= WHOLE_FILE_BYTES
    located = record(ws, store, data)
    info = describe(located.source)
    assert [(f.name, f.type) for f in info.fields] == [
        ("id", "int64"),
        ("v", "double"),
        ("error", "string"),
    ]
    assert any("'error' first appears on line 95001" in note for note in info.notes)
    assert any("over the whole file" in note for note in info.notes)
    whole = sliced(located)
    assert whole.rows == 100_000
    errors = whole.table.column("error").to_pylist()
    assert errors == [None] * 95_000 + ["sensor fault"] * 5_000
    assert any("first appears on line 95001" in note for note in whole.notes)
    picked = sliced(located, columns=("id", "error"), where="error is not null")
    assert picked.table.column("id").to_pylist() == list(range(95_000, 100_000))
    out = tmp_path / "all.jsonl"
    result = export_slice(located.source, SliceRequest(), str(out), "jsonl")
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert result.rows == len(written) == 100_000
    assert written[94_999] == {"id": 94_999, "v": 47_499.5, "error": None}
    assert written[95_000] == {"id": 95_000, "v": 47_500.0, "error": "sensor fault"}
    assert any("first appears on line 95001" in note for note in result.notes)


def test_a_field_first_appearing_late_in_a_file_past_the_whole_file_bound_is_found(
    ws, store, tmp_path
):
    count = WHOLE_FILE_BYTES // 20
    data = late_field(count, count - 10)
    assert len(data) > WHOLE_FILE_BYTES
    located = record(ws, store, data)
    info = describe(located.source)  # the first block only: it says so
    assert [f.name for f in info.fields] == ["id", "v"]
    assert any(f"the first {BLOCK} bytes" in note for note in info.notes)
    assert any("first appear later" in note for note in info.notes)
    tail = sliced(located, where=f"id >= {count - 12}")  # every field: read again with error
    assert tail.table.to_pylist() == [
        {"id": i, "v": i * 0.5, "error": None if i < count - 10 else "sensor fault"}
        for i in range(count - 12, count)
    ]
    assert any(f"first appears on line {count - 9}" in note for note in tail.notes)
    assert sliced(located, columns=("id",), where=f"id >= {count - 1}").notes == ()
    named = sliced(located, columns=("error",), where="error is not null")  # found, then read
    assert named.table.column("error").to_pylist() == ["sensor fault"] * 10
    out = tmp_path / "all.jsonl"
    result = export_slice(located.source, SliceRequest(), str(out), "jsonl")
    written = out.read_text().splitlines()
    assert result.rows == len(written) == count
    assert json.loads(written[0]) == {"id": 0, "v": 0.0, "error": None}
    assert json.loads(written[-1]) == {
        "id": count - 1,
        "v": (count - 1) * 0.5,
        "error": "sensor fault",
    }


@pytest.mark.parametrize("size", [BLOCK // 2, 3 * BLOCK], ids=["first-block", "whole-file"])
def test_a_new_field_on_every_line_hits_the_column_bound(ws, store, size):
    data = b"".join(b'{"f%d": 1}\n' % i for i in range(size // 12))
    located = record(ws, store, data)
    for read in (lambda: sliced(located, limit=1), lambda: describe(located.source)):
        with pytest.raises(TableTooLarge, match="columns") as raised:
            read()
        assert raised.value.limit == DEFAULT_SLICE_LIMITS.max_columns


def test_a_new_field_on_every_line_past_the_whole_file_bound_hits_the_column_bound(ws, store):
    head = b'{"k": 1}\n' * (WHOLE_FILE_BYTES // 9 + 1)
    data = head + b"".join(b'{"f%d": 1}\n' % i for i in range(BLOCK // 12))
    located = record(ws, store, data)
    assert sliced(located, columns=("k",), limit=2).rows == 2  # the first block holds k only
    with pytest.raises(TableTooLarge, match="columns") as raised:
        sliced(located, where="k is null", limit=1)
    assert raised.value.limit == DEFAULT_SLICE_LIMITS.max_columns


def test_late_fields_are_found_where_lines_hold_two_objects_or_one_over_lines(ws, store):
    pad = b'{"k": 0} {"k": 0}\n' * (SMALL_BLOCK // 18 + 1)  # pyarrow reads two objects a line
    data = pad + b'{"k": 1,\n "late": "x"}\n{"k": 2, "late": 3}\n'
    result = sliced(record(ws, store, data), SMALL, where="k > 0")
    assert result.table.to_pylist() == [{"k": 1, "late": "x"}, {"k": 2, "late": "3"}]
    start = pad.count(b"\n") + 1  # the line its object starts on
    assert f"field 'late' first appears on line {start}" in result.notes


def test_many_late_fields_are_noted_twenty_at_a_time(ws, store):
    pad = b'{"k": 0}\n' * (SMALL_BLOCK // 9 + 1)
    data = pad + b"".join(b'{"k": 1, "f%d": %d}\n' % (i, i) for i in range(30))
    result = sliced(record(ws, store, data), SMALL, where="k = 1", limit=1)
    assert len(result.table.column_names) == 31
    assert len(result.notes) == 21
    assert result.notes[-1] == "and 10 more fields first appear past the first block"


# -- a field whose values change kind ---------------------------------------------------------


def test_a_field_that_changes_kind_is_text_and_the_others_slice_as_they_were(ws, store):
    located = record(ws, store, b'{"id":1,"val":1}\n{"id":2,"val":"x"}\n')
    assert sliced(located, columns=("id",)).table.to_pylist() == [{"id": 1}, {"id": 2}]
    whole = sliced(located)
    assert whole.table.to_pylist() == [{"id": 1, "val": "1"}, {"id": 2, "val": "x"}]
    assert whole.table.schema.field("val").type == pa.string()
    assert len(whole.notes) == 1
    assert "'val' changes from number to string on line 2" in whole.notes[0]
    info = describe(located.source)
    assert [(f.name, f.type) for f in info.fields] == [("id", "int64"), ("val", "string")]
    assert not any(str(BLOCK) in note for note in info.notes)
    assert sliced(located, where="val = 'x'").table.column("id").to_pylist() == [2]


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ([b"1.50", b'"x"'], ["1.50", "x"]),
        ([b"true", b"2"], ["true", "2"]),
        ([b'{"a": 1}', b'{"a": "b"}'], ['{"a": 1}', '{"a": "b"}']),
        ([b"[1, 2]", b'["a"]'], ["[1, 2]", '["a"]']),
        ([b'"s"', b"null", b"[1]", b'{"b": [false]}'], ["s", None, "[1]", '{"b": [false]}']),
        ([b"12345678901234567890123", b'"x"'], ["12345678901234567890123", "x"]),
        ([b'"caf\\u00e9"', b"7"], ["caf\u00e9", "7"]),
    ],
    ids=["float", "bool", "nested", "list", "several", "beyond-int64", "escaped"],
)
def test_a_field_of_several_kinds_is_read_as_its_json_text(ws, store, values, text):
    data = b"".join(b'{"k": %d, "v": %s}\n' % (i, value) for i, value in enumerate(values))
    result = sliced(record(ws, store, data))
    assert result.table.column("v").to_pylist() == text
    assert result.table.column("k").to_pylist() == list(range(len(values)))


@pytest.mark.parametrize("rows", [BLOCK // 16, (WHOLE_FILE_BYTES + BLOCK) // 16])
def test_a_field_that_changes_kind_after_the_first_block_is_widened_to_text(
    ws, store, rows, tmp_path
):
    data = (
        b"".join(b'{"k": %d, "s": "a"}\n' % i for i in range(rows)) + b'{"k": "oops", "s": "b"}\n'
    )
    located = record(ws, store, data)
    result = sliced(located, where="s = 'b'")
    assert result.table.to_pylist() == [{"k": "oops", "s": "b"}]
    assert any(f"'k' changes from number to string on line {rows + 1}" in n for n in result.notes)
    assert sliced(located, columns=("s",), where="s = 'b'").rows == 1
    out = tmp_path / "k.csv"
    export_slice(located.source, SliceRequest(where="k = '3' or s = 'b'"), str(out), "csv")
    assert out.read_text().splitlines() == ['"k","s"', '"3","a"', '"oops","b"']


@pytest.mark.parametrize("rows", [BLOCK // 16, (WHOLE_FILE_BYTES + BLOCK) // 16])
def test_an_integer_field_with_a_later_fraction_is_read_as_double(ws, store, rows):
    data = b"".join(b'{"k": 0, "x": %d}\n' % (i % 1000) for i in range(rows))
    data += b'{"k": 1, "x": 1.5}\n'
    result = sliced(record(ws, store, data), where="k = 1")
    assert result.table.to_pylist() == [{"k": 1, "x": 1.5}]
    note = f"holds 1.5 on line {rows + 1}: read as double, not int64"
    assert any(note in n for n in result.notes)


def test_a_nested_key_first_appearing_past_the_whole_file_bound_is_kept(ws, store):
    count = WHOLE_FILE_BYTES // 16 + 1
    data = b"".join(b'{"k": 0, "m": {"a": 1}}\n' for _ in range(count))
    data += b'{"k": 1, "m": {"a": 2, "b": "new"}}\n'
    result = sliced(record(ws, store, data), where="k = 1")
    assert result.table.to_pylist() == [{"k": 1, "m": {"a": 2, "b": "new"}}]
    assert any("'m'" in note for note in result.notes)


def test_text_that_is_not_utf8_in_a_field_of_several_kinds_names_its_line(ws, store):
    data = b'{"k": 1, "v": 1}\n{"k": 2, "v": "x"}\n{"k": 3, "v": "\xff"}\n'
    located = record(ws, store, data)
    for columns in (("k",), ("v",)):  # pyarrow's first read of the block meets it too
        with pytest.raises(TableUnreadable, match="line 3 holds text that is not UTF-8"):
            sliced(located, columns=columns)


def test_a_field_of_several_kinds_exports_to_parquet_as_text(ws, store, tmp_path):
    located = record(ws, store, b'{"v": 1.50}\n{"v": [1]}\n{"v": null}\n')
    out = tmp_path / "v.parquet"
    export_slice(located.source, SliceRequest(), str(out), "parquet")
    table = pq.read_table(out)
    assert table.schema.field("v").type == pa.string()
    assert table.column("v").to_pylist() == ["1.50", "[1]", None]


def test_a_file_starting_with_a_bom_reads_its_fields_of_several_kinds(ws, store):
    located = record(ws, store, b'\xef\xbb\xbf{"k": 1, "v": 1}\n{"k": 2, "v": "x"}\n')
    assert sliced(located).table.to_pylist() == [{"k": 1, "v": "1"}, {"k": 2, "v": "x"}]


# -- times with a UTC offset ------------------------------------------------------------------


def test_times_with_a_utc_offset_keep_their_zone_as_in_a_csv(ws, store):
    times = ["2026-03-06T10:00:00+02:00", "2026-03-06T10:00:00Z"]
    jsonl = sliced(record(ws, store, lines([{"t": t} for t in times])))
    csv = sliced(record(ws, store, ("t\n" + "\n".join(times) + "\n").encode(), CSV))
    assert jsonl.table.schema.field("t").type == pa.timestamp("s", tz="UTC")
    assert jsonl.table.schema == csv.table.schema
    assert jsonl.table.to_pylist() == csv.table.to_pylist()
    assert str(jsonl.table.column("t")[0]) == "2026-03-06 08:00:00+00:00"
    naive = sliced(record(ws, store, lines([{"t": "2026-03-06T10:00:00"}, {"t": "2026-03-07"}])))
    assert naive.table.schema.field("t").type == pa.timestamp("s")  # no offset: no zone
    assert [str(t) for t in naive.table.column("t")] == [
        "2026-03-06 10:00:00",
        "2026-03-07 00:00:00",
    ]


@pytest.mark.parametrize("rows", [1, BLOCK // 40, (WHOLE_FILE_BYTES + BLOCK) // 40])
@pytest.mark.parametrize(
    ("first", "later"),
    [("2026-01-01 00:00:00", "2026-01-02T00:00:00+02:00"), ("2026-01-01T00:00:00Z", "2026-01-02")],
    ids=["naive-then-offset", "offset-then-naive"],
)
def test_times_with_and_without_an_offset_are_text_as_in_a_csv(ws, store, rows, first, later):
    data = lines([{"k": 1, "t": first}] * rows + [{"k": 2, "t": later}])
    result = sliced(record(ws, store, data), where="k = 2")
    assert result.table.to_pylist() == [{"k": 2, "t": later}]
    assert any("'t'" in note and "read as string" in note for note in result.notes)


# -- any objects read back every field --------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(float),
    st.text(alphabet="ab xyz", max_size=4),
)
ROW = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), SCALARS, max_size=4)


def as_text(value: object) -> str | None:
    """A value as the JSON text a field of several kinds holds (a string as itself)."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def expected_column(values: list[object]) -> list[object]:
    kinds = {
        "number" if isinstance(v, int | float) and not isinstance(v, bool) else type(v).__name__
        for v in values
        if v is not None
    }
    if len(kinds) > 1:
        return [as_text(v) for v in values]
    if any(isinstance(v, float) for v in values):
        return [None if v is None else float(v) for v in values]  # pyarrow: ints among doubles
    return values


@given(head=st.lists(ROW, max_size=5), tail=st.lists(ROW, min_size=1, max_size=20))
def test_any_objects_read_back_every_field_exactly(ws, store, head, tail):
    """Objects before and after a padding longer than a block: every field, each value."""
    padding = [{"n": None}] * (SMALL_BLOCK // 10 + 1)
    rows = [*head, *padding, *tail]
    data = lines(rows)
    names = list(dict.fromkeys(name for row in rows for name in row))
    expected = {name: expected_column([row.get(name) for row in rows]) for name in names}
    offset = len(head) + len(padding)
    result = sliced(record(ws, store, data), SMALL, offset=offset)
    assert result.table.column_names == names
    assert result.table.to_pydict() == {name: expected[name][offset:] for name in names}
    head_rows = sliced(record(ws, store, data), SMALL, limit=len(head))
    assert head_rows.table.to_pydict() == {name: expected[name][: len(head)] for name in names}
