"""Slicing recorded tables: bounds, pushdown, verified partial reads, hostile files, errors."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from filter_helpers import compile_filter
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cards.errors import (
    ArtifactError,
    ConfigError,
    ErrorCode,
    FilterSyntaxError,
    FilterTypeError,
    IntegrityError,
    InvalidInput,
    LimitExceeded,
    ObjectMissing,
    SliceTimeout,
    StoreIOError,
    TableTooLarge,
    TableUnreadable,
    UnknownColumn,
    UnsupportedMediaType,
)
from cas import Located
from cas._sniff import MediaTypeMismatch
from cas.slicing._answer import Answer, Bounds
from cas.slicing._expr import parse_filter
from cas.slicing._isolated import run_bounded
from cas.slicing._reader import load_manifest, verified_object
from cas.slicing._slice import (
    BYTE_BUDGET,
    ROW_LIMIT,
    SliceLimits,
    SliceRequest,
    SliceResult,
    describe,
    read_slice,
)
from cas.slicing._tables import ARROW_FILE, PARQUET
from fsedge import CHUNK_BYTES

MIB = 1 << 20


# -- helpers ----------------------------------------------------------------------------------


def parquet_bytes(table: pa.Table, **options: object) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def ipc_bytes(table: pa.Table, chunk_rows: int | None = None, compression=None) -> bytes:
    sink = io.BytesIO()
    options = ipc.IpcWriteOptions(compression=compression)
    with ipc.new_file(sink, table.schema, options=options) as writer:
        for batch in table.to_batches(max_chunksize=chunk_rows):
            writer.write_batch(batch)
    return sink.getvalue()


def record(ws, store, data: bytes, media_type: str = PARQUET) -> Located:
    """Record `data`; bytes that contradict `media_type` (record refuses them) are recorded
    as octet-stream and handed to the reader as a source that claims `media_type` anyway,
    so the readers' own defences stay tested."""
    name = "t-" + hashlib.sha256(data).hexdigest()[:16]
    ws.export(name, data)
    try:
        recorded = ws.record(store, name, media_type=media_type)
    except MediaTypeMismatch:
        recorded = ws.record(store, name, media_type="application/octet-stream")
        located = store.locate(recorded.card.experiment_id)
        claimed = msgspec.structs.replace(located.source, media_type=media_type)
        return msgspec.structs.replace(located, source=claimed)
    return store.locate(recorded.card.experiment_id)


def sliced(source: Located, limits: SliceLimits | None = None, **request) -> SliceResult:
    return read_slice(source.source, SliceRequest(**request), limits=limits)


def keyed(rows: int, **extra: pa.Array) -> pa.Table:
    """A table with a sorted int64 key, a nullable float, a string with few values."""
    key = pa.array(range(rows), pa.int64())
    columns = {
        "k": key,
        "x": pa.array([None if i % 7 == 3 else i / 4 for i in range(rows)], pa.float64()),
        "s": pa.array([f"v{i % 11}" for i in range(rows)]),
    }
    return pa.table({**columns, **extra})


def flip_byte(path: str, offset: int) -> None:
    os.chmod(path, 0o600)
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.chmod(path, 0o400)


def selection(table: pa.Table, request: SliceRequest) -> pa.Table:
    """What a slice must return, computed from a full read."""
    if request.where is not None:
        table = table.filter(compile_filter(parse_filter(request.where), table.schema))
    table = table.slice(request.offset)  # before projecting: a table of no columns ignores it
    if request.columns is not None:
        table = table.select(list(request.columns))
    return table


@pytest.fixture
def store(ws):
    return ws.store()


@pytest.fixture(params=[PARQUET, ARROW_FILE], ids=["parquet", "ipc"])
def media_type(request):
    return request.param


def table_bytes(table: pa.Table, media_type: str, rows_per_group: int) -> bytes:
    if media_type == PARQUET:
        return parquet_bytes(table, row_group_size=rows_per_group)
    return ipc_bytes(table, chunk_rows=rows_per_group)


# -- behaviour --------------------------------------------------------------------------------


def test_a_slice_projects_filters_and_keeps_file_order(ws, store, media_type):
    table = keyed(1000)
    source = record(ws, store, table_bytes(table, media_type, 100), media_type)
    result = sliced(source, columns=("s", "k"), where="k >= 250 and s in ('v1', 'v2')")
    assert result.columns == ["s", "k"] and result.table.column_names == ["s", "k"]
    expected = [k for k in range(250, 1000) if k % 11 in (1, 2)]
    assert result.table.column("k").to_pylist() == expected
    assert result.rows == len(expected) and not result.truncated
    assert result.truncated_reason is None and result.bytes == result.table.nbytes


