"""Slices streamed into a file (issue 10 item 11), through the API: `export_slice`.

An export is bounded by `ExportLimits`, not by the in-memory slice bounds: a result of more rows
than `max_rows` and more bytes than `max_bytes` is written whole, and equals a full pyarrow read
of the source filtered the same way, for Parquet, CSV and JSON Lines sources and outputs. It is
decoded and encoded in the bounded child, which writes the staged file; the file appears only
complete: an error, a hostile table, a timeout or a write failure mid-stream leaves neither the
file nor a staged leftover. `read_slice` keeps its bounds whatever the export bounds are.
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

from cards.errors import (
    ConfigError,
    FilterTypeError,
    IntegrityError,
    InvalidInput,
    LimitExceeded,
    SliceTimeout,
    TableTooLarge,
    TableUnreadable,
    UnknownColumn,
)
from cas.slicing import ExportLimits, SliceLimits, SliceRequest, export_slice, read_slice
from cas.slicing._media import CSV, JSONL, PARQUET
from harness_plugin.config import SliceConfig

ROWS = 30_000
MIB = 1 << 20
WHERE = "cohort != 'c1' and value >= 100"
SMALL = SliceLimits().lowered(max_rows=1000, max_bytes=64 * 1024)  # the in-memory bounds
EXPRESSION = (pc.field("cohort") != "c1") & (pc.field("value") >= 100)


def _hostile():
    """The bomb builders of `test_hostile_tables`, one source of truth for hostile files."""
    spec = importlib.util.spec_from_file_location(
        "hostile_tables_builders", Path(__file__).with_name("test_hostile_tables.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


HOSTILE = _hostile()


def table(rows: int = ROWS) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(range(rows), pa.int64()),
            "cohort": pa.array([f"c{i % 3}" for i in range(rows)]),
            "value": pa.array([i / 10 for i in range(rows)]),
        }
    )


def encoded(data: pa.Table, media_type: str) -> bytes:
    sink = io.BytesIO()
    if media_type == PARQUET:
        pq.write_table(data, sink, row_group_size=4000)
    elif media_type == CSV:
        pacsv.write_csv(data, sink)
    else:
        sink.write(b"".join(orjson.dumps(row) + b"\n" for row in data.to_pylist()))
    return sink.getvalue()


def full_read(path: Path, media_type: str) -> pa.Table:
    """The whole file, read by pyarrow as a person would."""
    if media_type == PARQUET:
        return pq.read_table(path)
    if media_type == CSV:
        return pacsv.read_csv(path)
    return pajson.read_json(path)


FORMAT_MEDIA = {"parquet": PARQUET, "csv": CSV, "jsonl": JSONL}


def record(ws, data: bytes, media_type: str, name: str):
    ws.export(name, data)
    store = ws.store()
    return store.locate(ws.record(store, name, media_type=media_type).card.experiment_id).source


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "out"
    directory.mkdir()
    return directory


# -- beyond the slice bounds, equal to a full read ---------------------------------------------


@pytest.mark.parametrize("source_type", [PARQUET, CSV, JSONL])
@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_an_export_beyond_the_slice_bounds_equals_a_filtered_full_read(
    ws, out_dir, source_type, fmt
):
    data = encoded(table(), source_type)
    source = record(ws, data, source_type, f"t-{fmt}")
    (out_dir.parent / "source").write_bytes(data)
    expected = full_read(out_dir.parent / "source", source_type).filter(EXPRESSION)
    expected = expected.select(["k", "value"])
    request = SliceRequest(columns=("k", "value"), where=WHERE)
    path = out_dir / f"rows.{fmt}"
    result = export_slice(source, request, str(path), fmt, limits=SMALL)
    assert result.rows == expected.num_rows > SMALL.max_rows
    # The expected rows were filtered through Acero, which allocates validity bitmaps for
    # columns without nulls (1 bit a row); the slice's mask filter does not.
    assert result.bytes > SMALL.max_bytes and result.bytes == pytest.approx(expected.nbytes, 0.03)
    assert not result.truncated and result.truncated_reason is None
    assert result.file_bytes == path.stat().st_size and result.columns == ["k", "value"]
    assert result.chunks_verified >= 1 and result.bytes_read >= len(data)
    assert full_read(path, FORMAT_MEDIA[fmt]).equals(expected)
    assert leftovers(out_dir) == [path.name]
    in_memory = read_slice(source, request, limits=SMALL)  # the tool path keeps its bounds
    assert in_memory.rows == SMALL.max_rows and in_memory.truncated_reason == "row_limit"


def test_csv_and_json_lines_match_what_a_slice_in_memory_encodes(ws, out_dir):
    """The same bytes as `artmem slice --format csv|jsonl` prints (pyarrow's writer, orjson)."""
    source = record(ws, encoded(table(), PARQUET), PARQUET, "same")
    request = SliceRequest(where="k < 700")
    rows = read_slice(source, request).table
    export_slice(source, request, str(out_dir / "a.csv"), "csv")
    sink = io.BytesIO()
    pacsv.write_csv(rows, sink)
    assert (out_dir / "a.csv").read_bytes() == sink.getvalue()
    export_slice(source, request, str(out_dir / "a.jsonl"), "jsonl")
    lines = b"".join(orjson.dumps(row, default=str) + b"\n" for row in rows.to_pylist())
    assert (out_dir / "a.jsonl").read_bytes() == lines


def test_offset_limit_and_the_export_byte_ceiling_cut_the_file_where_a_slice_would(ws, out_dir):
    source = record(ws, encoded(table(), PARQUET), PARQUET, "paged")
    expected = table().filter(EXPRESSION)
    paged = export_slice(
        source, SliceRequest(where=WHERE, offset=500, limit=5000), str(out_dir / "p.parquet"),
        "parquet", limits=SMALL,
    )  # fmt: skip
    assert paged.rows == 5000 and paged.truncated_reason == "row_limit"
    assert pq.read_table(out_dir / "p.parquet").equals(expected.slice(500, 5000))
    capped = SMALL.with_export(ExportLimits(max_bytes=100_000))
    cut = export_slice(source, SliceRequest(where=WHERE), str(out_dir / "c.csv"), "csv",
                       limits=capped)  # fmt: skip
    assert cut.truncated_reason == "byte_budget" and cut.bytes <= 100_000 < expected.nbytes
    assert pacsv.read_csv(out_dir / "c.csv").equals(expected.slice(0, cut.rows))
    with pytest.raises(LimitExceeded, match="above the configured maximum"):
        export_slice(source, SliceRequest(max_bytes=200_000), str(out_dir / "x.csv"), "csv",
                     limits=capped)  # fmt: skip
    rows_capped = SMALL.with_export(ExportLimits(max_rows=2000))
    with pytest.raises(LimitExceeded):
        export_slice(source, SliceRequest(limit=2001), str(out_dir / "y.csv"), "csv",
                     limits=rows_capped)  # fmt: skip
    assert leftovers(out_dir) == ["c.csv", "p.parquet"]


def test_an_empty_result_is_a_valid_empty_file(ws, out_dir):
    source = record(ws, encoded(table(), PARQUET), PARQUET, "empty")
    for fmt in ("parquet", "csv", "jsonl"):
        path = out_dir / f"none.{fmt}"
        result = export_slice(source, SliceRequest(where="k < 0"), str(path), fmt)
        assert result.rows == 0 and not result.truncated
    assert pq.read_table(out_dir / "none.parquet").schema.names == ["k", "cohort", "value"]
    assert (out_dir / "none.csv").read_text() == '"k","cohort","value"\n'
    assert (out_dir / "none.jsonl").read_bytes() == b""


# -- refused before anything is written --------------------------------------------------------


def test_an_existing_file_is_never_replaced(ws, out_dir):
    source = record(ws, encoded(table(), PARQUET), PARQUET, "exists")
    path = out_dir / "there.csv"
    path.write_text("mine")
    with pytest.raises(FileExistsError):
        export_slice(source, SliceRequest(), str(path), "csv")
    assert path.read_text() == "mine" and leftovers(out_dir) == ["there.csv"]


def test_request_errors_keep_their_facts_and_leave_nothing(ws, out_dir):
    source = record(ws, encoded(table(), PARQUET), PARQUET, "errors")
    with pytest.raises(UnknownColumn, match="available"):
        export_slice(source, SliceRequest(columns=("nope",)), str(out_dir / "a.csv"), "csv")
    with pytest.raises(FilterTypeError):
        export_slice(source, SliceRequest(where="cohort > 3"), str(out_dir / "b.csv"), "csv")
    with pytest.raises(InvalidInput, match="cannot export as"):
        export_slice(source, SliceRequest(), str(out_dir / "c.txt"), "table")
    nested = pa.table({"k": [1, 2], "l": [[1], [2, 3]]})
    lists = record(ws, encoded(nested, PARQUET), PARQUET, "nested")
    with pytest.raises(InvalidInput, match="csv cannot hold a column"):
        export_slice(lists, SliceRequest(), str(out_dir / "d.csv"), "csv")
    export_slice(lists, SliceRequest(), str(out_dir / "d.jsonl"), "jsonl")  # JSON holds lists
    assert (out_dir / "d.jsonl").read_text().splitlines()[1] == '{"k":2,"l":[2,3]}'
    assert leftovers(out_dir) == ["d.jsonl"]


def test_a_missing_directory_is_a_typed_error(ws, tmp_path):
    source = record(ws, encoded(table(10), PARQUET), PARQUET, "nodir")
    with pytest.raises(OSError, match="output directory") as caught:
        export_slice(source, SliceRequest(), str(tmp_path / "no" / "x.csv"), "csv")
    assert caught.value.code == "cas.io"  # type: ignore[attr-defined]


# -- failures mid-stream leave no file ---------------------------------------------------------


def test_a_ragged_row_deep_in_a_csv_leaves_no_file(ws, out_dir):
    good = encoded(table(200_000), CSV)  # 5 MB: 2 MB are written before the row is parsed
    source = record(ws, good + b"1,c0,2.5,extra\n", CSV, "ragged.csv")
    limits = SliceLimits().lowered(max_memory_bytes=64 * MIB)
    with pytest.raises(TableUnreadable, match="as many values as the header names"):
        export_slice(source, SliceRequest(), str(out_dir / "r.csv"), "csv", limits=limits)
    assert leftovers(out_dir) == []


def test_a_flipped_byte_in_a_late_chunk_leaves_no_file(ws, out_dir):
    data = encoded(table(300_000), JSONL)  # read front to back: 12 MB are written by chunk 3
    assert len(data) > 8 * MIB
    source = record(ws, data, JSONL, "late.jsonl")
    with open(source.path, "r+b") as handle:
        os.chmod(source.path, 0o600)
        handle.seek(len(data) - 100)
        byte = handle.read(1)
        handle.seek(len(data) - 100)
        handle.write(bytes([byte[0] ^ 0x01]))
    for fmt in ("csv", "jsonl"):
        with pytest.raises(IntegrityError):
            export_slice(source, SliceRequest(), str(out_dir / f"late.{fmt}"), fmt)
    assert leftovers(out_dir) == []


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {name: HOSTILE.BOMBS[name][0]() for name in ("ipc_zeros", "parquet_expansion")}


@pytest.mark.parametrize("name", ["ipc_zeros", "parquet_expansion"])
def test_a_bomb_exported_is_too_large_and_leaves_no_file(ws, out_dir, bombs, name):
    _, media_type, where = HOSTILE.BOMBS[name]
    source = record(ws, bombs[name], media_type, name)
    limits = SliceLimits().lowered(max_memory_bytes=64 * MIB)
    for request in (SliceRequest(), SliceRequest(where=where)):
        with pytest.raises(TableTooLarge):
            export_slice(source, request, str(out_dir / "bomb.parquet"), "parquet", limits=limits)
    assert leftovers(out_dir) == []


def test_an_endless_export_stops_at_its_time_budget_and_leaves_no_file(ws, out_dir):
    """10^9 rows cannot be written in a second: the child is killed, the stage removed."""
    source = record(ws, HOSTILE.parquet_rows(), PARQUET, "rows")
    limits = SliceLimits().with_export(ExportLimits(max_seconds=1))
    with pytest.raises(SliceTimeout) as caught:
        export_slice(source, SliceRequest(), str(out_dir / "rows.csv"), "csv", limits=limits)
    assert caught.value.limit == 1 and leftovers(out_dir) == []


# -- the bounds are configured apart ----------------------------------------------------------


def test_export_bounds_are_strict_and_apart_from_the_slice_bounds():
    defaults = SliceConfig().resolve()
    assert defaults.export == ExportLimits(max_rows=None, max_bytes=64 << 30, max_seconds=3600)
    assert (defaults.max_rows, defaults.max_seconds) == (100_000, 30)
    raised = SliceConfig(
        max_rows=10, export_max_rows=10**12, export_max_bytes=1 << 45, export_max_seconds=86_400
    ).resolve()
    assert raised.max_rows == 10 and raised.export.max_rows == 10**12
    assert (raised.export.max_bytes, raised.export.max_seconds) == (1 << 45, 86_400)
    for bad in (
        {"export_max_rows": 0},
        {"export_max_bytes": -1},
        {"export_max_seconds": 8 * 86_400},
        {"export_max_bytes": 2**63},
        {"max_rows": 100_001},  # the slice bounds still only go down
    ):
        with pytest.raises(ConfigError):
            SliceConfig(**bad).resolve()
    with pytest.raises(ConfigError):
        ExportLimits(max_seconds=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a known limit"):
        SliceLimits().lowered(export=1)


def test_mutants_exported_end_in_a_file_or_a_typed_error_and_no_leftover(ws, out_dir):
    """Seeded mutants of valid Parquet and Arrow files, streamed out as CSV and Parquet."""
    written = []
    for number, (media_type, data) in enumerate(HOSTILE.mutants(16, seed=11)):
        source = record(ws, data, media_type, f"mutant-{number}")
        for fmt, request in (("csv", SliceRequest()), ("parquet", SliceRequest(where="k > 100"))):
            path = out_dir / f"m{number}.{fmt}"
            try:
                export_slice(source, request, str(path), fmt)
            except (*HOSTILE.TYPED, InvalidInput) as exc:
                assert not path.exists(), f"mutant {number}: {exc!r}"
            else:
                written.append(path.name)
    assert leftovers(out_dir) == sorted(written)
