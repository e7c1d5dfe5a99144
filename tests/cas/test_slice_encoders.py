"""What a slice's encoders write: JSON Lines that keep non-finite floats, Parquet that keeps its
table's schema metadata (pandas' among it), only where it is still true.

Each case is a real file recorded into a real store, then sliced to stdout (`harness_plugin.cli`)
or exported into a file (`export_slice`), and read back as a person would. The pandas cases run
only where pandas is installed (the CI's oracle stage).
"""

from __future__ import annotations

import io
import json
import math
import struct

import orjson
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import cli_project

from cas.slicing import SliceRequest, export_slice, read_slice
from cas.slicing._media import ARROW_FILE, PARQUET
from harness_plugin.cli import main

SPECIAL = [math.inf, -math.inf, None, math.nan]
SPELLED = ["Infinity", "-Infinity", None, "NaN"]


def record(ws, data: bytes, name: str, media_type: str = PARQUET):
    ws.export(name, data)
    store = ws.store()
    return store.locate(ws.record(store, name, media_type=media_type).card.experiment_id).source


def parquet(data: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(data, sink)
    return sink.getvalue()


def strict(line: str) -> object:
    """A line parsed as JSON, which has no NaN or Infinity token."""

    def refuse(token: str) -> object:
        raise ValueError(f"not JSON: {token}")

    return json.loads(line, parse_constant=refuse)


def halves(values: list[float | None]) -> pa.Array:
    """float16 values (pyarrow builds half floats from Python floats only through numpy)."""
    bits = [None if v is None else struct.unpack("<H", struct.pack("<e", v))[0] for v in values]
    return pa.array(bits, pa.uint16()).view(pa.float16())


def exported(tmp_path, source, request: SliceRequest, fmt: str, name: str = "out"):
    path = tmp_path / f"{name}.{fmt}"
    export_slice(source, request, str(path), fmt)
    return path


# -- JSON Lines: NaN, Infinity and -Infinity stay distinguishable, as valid JSON -----------------


@pytest.mark.parametrize(
    "column",
    [pa.array(SPECIAL, pa.float64()), pa.array(SPECIAL, pa.float32()), halves(SPECIAL)],
    ids=["float64", "float32", "float16"],
)
def test_json_lines_spell_non_finite_floats_as_strings(ws, tmp_path, column):
    source = record(ws, parquet(pa.table({"k": range(4), "v": column})), f"f-{column.type}.pq")
    path = exported(tmp_path, source, SliceRequest(), "jsonl")
    rows = [strict(line) for line in path.read_text().splitlines()]
    assert rows == [{"k": k, "v": v} for k, v in enumerate(SPELLED)]
    assert read_slice(source, SliceRequest(where="v is null")).rows == 1


def test_json_lines_spell_non_finite_floats_nested_in_lists_structs_and_maps(ws, tmp_path):
    data = pa.table(
        {
            "l": pa.array([[1.5, math.nan], None, [math.inf]], pa.list_(pa.float32())),
            "s": pa.array([{"x": -math.inf, "y": "a"}, {"x": 2.0, "y": "b"}, None]),
            "m": pa.array([[("a", math.nan)], [("b", 0.5)], []], pa.map_(pa.utf8(), pa.float32())),
            "d": pa.array([math.inf, 1.0, math.inf]).dictionary_encode(),
            "deep": pa.array([[{"z": [math.nan]}], [], [{"z": [3.0]}]]),
            "t": pa.ExtensionArray.from_storage(  # a canonical extension type
                pa.fixed_shape_tensor(pa.float64(), (2,)),
                pa.array(
                    [[0.0, -math.inf], [1.0, 2.0], [math.nan, 3.0]], pa.list_(pa.float64(), 2)
                ),
            ),
        }
    )
    source = record(ws, parquet(data), "nested.pq")
    path = exported(tmp_path, source, SliceRequest(), "jsonl")
    assert [strict(line) for line in path.read_text().splitlines()] == [
        {"l": [1.5, "NaN"], "s": {"x": "-Infinity", "y": "a"}, "m": [["a", "NaN"]],
         "d": "Infinity", "deep": [{"z": ["NaN"]}], "t": [0.0, "-Infinity"]},
        {"l": None, "s": {"x": 2.0, "y": "b"}, "m": [["b", 0.5]], "d": 1.0, "deep": [],
         "t": [1.0, 2.0]},
        {"l": ["Infinity"], "s": None, "m": [], "d": "Infinity", "deep": [{"z": [3.0]}],
         "t": ["NaN", 3.0]},
    ]  # fmt: skip


def test_json_lines_finite_floats_keep_orjson_bytes_across_pieces(ws, tmp_path):
    """Rows past the first 1 MiB piece of a batch are spelled too; finite ones are unchanged."""
    rows = 300_000  # 2.4 MB of float64: three JSON pieces of a batch
    values = [i / 7 for i in range(rows)]
    for i, special in ((0, math.nan), (150_001, math.inf), (rows - 1, -math.inf)):
        values[i] = special
    data = pa.table({"v": pa.array(values, pa.float64())})
    source = record(ws, parquet(data), "long.pq")
    lines = exported(tmp_path, source, SliceRequest(), "jsonl").read_bytes().splitlines()
    assert len(lines) == rows
    assert (lines[0], lines[150_001], lines[-1]) == (
        b'{"v":"NaN"}',
        b'{"v":"Infinity"}',
        b'{"v":"-Infinity"}',
    )
    finite = [i for i in range(rows) if math.isfinite(values[i])]
    assert all(lines[i] == orjson.dumps({"v": values[i]}) for i in finite)


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """A configured project; `recorded(table)` records a Parquet file and gives its id."""
    exports = cli_project(tmp_path, monkeypatch)

    def recorded(data: pa.Table, name: str = "r.parquet") -> str:
        pq.write_table(data, exports / name)
        assert main(["record", "--session", "s1", name, "--title", "T", "--summary", "S",
                     "--query-fingerprint", fingerprint(name), "--source", "w",
                     "--source-version", "v1", "--media-type", PARQUET, "--json"]) == 0  # fmt: skip
        return str(json.loads(capsys.readouterr().out)["experiment_id"])

    return recorded


def test_slice_jsonl_on_stdout_and_to_a_file_spell_non_finite_floats_alike(cli, capsys, tmp_path):
    data = pa.table(
        {"v": pa.array(SPECIAL, pa.float64()), "l": pa.array([[math.nan], [1.0], None, []])}
    )
    experiment = cli(data)
    assert main(["slice", experiment, "--format", "jsonl"]) == 0
    printed = capsys.readouterr().out
    rows = [strict(line) for line in printed.splitlines()]
    assert rows == [
        {"v": "Infinity", "l": ["NaN"]},
        {"v": "-Infinity", "l": [1.0]},
        {"v": None, "l": None},
        {"v": "NaN", "l": []},
    ]
    out = tmp_path / "x.jsonl"
    assert main(["slice", experiment, "--out", str(out)]) == 0
    assert out.read_text() == printed and "wrote 4 rows" in capsys.readouterr().out
    assert main(["slice", experiment, "--where", "v is null", "--format", "jsonl"]) == 0
    assert capsys.readouterr().out == '{"v":null,"l":null}\n'


# -- Parquet: the table's schema metadata, kept where it stays true ----------------------------


def described(data: pa.Table, metadata: dict[str, object]) -> pa.Table:
    return data.replace_schema_metadata(
        {"pandas": json.dumps(metadata), "origin": "lab-7"}  # another key, about every column
    )


PANDAS_LIKE = {
    "index_columns": ["idx", {"kind": "range", "name": "r", "start": 0, "stop": 3, "step": 1}],
    "column_indexes": [],
    "columns": [
        {"name": "n", "field_name": "n", "pandas_type": "int64", "numpy_type": "Int64",
         "metadata": None},
        {"name": "x", "field_name": "x", "pandas_type": "float64", "numpy_type": "float64",
         "metadata": None},
        {"name": "idx", "field_name": "idx", "pandas_type": "unicode", "numpy_type": "object",
         "metadata": None},
    ],
}  # fmt: skip
DATA = pa.table({"n": [2**53 + 1, None, 3], "x": [1.0, 2.0, 3.0], "idx": ["a", "b", "c"]})


def test_parquet_out_keeps_the_schema_metadata_of_a_whole_table(ws, tmp_path):
    source = record(ws, parquet(described(DATA, PANDAS_LIKE)), "whole.pq")
    path = exported(tmp_path, source, SliceRequest(), "parquet")
    assert pq.read_schema(path).metadata == {
        b"pandas": json.dumps(PANDAS_LIKE).encode(),
        b"origin": b"lab-7",
    }


def test_parquet_out_drops_what_metadata_says_of_columns_and_rows_left_out(ws, tmp_path):
    source = record(ws, parquet(described(DATA, PANDAS_LIKE)), "part.pq")
    projected = pq.read_schema(
        exported(tmp_path, source, SliceRequest(columns=("x", "n")), "parquet", "p")
    ).metadata
    assert b"origin" not in projected  # it may speak of a column left out
    pandas = json.loads(projected[b"pandas"])
    assert [c["field_name"] for c in pandas["columns"]] == ["n", "x"]
    assert pandas["index_columns"] == [PANDAS_LIKE["index_columns"][1]]  # every row: 3
    filtered = pq.read_schema(
        exported(tmp_path, source, SliceRequest(where="x > 1"), "parquet", "f")
    ).metadata
    assert filtered[b"origin"] == b"lab-7"
    assert json.loads(filtered[b"pandas"]) == {**PANDAS_LIKE, "index_columns": ["idx"]}


def test_parquet_out_of_a_table_whose_pandas_metadata_is_not_json_leaves_it_out(ws, tmp_path):
    data = DATA.replace_schema_metadata({"pandas": "{not json", "origin": "lab-7"})
    source = record(ws, parquet(data), "bad.pq")
    whole = exported(tmp_path, source, SliceRequest(), "parquet")
    assert pq.read_schema(whole).metadata == {b"origin": b"lab-7"}
    assert pq.read_table(whole).equals(DATA)


def test_parquet_out_of_a_table_with_odd_pandas_metadata_leaves_the_odd_entries_out(ws, tmp_path):
    odd = {
        "index_columns": [["idx"], {"kind": "range", "start": 0, "stop": 10**40, "step": 1}],
        "columns": [{"field_name": ["n"]}, {"name": "x"}, "n", {"field_name": "n"}],
    }
    source = record(ws, parquet(described(DATA, odd)), "odd.pq")
    path = exported(tmp_path, source, SliceRequest(columns=("n", "x")), "parquet")
    pandas = json.loads(pq.read_schema(path).metadata[b"pandas"])
    assert pandas == {"index_columns": [], "columns": [{"name": "x"}, {"field_name": "n"}]}
    assert pq.read_table(path).equals(DATA.select(["n", "x"]))


# -- pandas reads back what it wrote (the oracle) ---------------------------------------------


def frame():
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(
        {"n": pd.array([2**53 + 1, None, 7], dtype="Int64"), "x": [0.5, 2.5, math.nan]},
        index=pd.Index(["a", "b", "c"], name="idx"),
    )


@pytest.mark.parametrize("media_type", [PARQUET, ARROW_FILE])
def test_a_pandas_frame_round_trips_through_slice_out_parquet(ws, tmp_path, media_type):
    df = frame()
    import pandas as pd

    if media_type == PARQUET:
        data = df.to_parquet()
    else:
        sink = io.BytesIO()
        with ipc.new_file(sink, (table := pa.Table.from_pandas(df)).schema) as writer:
            writer.write_table(table)
        data = sink.getvalue()
    source = record(ws, data, "frame", media_type)
    whole = exported(tmp_path, source, SliceRequest(), "parquet", "whole")
    pd.testing.assert_frame_equal(pd.read_parquet(whole), df)
    assert pd.read_parquet(whole)["n"].iloc[0] == 2**53 + 1
    rows = exported(tmp_path, source, SliceRequest(where="x > 1"), "parquet", "rows")
    pd.testing.assert_frame_equal(pd.read_parquet(rows), df.iloc[[1]])
    picked = exported(tmp_path, source, SliceRequest(columns=("n",)), "parquet", "pick")
    expected = df[["n"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(pd.read_parquet(picked), expected)
    assert json.loads(pq.read_schema(picked).metadata[b"pandas"])["index_columns"] == []


def test_slice_out_parquet_keeps_a_range_index_only_with_every_row(cli, tmp_path):
    df = frame().reset_index()
    import pandas as pd

    df.index = pd.RangeIndex(10, 16, 2, name="r")
    experiment = cli(pa.Table.from_pandas(df))
    whole, some = tmp_path / "whole.parquet", tmp_path / "some.parquet"
    assert main(["slice", experiment, "--out", str(whole)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(whole), df)
    assert main(["slice", experiment, "--where", "idx != 'a'", "--out", str(some)]) == 0
    assert json.loads(pq.read_schema(some).metadata[b"pandas"])["index_columns"] == []
    pd.testing.assert_frame_equal(pd.read_parquet(some), df.iloc[1:].reset_index(drop=True))