def test_all_columns_by_default_in_schema_order(ws, store, media_type):
    table = keyed(50)
    source = record(ws, store, table_bytes(table, media_type, 10), media_type)
    result = sliced(source)
    assert result.columns == ["k", "x", "s"]
    assert result.table.to_pylist() == table.to_pylist()


def test_an_empty_projection_still_counts_rows(ws, store, media_type):
    source = record(ws, store, table_bytes(keyed(300), media_type, 64), media_type)
    result = sliced(source, columns=(), where="k < 100")
    assert result.rows == 100 and result.columns == [] and result.table.num_rows == 100


def test_pages_concatenate_to_the_whole_selection(ws, store, media_type):
    table = keyed(997)
    source = record(ws, store, table_bytes(table, media_type, 128), media_type)
    pages = [sliced(source, where="x is not null", limit=100, offset=o) for o in range(0, 900, 100)]
    keys = [k for page in pages for k in page.table.column("k").to_pylist()]
    assert keys == [k for k in range(997) if k % 7 != 3]
    assert all(page.truncated_reason == ROW_LIMIT for page in pages[:-1])
    assert not pages[-1].truncated and pages[-1].rows == len(keys) - 800


def test_the_row_limit_truncates_and_says_so(ws, store, media_type):
    source = record(ws, store, table_bytes(keyed(500), media_type, 100), media_type)
    result = sliced(source, columns=("k",), limit=42, offset=7)
    assert result.table.column("k").to_pylist() == list(range(7, 49))
    assert result.truncated and result.truncated_reason == ROW_LIMIT
    fewer = sliced(source, columns=("k",), limit=100, offset=450)
    assert fewer.rows == 50 and not fewer.truncated


def test_reaching_the_limit_exactly_reports_truncation_without_looking_further(ws, store):
    source = record(ws, store, parquet_bytes(keyed(200), row_group_size=100))
    result = sliced(source, columns=("k",), limit=100)
    assert result.rows == 100 and result.truncated_reason == ROW_LIMIT
    assert result.batches_read == 1


def test_the_byte_budget_keeps_a_prefix_within_it(ws, store, media_type):
    table = keyed(2000)
    source = record(ws, store, table_bytes(table, media_type, 500), media_type)
    result = sliced(source, columns=("k", "s"), max_bytes=5000)
    assert result.truncated_reason == BYTE_BUDGET and 0 < result.rows < 2000
    assert result.bytes <= 5000 and result.table.nbytes == result.bytes
    assert result.table.to_pylist() == table.select(["k", "s"]).slice(0, result.rows).to_pylist()
    assert result.bytes > 5000 - 100  # the next row (about 20 bytes) would not have fitted


def test_a_zero_limit_reads_no_batch(ws, store):
    source = record(ws, store, parquet_bytes(keyed(100)))
    result = sliced(source, columns=("k", "x"), limit=0)
    assert result.rows == 0 and result.columns == ["k", "x"] and result.batches_read == 0
    assert result.truncated_reason == ROW_LIMIT


def test_request_defaults_follow_the_operator_limits(ws, store):
    source = record(ws, store, parquet_bytes(keyed(100)))
    limits = SliceLimits().lowered(max_rows=10, max_bytes=1 << 16)
    result = sliced(source, limits=limits)
    assert result.rows == 10 and result.truncated_reason == ROW_LIMIT
    with pytest.raises(LimitExceeded) as caught:
        sliced(source, limits=limits, limit=11)
    assert caught.value.limit == 10


def test_the_experiment_helpers_locate_the_object(ws, store):
    data = parquet_bytes(keyed(100))
    ws.export("r.parquet", data)
    card = ws.record(store, "r.parquet", media_type=PARQUET).card
    result = read_slice(store.locate(card.experiment_id).source, SliceRequest(where="k = 5"))
    assert result.table.column("k").to_pylist() == [5]
    assert describe(store.locate(card.experiment_id).source).num_rows == 100
    source = store.locate(card.experiment_id)
    assert Path(source.source.path).read_bytes() == data and source.card == card


# -- slices agree with a full read ------------------------------------------------------------

