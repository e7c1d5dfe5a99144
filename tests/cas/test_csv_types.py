"""A CSV whose column types drift after the first block (issue 29 item 1): widened, never failed.

The scientist's file: `x` an integer for most rows, then `250001.5` and `NA`; `note` mostly
blank. A small file is typed over the whole file before any row is read; a large one is sliced
with the first block's types and restarts with the column widened when a later value does not
fit, so one slice never holds two types for a column. Slices are checked against an oracle
built from the `csv` module (and against pandas, where it is installed).
"""

from __future__ import annotations

import csv
import hashlib
import io

import pyarrow as pa
import pytest

from cas import Located
from cas.slicing._export import export_slice
from cas.slicing._limits import SliceLimits
from cas.slicing._media import CSV
from cas.slicing._slice import SliceRequest, describe, read_slice
from cas.slicing._text_tables import WHOLE_FILE_BYTES, block_bytes
from fsedge import CHUNK_BYTES

MIB = 1 << 20
# Blocks of about 160 KB. A read through the slicing helper (a process with threads) maps up
# to ~4 MiB more than one forked from a single-threaded caller: 16 MiB failed there.
SMALL = SliceLimits().lowered(max_memory_bytes=20 * MIB)
NULLS = {"", "NA", "N/A", "NaN", "nan", "null", "NULL"}


def drifting(rows: int, drift_at: int) -> bytes:
    """`id,x,note`: x an int until `drift_at`, then a float and NA by turns; note blank by turns."""
    lines = ["id,x,note"]
    for i in range(rows):
        if i < drift_at:
            x = str(i)
        else:
            x = f"{i}.5" if i % 2 else "NA"
        note = "" if i % 7 == 0 else f"n{i % 5}"
        lines.append(f"{i},{x},{note}")
    return ("\n".join(lines) + "\n").encode()


def oracle(data: bytes) -> dict[str, list[object]]:
    """Each column as the narrowest of int, float and text that fits every non-null value."""
    rows = list(csv.reader(io.StringIO(data.decode())))
    names, body = rows[0], rows[1:]
    columns: dict[str, list[object]] = {}
    for j, name in enumerate(names):
        raw = [None if row[j] in NULLS else row[j] for row in body]
        for kind in (int, float, str):
            try:
                columns[name] = [None if v is None else kind(v) for v in raw]
                break
            except ValueError:
                continue
    return columns


def record(ws, store, data: bytes) -> Located:
    name = "d-" + hashlib.sha256(data).hexdigest()[:16] + ".csv"
    ws.export(name, data)
    card = ws.record(store, name, media_type=CSV).card
    return store.locate(card.experiment_id)


@pytest.fixture
def store(ws):
    return ws.store()


def test_a_small_drifting_csv_is_typed_over_the_whole_file(ws, store):
    block = block_bytes(SliceLimits().table_bounds)
    rows = block // 12 * 3  # the drift lies past the first two blocks
    data = drifting(rows, rows - 40)
    assert 2 * block < len(data) <= WHOLE_FILE_BYTES
    located = record(ws, store, data)
    info = describe(located.source)
    assert [(f.name, f.type) for f in info.fields] == [
        ("id", "int64"),
        ("x", "double"),
        ("note", "string"),
    ]
    assert info.notes[0] == "column types are inferred over the whole file"
    assert "column 'x' holds '" in info.notes[1] and "read as double, not int64" in info.notes[1]
    # The failing slice: a few rows near the drift.
    tail = read_slice(located.source, SliceRequest(where=f"id >= {rows - 42}", limit=5))
    expected = oracle(data)
    assert tail.table.schema.field("x").type == pa.float64()
    assert tail.table.column("x").to_pylist() == expected["x"][rows - 42 : rows - 37]
    # Every slice agrees with the whole file, however few rows it reads.
    head = read_slice(located.source, SliceRequest(columns=("x",), limit=3))
    assert head.table.schema.field("x").type == pa.float64()
    last = read_slice(located.source, SliceRequest(where=f"id >= {rows - 1000}"))
    assert last.table.to_pydict() == {k: v[rows - 1000 :] for k, v in expected.items()}


def test_blank_cells_are_null(ws, store):
    data = drifting(700, 700)
    located = record(ws, store, data)
    blank = read_slice(located.source, SliceRequest(columns=("id",), where="note is null"))
    assert blank.table.column("id").to_pylist() == list(range(0, 700, 7))
    assert blank.rows == sum(v is None for v in oracle(data)["note"])


def test_a_large_drifting_csv_widens_in_the_slice_that_meets_the_drift(ws, store):
    rows = 900_000
    data = drifting(rows, rows - 100)
    assert len(data) > max(WHOLE_FILE_BYTES, 3 * CHUNK_BYTES)
    located = record(ws, store, data)
    info = describe(located.source, limits=SMALL)
    assert dict((f.name, f.type) for f in info.fields)["x"] == "int64"
    assert "a slice widens a column" in info.notes[0]
    # A few rows at the start never meet the drift: the first block's types, a little read.
    head = read_slice(located.source, SliceRequest(columns=("x",), limit=10), limits=SMALL)
    assert head.table.column("x").to_pylist() == list(range(10)) and head.notes == ()
    assert head.bytes_read <= 2 * CHUNK_BYTES
    # A slice that meets it restarts widened: one type in the whole slice, and a note.
    tail = read_slice(
        located.source, SliceRequest(where=f"id >= {rows - 103}", limit=6), limits=SMALL
    )
    assert tail.table.schema.field("x").type == pa.float64()
    assert tail.table.column("x").to_pylist() == [
        rows - 103.0,
        rows - 102.0,
        rows - 101.0,
        None,
        rows - 99 + 0.5,
        None,
    ]
    assert len(tail.notes) == 1 and "read as double, not int64" in tail.notes[0]


def test_an_export_types_its_columns_before_writing(ws, store, tmp_path):
    rows = 900_000
    data = drifting(rows, rows - 100)
    located = record(ws, store, data)
    out = tmp_path / "x.csv"
    result = export_slice(
        located.source, SliceRequest(columns=("x",), where=f"id >= {rows - 3}"), str(out), "csv",
        limits=SMALL,
    )  # fmt: skip
    assert out.read_text().splitlines() == ['"x"', f"{rows - 3}.5", "", f"{rows - 1}.5"]
    assert result.notes and "read as double" in result.notes[0]


def test_a_column_that_turns_to_text_is_filtered_as_text(ws, store):
    block = block_bytes(SliceLimits().table_bounds)
    lines = ["k,s"] + [f"{i},a" for i in range(block // 4)] + ["later,b"]
    located = record(ws, store, ("\n".join(lines) + "\n").encode())
    result = read_slice(located.source, SliceRequest(where="k = 'later'"))
    assert result.table.to_pylist() == [{"k": "later", "s": "b"}]


def test_drifting_slices_match_pandas(ws, store):
    pd = pytest.importorskip("pandas")
    block = block_bytes(SliceLimits().table_bounds)
    rows = block // 12 * 3
    data = drifting(rows, rows - 40)
    located = record(ws, store, data)
    frame = pd.read_csv(io.BytesIO(data))
    where = f"id >= {rows - 60} and note is null"
    got = read_slice(located.source, SliceRequest(where=where)).table.to_pandas()
    want = frame[(frame["id"] >= rows - 60) & frame["note"].isna()].reset_index(drop=True)
    assert str(want["x"].dtype) == "float64" and str(got["x"].dtype) == "float64"
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert (
        len(frame[frame["note"].isna()])
        == read_slice(located.source, SliceRequest(columns=(), where="note is null")).rows
    )