WHERE = st.sampled_from(
    [
        None,
        "k >= {a}",
        "k < {a} or k > {b}",
        "i is null",
        "i is not null and i < {c}",
        "not (i in ({c}, 3, 5))",
        "i not in ({c}, 2)",
        "s = 'v{c}' or f > 1.5",
        "b",
        "not b or s >= 'v4'",
        "f <= {c} and k <= {b}",
    ]
)


@st.composite
def cases(draw):
    rows = draw(st.integers(0, 120))
    values = {
        "k": pa.array(range(rows), pa.int64()),
        "i": pa.array(draw(st.lists(st.none() | st.integers(0, 6), min_size=rows, max_size=rows)),
                      pa.int32()),
        "f": pa.array(draw(st.lists(st.none() | st.floats(-4, 4, width=32), min_size=rows,
                                    max_size=rows)), pa.float64()),
        "s": pa.array(draw(st.lists(st.none() | st.sampled_from(["v1", "v2", "v4", "w"]),
                                    min_size=rows, max_size=rows)), pa.string()),
        "b": pa.array(draw(st.lists(st.none() | st.booleans(), min_size=rows, max_size=rows)),
                      pa.bool_()),
    }  # fmt: skip
    table = pa.table(values)
    names = draw(st.one_of(st.none(), st.permutations(table.column_names).flatmap(
        lambda order: st.integers(0, len(order)).map(lambda n: tuple(order[:n])))))  # fmt: skip
    template = draw(WHERE)
    where = None
    if template is not None:
        a, b, c = draw(st.integers(0, 130)), draw(st.integers(0, 130)), draw(st.integers(0, 6))
        where = template.format(a=a, b=b, c=c)
    request = SliceRequest(
        columns=names,
        where=where,
        limit=draw(st.integers(0, 130)),
        offset=draw(st.integers(0, 130)),
        max_bytes=draw(st.sampled_from([1, 64, 300, 2000, 1 << 20])),
    )
    return table, request, draw(st.integers(1, 40)), draw(st.sampled_from([PARQUET, ARROW_FILE]))


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_slices_agree_with_the_same_selection_from_a_full_read(ws, case):
    table, request, group_rows, media_type = case
    data = table_bytes(table, media_type, group_rows)
    result = sliced(record(ws, ws.store(), data, media_type), **vars_of(request))
    expected = selection(table, request)
    assert result.columns == (list(request.columns) if request.columns is not None else
                              table.column_names)  # fmt: skip
    assert result.rows <= request.limit and result.bytes <= request.max_bytes
    assert result.table.to_pylist() == expected.slice(0, result.rows).to_pylist()
    if not result.truncated:
        assert result.rows == expected.num_rows
    elif result.truncated_reason == ROW_LIMIT:
        assert result.rows == request.limit
    if expected.num_rows > request.limit:
        assert result.truncated


def vars_of(request: SliceRequest) -> dict[str, object]:
    return {name: getattr(request, name) for name in request.__struct_fields__}


# -- pushdown and early stops (asserted on what was read, never on time) ----------------------


@functools.cache
def big_table() -> pa.Table:
    """2,000,000 rows like `keyed` (no nulls in x), built by compute kernels: fast to make."""
    rows = 2_000_000
    key = pa.array(range(rows), pa.int64())
    digit = pc.subtract(key, pc.multiply(pc.divide(key, 11), 11))
    return pa.table(
        {
            "k": key,
            "x": pc.random(rows),
            "s": pc.binary_join_element_wise("v", pc.cast(digit, pa.string()), ""),
            "noise": pc.random(rows),
            "more": pc.random(rows),
        }
    )


@functools.cache
def big_bytes(media_type: str) -> bytes:
    """About 70 MB in row groups (or record batches) of 20,000 rows: seventeen 4 MiB chunks."""
    if media_type == PARQUET:
        return parquet_bytes(big_table(), row_group_size=20_000, compression="none")
    return ipc_bytes(big_table(), chunk_rows=20_000)


def test_statistics_prune_row_groups(ws, store):
    source = record(ws, store, big_bytes(PARQUET))
    pruned = sliced(source, columns=("k",), where="k >= 1500000 and k < 1500100")
    assert pruned.table.column("k").to_pylist() == list(range(1_500_000, 1_500_100))
    assert pruned.chunks_verified <= 2  # one row group of 100, and the footer
    unprunable = sliced(
        source, columns=("k",), where="(k >= 1500000 and k < 1500100) or x = 0.123456789"
    )
    assert unprunable.rows == 100 and unprunable.chunks_verified > 5 * pruned.chunks_verified


def test_the_row_limit_stops_reading_at_once(ws, store, media_type):
    source = record(ws, store, big_bytes(media_type), media_type)
    assert source.card.artifact.bytes > 16 * CHUNK_BYTES
    result = sliced(source, where="s = 'v3'", limit=10)
    assert result.rows == 10 and result.batches_read == 1
    # One batch (at most 131,072 rows, about 4.6 MB here) and the footer.
    assert result.chunks_verified <= 4
    unfiltered = sliced(source, limit=10)  # every row is kept: the batch is small too
    assert unfiltered.rows == 10 and unfiltered.chunks_verified <= 2


def test_the_byte_budget_stops_reading_at_once(ws, store, media_type):
    source = record(ws, store, big_bytes(media_type), media_type)
    result = sliced(source, max_bytes=100_000, where="x >= 0")
    assert result.truncated_reason == BYTE_BUDGET and result.batches_read == 1
    assert result.chunks_verified <= 4 and result.bytes <= 100_000


def test_an_offset_without_a_filter_skips_whole_row_groups_unread(ws, store):
    source = record(ws, store, big_bytes(PARQUET))
    result = sliced(source, columns=("k",), offset=1_990_005, limit=5)
    assert result.table.column("k").to_pylist() == list(range(1_990_005, 1_990_010))
    assert result.batches_read == 1 and result.chunks_verified <= 2


def test_a_one_percent_slice_hashes_a_small_fraction_of_a_large_object(ws, store):
    rows = 2_800_000
    table = pa.table(
        {
            "k": pa.array(range(rows), pa.int64()),
            "a": pc.random(rows),
            "b": pc.random(rows),
            "c": pc.random(rows),
        }
    )
    source = record(ws, store, parquet_bytes(table, row_group_size=100_000, compression="none"))
    size = source.card.artifact.bytes
    assert size >= 64 * MIB
    low = rows // 2
    result = sliced(source, columns=("k", "a"), where=f"k >= {low} and k < {low + rows // 100}")
    assert result.rows == rows // 100
    hashed = result.chunks_verified * CHUNK_BYTES
    assert result.bytes_read <= hashed and hashed <= 0.15 * size


# -- verified partial reads -------------------------------------------------------------------


def test_a_flipped_byte_in_a_chunk_the_slice_reads_fails_closed(ws, store):
    data = big_bytes(PARQUET)
    source = record(ws, store, data)
    meta = pq.read_metadata(pa.BufferReader(data))
    footer_chunk = (len(data) - 1) // CHUNK_BYTES
    group, offset = next(
        (g, meta.row_group(g).column(0).data_page_offset)
        for g in range(meta.num_row_groups)
        if 0 < meta.row_group(g).column(0).data_page_offset // CHUNK_BYTES < footer_chunk
    )
    flip_byte(source.source.path, offset + 100)
    untouched = sliced(source, columns=("k",), limit=5)  # the first row group and the footer
    assert untouched.table.column("k").to_pylist() == list(range(5))
    low = group * 20_000
    with pytest.raises(IntegrityError, match="chunk"):
        sliced(source, columns=("k",), where=f"k >= {low} and k < {low + 10}")


def test_a_flipped_byte_in_the_footer_fails_every_slice(ws, store):
    source = record(ws, store, parquet_bytes(keyed(1000)))
    flip_byte(source.source.path, source.card.artifact.bytes - 20)
    with pytest.raises(IntegrityError):
        sliced(source, limit=1)
    with pytest.raises(IntegrityError):
        describe(source.source)


def test_a_manifest_not_bound_by_the_card_is_refused(ws, store):
    source = record(ws, store, parquet_bytes(keyed(100)))
    os.chmod(source.source.manifest_path, 0o600)
    with open(source.source.manifest_path, "ab") as handle:
        handle.write(b" ")
    with pytest.raises(IntegrityError, match="manifest"):
        sliced(source)
    with pytest.raises(IntegrityError, match="manifest"):
        store.locate(source.card.experiment_id)


def test_a_missing_manifest_is_an_integrity_failure(ws, store):
    source = record(ws, store, parquet_bytes(keyed(100)))
    os.unlink(source.source.manifest_path)
    with pytest.raises(IntegrityError, match="missing"):
        sliced(source)


def test_a_shortened_object_is_an_integrity_failure(ws, store):
    source = record(ws, store, parquet_bytes(keyed(100)))
    os.chmod(source.source.path, 0o600)
    os.truncate(source.source.path, source.card.artifact.bytes - 1)
    with pytest.raises(IntegrityError, match="size"):
        sliced(source)


def test_a_missing_object_is_reported_as_missing(ws, store):
    source = record(ws, store, parquet_bytes(keyed(100)))
    os.unlink(source.source.path)
    with pytest.raises(ObjectMissing):
        sliced(source)
    with pytest.raises(ObjectMissing):
        store.locate(source.card.experiment_id)


# -- hostile and corrupt files ----------------------------------------------------------------


def test_a_file_without_the_parquet_magic_is_unreadable(ws, store):
    data = parquet_bytes(keyed(100))[:-4] + b"NOPE"
    ws.export("no-magic", data)
    with pytest.raises(InvalidInput, match="magic"):  # record refuses the contradiction
        ws.record(store, "no-magic", media_type=PARQUET)
    # The reader's own check still holds for a source that claims Parquet regardless.
    with pytest.raises(TableUnreadable, match="magic") as caught:
        sliced(record(ws, store, data))
    assert caught.value.code == ErrorCode.TABLE_UNREADABLE


def test_a_truncated_file_is_unreadable(ws, store):
    data = parquet_bytes(keyed(1000))
    with pytest.raises(TableUnreadable):
        sliced(record(ws, store, data[: len(data) // 2]))
    with pytest.raises(TableUnreadable, match="too short"):
        sliced(record(ws, store, b"PAR1"))


def test_an_impossible_footer_length_is_unreadable(ws, store):
    data = parquet_bytes(keyed(100))
    forged = data[:-8] + (2**31 - 1).to_bytes(4, "little") + b"PAR1"
    with pytest.raises(TableUnreadable, match="impossible"):
        sliced(record(ws, store, forged))


def test_a_footer_over_the_bound_is_refused_before_parsing(ws, store):
    source = record(ws, store, parquet_bytes(keyed(100)))
    limits = SliceLimits().lowered(max_footer_bytes=64)
    with pytest.raises(TableTooLarge, match="footer") as caught:
        sliced(source, limits=limits)
    assert caught.value.limit == 64 and isinstance(caught.value, LimitExceeded)
    with pytest.raises(TableTooLarge):
        describe(source.source, limits=limits)


def test_a_garbage_footer_is_unreadable(ws, store):
    data = parquet_bytes(keyed(100))
    length = int.from_bytes(data[-8:-4], "little")
    garbage = bytes((i * 37 + 11) % 256 for i in range(length))
    forged = data[: -8 - length] + garbage + data[-8:]
    with pytest.raises(TableUnreadable):
        sliced(record(ws, store, forged))


def test_thousands_of_columns_are_refused(ws, store):
    column = pa.array([1], pa.int8())
    wide = pa.table([column] * 10_001, names=[f"c{i}" for i in range(10_001)])
    source = record(ws, store, parquet_bytes(wide, write_statistics=False))
    with pytest.raises(TableTooLarge, match="10001 columns"):
        sliced(source, columns=("c1",))
    with pytest.raises(TableTooLarge):
        describe(source.source)


def test_the_column_bound_applies_to_ipc_too(ws, store):
    table = pa.table({f"c{i}": [i] for i in range(30)})
    source = record(ws, store, ipc_bytes(table), ARROW_FILE)
    with pytest.raises(TableTooLarge):
        sliced(source, limits=SliceLimits().lowered(max_columns=20))


def test_one_huge_row_group_is_read_a_page_at_a_time(ws, store):
    rows = 1_500_000
    table = pa.table({"k": pa.array(range(rows), pa.int64()), "r": pc.random(rows)})
    source = record(ws, store, parquet_bytes(table, row_group_size=rows, compression="none"))
    size = source.card.artifact.bytes
    assert pq.read_metadata(source.source.path).num_row_groups == 1 and size > 5 * CHUNK_BYTES
    first = sliced(source, columns=("k",), limit=10)
    assert first.rows == 10 and first.batches_read == 1 and first.chunks_verified <= 2
    both = sliced(source, limit=10)  # the start of each column, and the footer
    assert both.rows == 10 and both.chunks_verified <= 4 < size / CHUNK_BYTES
    filtered = sliced(source, columns=("k",), where="r < 0.5", limit=10)  # one batch of pages
    assert filtered.rows == 10 and filtered.chunks_verified <= 5 < size / CHUNK_BYTES
    budget = sliced(source, max_bytes=4096)
    assert budget.truncated_reason == BYTE_BUDGET and budget.bytes <= 4096


def test_a_single_read_over_the_bound_is_refused(ws, store):
    table = pa.table({"r": pc.random(200_000)})
    source = record(ws, store, ipc_bytes(table), ARROW_FILE)
    with pytest.raises(TableTooLarge, match="single read"):
        sliced(source, limits=SliceLimits().lowered(max_read_bytes=64 * 1024))


def test_garbage_is_not_an_arrow_file(ws, store):
    data = ipc_bytes(keyed(100))
    with pytest.raises(TableUnreadable):
        sliced(record(ws, store, data[:8] + b"\x00" * (len(data) - 16) + data[-8:], ARROW_FILE))
    with pytest.raises(TableUnreadable, match="magic"):
        sliced(record(ws, store, parquet_bytes(keyed(100)), ARROW_FILE))


# A one-byte change to a pyarrow 26 footer: the column's physical type then disagrees with the
# schema. pyarrow aborts the process when it meets this through its metadata accessors.
_CRASH_TABLE = pa.table(
    {"k": pa.array(range(100), pa.int64()), "s": [str(i % 7) for i in range(100)]}
)
_CRASH_OFFSET, _CRASH_VALUE = 18, 2
_CRASH_PROBE = """
import sys, pyarrow as pa, pyarrow.dataset as ds, pyarrow.compute as pc
source = pa.BufferReader(open(sys.argv[1], "rb").read())
ds.ParquetFileFormat().make_fragment(source).subset(filter=pc.field("k") > 10)
"""


def crashing_footer() -> bytes:
    data = bytearray(parquet_bytes(_CRASH_TABLE, row_group_size=50))
    start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    data[start + _CRASH_OFFSET] = _CRASH_VALUE
    return bytes(data)


def test_a_footer_that_aborts_pyarrow_is_unreadable_and_we_survive(ws, store, tmp_path):
    data = crashing_footer()
    probe = tmp_path / "crash.parquet"
    probe.write_bytes(data)
    direct = subprocess.run([sys.executable, "-c", _CRASH_PROBE, str(probe)], capture_output=True)
    assert direct.returncode < 0, "the crafted footer no longer aborts pyarrow: craft another"
    source = record(ws, store, data)
    with pytest.raises(TableUnreadable, match="crashed"):
        sliced(source, where="k > 10")
    with pytest.raises(TableUnreadable, match="crashed"):
        describe(source.source)
    try:
        sliced(source)  # no statistics needed, no fork: the page reader reports its errors
    except TableUnreadable:
        pass


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    media_type=st.sampled_from([PARQUET, ARROW_FILE]),
    flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
                   min_size=1, max_size=4),
    tail=st.booleans(),
)  # fmt: skip
@example(media_type=PARQUET, flips=[(0.7446813870449098, 0)], tail=False)  # a column turned bool
def test_corrupt_tables_fail_only_with_our_errors(ws, media_type, flips, tail):
    table = keyed(600, cat=pa.array([str(i % 3) for i in range(600)]).dictionary_encode())
    data = bytearray(table_bytes(table, media_type, 100))
    start = len(data) - 600 if tail else 0
    for where, value in flips:
        data[start + int(where * (len(data) - start))] = value
    source = record(ws, ws.store(), bytes(data), media_type)
    for attempt in (
        lambda: sliced(source, columns=("s", "cat"), where="k > 100 and x is not null"),
        lambda: sliced(source),
        lambda: describe(source.source),
    ):
        try:
            attempt()
        except ArtifactError as exc:
            # A flipped footer byte may also change a column's type, so the filter no longer
            # fits it: a typed filter error about the corrupt schema, not a crash.
            assert isinstance(
                exc, TableUnreadable | TableTooLarge | UnknownColumn | FilterTypeError
            )


# -- typed errors -----------------------------------------------------------------------------


def test_an_unknown_projected_column_lists_the_available_ones(ws, store):
    source = record(ws, store, parquet_bytes(keyed(10)))
    with pytest.raises(UnknownColumn) as caught:
        sliced(source, columns=("k", "nope"))
    assert caught.value.column == "nope" and caught.value.available == ("k", "x", "s")
    assert caught.value.position is None and "'x'" in caught.value.message


def test_filter_errors_reach_the_caller_with_positions(ws, store):
    source = record(ws, store, parquet_bytes(keyed(10)))
    with pytest.raises(FilterSyntaxError) as syntax:
        sliced(source, where="k >")
    assert syntax.value.position == 3
    with pytest.raises(FilterTypeError) as typed:
        sliced(source, where="s = 1")
    assert typed.value.position == 4
    with pytest.raises(UnknownColumn) as unknown:
        sliced(source, where="k = 1 or zz = 2")
    assert unknown.value.position == 9


def test_other_media_types_are_refused_by_name(ws, store):
    ws.export("r.json", b'[{"a": 1}]')  # a JSON document, not JSON Lines: no streaming read
    card = ws.record(store, "r.json", media_type="application/json").card
    source = store.locate(card.experiment_id)
    with pytest.raises(UnsupportedMediaType) as caught:
        sliced(source)
    assert caught.value.supported[:2] == (PARQUET, ARROW_FILE)
    assert "text/csv" in caught.value.supported and "application/jsonl" in caught.value.supported
    assert PARQUET in caught.value.message and ARROW_FILE in caught.value.message
    with pytest.raises(UnsupportedMediaType):
        describe(source.source)


@pytest.mark.parametrize(
    ("request_fields", "error"),
    [
        ({"limit": -1}, InvalidInput),
        ({"limit": True}, InvalidInput),
        ({"limit": 100_001}, LimitExceeded),
        ({"offset": -5}, InvalidInput),
        ({"offset": 2**63}, LimitExceeded),
        ({"max_bytes": 0}, InvalidInput),
        ({"max_bytes": 64 * MIB + 1}, LimitExceeded),
        ({"columns": ("k", "k")}, InvalidInput),
        ({"columns": ("",)}, InvalidInput),
        ({"columns": tuple(f"c{i}" for i in range(10_001))}, LimitExceeded),
        ({"where": 5}, InvalidInput),
        ({"where": "k = 1" + " " * 4000}, FilterSyntaxError),
    ],
)
def test_malformed_requests_are_refused_before_reading(ws, store, request_fields, error):
    source = record(ws, store, parquet_bytes(keyed(10)))
    os.unlink(source.source.path)  # nothing may be read: a read would fail differently
    with pytest.raises(error):
        sliced(source, **request_fields)


def test_limits_may_only_be_lowered():
    limits = SliceLimits()
    assert limits.lowered(max_rows=5).max_rows == 5
    for overrides in ({"max_rows": 100_001}, {"nope": 1}, {"max_bytes": 0}, {"max_rows": True}):
        with pytest.raises(ConfigError):
            limits.lowered(**overrides)


# -- describe ---------------------------------------------------------------------------------


def test_describe_reads_the_shape_from_the_footer(ws, store):
    table = keyed(1000)
    source = record(ws, store, parquet_bytes(table, row_group_size=300))
    info = describe(source.source)
    assert info.media_type == PARQUET and info.num_rows == 1000 and info.num_row_groups == 4
    assert [g.rows for g in info.row_groups] == [300, 300, 300, 100]
    assert [(f.name, f.type) for f in info.fields] == [
        ("k", "int64"), ("x", "double"), ("s", "string"),
    ]  # fmt: skip
    k, x, s = info.columns
    assert (k.path, k.min, k.max, k.null_count) == ("k", 0, 999, 0)
    assert x.null_count == sum(1 for i in range(1000) if i % 7 == 3)
    assert (s.min, s.max) == ("v0", "v9")
    assert info.compressed_bytes == sum(c.compressed_bytes for c in info.columns) > 0
    assert info.uncompressed_bytes == sum(g.uncompressed_bytes for g in info.row_groups)
    assert info.chunks_verified == 1 and info.created_by


def test_describe_of_a_large_file_hashes_only_its_footer(ws, store):
    table = keyed(400_000, noise=pc.random(400_000), more=pc.random(400_000))
    source = record(ws, store, parquet_bytes(table, row_group_size=20_000))
    info = describe(source.source)
    assert info.num_row_groups == 20 and info.chunks_verified == 1
    assert info.bytes_read < source.card.artifact.bytes / 2


def test_describe_without_statistics_says_so(ws, store):
    source = record(ws, store, parquet_bytes(keyed(50), write_statistics=False))
    info = describe(source.source)
    assert all(c.min is None and c.max is None and c.null_count is None for c in info.columns)


def test_describe_of_an_arrow_file(ws, store):
    source = record(ws, store, ipc_bytes(keyed(100), chunk_rows=30), ARROW_FILE)
    info = describe(source.source)
    assert info.media_type == ARROW_FILE and info.num_row_groups == 4
    assert info.num_rows == 100 and [g.rows for g in info.row_groups] == [30, 30, 30, 10]
    assert info.notes and [f.name for f in info.fields] == ["k", "x", "s"]


# -- the verified reader and the forked metadata check ----------------------------------------


@pytest.fixture
def reader(ws, store):
    source = record(ws, store, big_bytes(ARROW_FILE), ARROW_FILE)
    manifest = load_manifest(source.source)
    with verified_object(source.source, manifest, max_read_bytes=16 * MIB) as opened:
        yield opened


def test_the_reader_serves_exactly_the_stored_bytes(reader):
    data = big_bytes(ARROW_FILE)
    for start, size in [(0, 10), (CHUNK_BYTES - 5, 10), (3 * CHUNK_BYTES - 1, CHUNK_BYTES + 2)]:
        reader.seek(start)
        assert bytes(reader.read(size)) == data[start : start + size]
        assert reader.tell() == start + size
    reader.seek(-4, os.SEEK_END)
    assert bytes(reader.read_buffer(100)) == data[-4:] and bytes(reader.read(1)) == b""
    with pytest.raises(ValueError):
        reader.seek(-1)


def test_the_reader_hashes_each_chunk_once_while_cached(reader):
    for _ in range(3):
        reader.seek(CHUNK_BYTES + 100)
        reader.read(1000)
    assert reader.stats.chunks_verified == 1 and reader.stats.bytes_read == CHUNK_BYTES


def test_a_closed_reader_reads_nothing(reader):
    reader.close()
    with pytest.raises(StoreIOError):
        reader.read(10)


def _as_answer(work):
    return Answer(work())


def isolated(work, reader, timeout: float = 60.0):
    """`work()` in the bounded reading child; its JSON answer (`work` crosses by pickle)."""
    work = functools.partial(_as_answer, work)
    return run_bounded(work, reader, Bounds(seconds=timeout)).value


def _first_bytes_of_chunk_5(reader):
    reader.seek(5 * CHUNK_BYTES)
    return {"first": bytes(reader.read(4)).hex(), "numbers": [1, 2.5, None]}


def test_an_isolated_answer_crosses_as_json_with_what_the_child_read(reader):
    answer = isolated(functools.partial(_first_bytes_of_chunk_5, reader), reader)
    assert answer == {"first": big_bytes(ARROW_FILE)[5 * CHUNK_BYTES :][:4].hex(),
                      "numbers": [1, 2.5, None]}  # fmt: skip
    assert reader.stats.chunks_verified == 1  # counted here, although the child read it


def test_an_isolated_crash_is_an_unreadable_table(reader):
    with pytest.raises(TableUnreadable, match="crashed"):
        isolated(os.abort, reader)


def test_an_isolated_hang_is_cut_short(reader):
    with pytest.raises(SliceTimeout):
        isolated(signal.pause, reader, timeout=0.2)


def _raise(make_error):
    raise make_error()


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (functools.partial(IntegrityError, "chunk 3 differs"), IntegrityError),
        (functools.partial(StoreIOError, "disk"), StoreIOError),
        (functools.partial(TableTooLarge, "wide", limit=7), TableTooLarge),
        (functools.partial(ValueError, "odd"), TableUnreadable),
    ],
)
def test_isolated_errors_cross_with_their_kind(reader, error, expected):
    work = functools.partial(_raise, error)
    with pytest.raises(expected) as caught:
        isolated(work, reader)
    if expected is TableTooLarge:
        assert caught.value.limit == 7


def test_an_answer_that_is_not_json_is_unreadable(reader):
    with pytest.raises(TableUnreadable, match="TypeError"):
        isolated(object, reader)


# -- kept rows cross from the reading child as one compact stream --------------------------------


def test_rows_kept_from_many_batches_cross_joined(ws, store, media_type):
    table = keyed(5000, cat=pa.array([str(i % 3) for i in range(5000)]).dictionary_encode())
    source = record(ws, store, table_bytes(table, media_type, 50), media_type)
    result = sliced(source, columns=("k", "cat"), where="x >= 0")
    expected = table.filter(pc.is_valid(table.column("x"))).select(["k", "cat"])
    assert result.table.to_pylist() == expected.to_pylist() and result.batches_read == 100
    assert result.table.column("k").num_chunks < 10  # not one message per source batch
    assert result.bytes == result.table.nbytes
