"""Tables built to defeat the reader: bombs, endless scans, mutants, and exits mid-read (issue 9).

Item 1: a small file may declare gigabytes (a zstd page or record batch of zeros, a dictionary
entry repeated by every row) or a billion rows. Every slice and `show` must stay within its
memory bound (`TableTooLarge` before decompressing when the sizes are declared, the child's
address-space limit when they are not) and its time budget (`SliceTimeout`), as whole `artmem`
processes measured with `wait4`. Item 2: no input and no concurrency may end a process with a
signal: random mutants of valid files go through the API and through real `artmem` processes
run in parallel, and an interpreter that exits while a slice is being read must exit cleanly
(pyarrow I/O threads calling into a Python file during finalization aborted or hung it).
"""

from __future__ import annotations

import functools
import io
import json
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from conftest import PROJECT
from host_helpers import write_config

from cards.errors import (
    ArtifactError,
    ConfigError,
    ErrorCode,
    FilterTypeError,
    SliceTimeout,
    TableTooLarge,
    TableUnreadable,
    UnknownColumn,
)
from cas import Located
from cas.slicing._answer import Answer, Bounds
from cas.slicing._ipc_layout import IpcLayout
from cas.slicing._isolated import run_bounded
from cas.slicing._limits import SliceLimits
from cas.slicing._pages import Incomplete, Malformed, parse_page_header
from cas.slicing._reader import load_manifest, verified_object
from cas.slicing._slice import SliceRequest, describe, read_slice
from cas.slicing._tables import ARROW_FILE, PARQUET
from harness_plugin.config import SliceConfig

MIB = 1 << 20
RSS_BOUND_KIB = 256 * 1024  # the target: peak RSS above the interpreter's baseline
TYPED = (TableUnreadable, TableTooLarge, SliceTimeout, UnknownColumn, FilterTypeError)
TYPED_CODES = {str(cls.code) for cls in TYPED}
FORGED = (b"\xff\xff\xff\x7f", b"\xfe\xff\xff\xff", b"\x00" * 4)  # large, negative, zero
_CLI = "import sys; from harness_plugin.cli import main; sys.exit(main())"
# Runs the command in a child of a small process and reports the child's `wait4` usage: a
# process started straight from pytest would inherit pytest's peak RSS as its own.
_MEASURE = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"status": status, "peak_kib": usage.ru_maxrss}, out)
"""


# -- building hostile files -------------------------------------------------------------------


def zeros(rows: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(bytearray(rows * 8))])


def zero_strings(count: int, each: int) -> pa.Array:
    offsets = pa.array([i * each for i in range(count + 1)], pa.int32()).buffers()[1]
    return pa.Array.from_buffers(
        pa.string(), count, [None, offsets, pa.py_buffer(bytearray(count * each))]
    )


def ipc_bytes(table: pa.Table, *, compression: str | None = "zstd", rows: int | None = None):
    sink = io.BytesIO()
    options = ipc.IpcWriteOptions(compression=compression)
    with ipc.new_file(sink, table.schema, options=options) as writer:
        for batch in table.to_batches(max_chunksize=rows):
            writer.write_batch(batch)
    return sink.getvalue()


def parquet_bytes(table: pa.Table, **options: object) -> bytes:
    sink = io.BytesIO()
    options = {"compression": "zstd", "write_statistics": False, **options}
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def ipc_zeros() -> bytes:
    """64M zero int64s in one zstd record batch: 512 MB decoded from about 16 KB."""
    return ipc_bytes(pa.table({"k": zeros(64 << 20)}))


def ipc_strings() -> bytes:
    """Two 256 MB zero strings in one zstd record batch."""
    return ipc_bytes(pa.table({"s": zero_strings(2, 256 * MIB)}))


def parquet_strings() -> bytes:
    """Two 256 MB zero strings, plain-encoded: each one page of 256 MB."""
    return parquet_bytes(pa.table({"s": zero_strings(2, 256 * MIB)}), use_dictionary=False)


def parquet_dictionary() -> bytes:
    """The same strings dictionary-encoded: one 256 MB dictionary page, from about 8 KB."""
    table = pa.table({"s": zero_strings(2, 256 * MIB)})
    return parquet_bytes(table, use_dictionary=True, dictionary_pagesize_limit=2**31 - 1)


def parquet_expansion() -> bytes:
    """A 40 MB dictionary entry (under the page bound) that every one of 4,000 rows repeats.

    Nothing declares the decoded size: the pages are small, the row group claims 10 KB a row.
    Only the child's address-space limit stops the dense strings (a batch is 160 GB).
    """
    values = pa.DictionaryArray.from_arrays(
        pa.array([0] * 4000, pa.int32()), zero_strings(1, 40 * MIB)
    )
    table = pa.table({"s": values})
    return parquet_bytes(table, dictionary_pagesize_limit=2**31 - 1, store_schema=False)


def parquet_rows() -> bytes:
    """10^9 zero int64s without statistics: one 10^7-row group that the footer lists 100 times."""
    data = parquet_bytes(pa.table({"k": zeros(10_000_000)}), row_group_size=10_000_000)
    meta = pq.read_metadata(pa.BufferReader(data))
    for _ in range(99):
        meta.append_row_groups(pq.read_metadata(pa.BufferReader(data)))
    sink = io.BytesIO()
    meta.write_metadata_file(sink)
    footer = sink.getvalue()[4:]  # without its leading magic
    return data[: len(data) - 8 - int.from_bytes(data[-8:-4], "little")] + footer


BOMBS = {  # name: (builder, media type, a filter for the filtered slice)
    "ipc_zeros": (ipc_zeros, ARROW_FILE, "k > 0"),
    "ipc_strings": (ipc_strings, ARROW_FILE, "s is null"),
    "parquet_strings": (parquet_strings, PARQUET, "s is null"),
    "parquet_dictionary": (parquet_dictionary, PARQUET, "s is null"),
    "parquet_expansion": (parquet_expansion, PARQUET, "s is null"),
}


def record(ws, data: bytes, media_type: str, name: str | None = None) -> Located:
    name = name or f"t-{abs(hash(data)):x}"
    ws.export(name, data)
    store = ws.store()
    return store.locate(ws.record(store, name, media_type=media_type).card.experiment_id)


@pytest.fixture(scope="module")
def bomb_files() -> dict[str, bytes]:
    return {name: build() for name, (build, _, _) in BOMBS.items()}


@pytest.fixture(scope="module")
def rows_file() -> bytes:
    return parquet_rows()


# -- item 1 through the API: refused before decompressing, or stopped by the bounds --------------


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_is_too_large_to_slice_and_still_shows(ws, bomb_files, name):
    _, media_type, where = BOMBS[name]
    source = record(ws, bomb_files[name], media_type).source
    assert len(bomb_files[name]) < 200_000
    for request in (SliceRequest(limit=1), SliceRequest(where=where, limit=1)):
        with pytest.raises(TableTooLarge) as caught:
            read_slice(source, request)
        assert caught.value.code == ErrorCode.TABLE_TOO_LARGE and caught.value.limit > 0
    info = describe(source)  # the footer alone is small
    assert [f.name for f in info.fields] in (["k"], ["s"])


def test_declared_sizes_are_refused_before_decompressing(ws, bomb_files):
    """A page or batch that declares more than a quarter of the memory bound is never decoded."""
    for name in ("ipc_zeros", "parquet_strings", "parquet_dictionary"):
        _, media_type, _ = BOMBS[name]
        source = record(ws, bomb_files[name], media_type).source
        with pytest.raises(TableTooLarge, match="declare") as caught:
            read_slice(source, SliceRequest(limit=1))
        assert caught.value.limit == SliceLimits().max_memory_bytes // 4


def test_a_decode_that_declares_nothing_meets_the_memory_bound(ws, bomb_files):
    source = record(ws, bomb_files["parquet_expansion"], PARQUET).source
    with pytest.raises(TableTooLarge) as caught:
        read_slice(source, SliceRequest(limit=1))
    assert "declare" not in caught.value.message  # the child's address space ran out


def test_lowering_the_memory_bound_lowers_what_one_decode_may_declare(ws):
    table = pa.table({"k": pa.array(range(300_000), pa.int64())})
    source = record(ws, ipc_bytes(table), ARROW_FILE).source  # one 2.4 MB record batch
    assert read_slice(source, SliceRequest(limit=5)).rows == 5
    limits = SliceLimits().lowered(max_memory_bytes=8 * MIB)
    with pytest.raises(TableTooLarge, match="record batch 0") as caught:
        read_slice(source, SliceRequest(limit=5), limits=limits)
    assert caught.value.limit == 2 * MIB


def test_a_billion_row_scan_is_cut_at_the_time_budget(ws, rows_file):
    source = record(ws, rows_file, PARQUET).source
    assert describe(source).num_rows == 10**9
    first = read_slice(source, SliceRequest(limit=3))  # without a filter: three rows
    assert first.table.column("k").to_pylist() == [0, 0, 0]
    limits = SliceLimits().lowered(max_seconds=1)
    with pytest.raises(SliceTimeout) as caught:
        read_slice(source, SliceRequest(where="k > 0", limit=1), limits=limits)
    assert caught.value.code == ErrorCode.SLICE_TIMEOUT and caught.value.limit == 1


def test_the_new_limits_may_only_be_lowered_and_are_configurable():
    limits = SliceLimits()
    assert limits.max_memory_bytes == 256 * MIB and limits.max_seconds == 30
    assert limits.table_bounds.max_decoded_bytes == 64 * MIB
    for overrides in ({"max_seconds": 31}, {"max_memory_bytes": 257 * MIB}, {"max_seconds": 0}):
        with pytest.raises(ConfigError):
            limits.lowered(**overrides)
    resolved = SliceConfig(max_seconds=5, max_memory_bytes=64 * MIB).resolve()
    assert (resolved.max_seconds, resolved.max_memory_bytes) == (5, 64 * MIB)
    with pytest.raises(ConfigError):
        SliceConfig(max_seconds=60).resolve()


# -- the declared-size readers agree with pyarrow's writers -----------------------------------


def _chunk_pages(data: bytes, column: pq.ColumnChunkMetaData) -> list[tuple[int, int, int]]:
    start = column.data_page_offset
    if column.has_dictionary_page and 0 < column.dictionary_page_offset < start:
        start = column.dictionary_page_offset
    end, pages = start + column.total_compressed_size, []
    while start < end:
        header = parse_page_header(memoryview(data)[start:end])
        pages.append((header.page_type, header.header_bytes, header.uncompressed))
        start += header.header_bytes + header.compressed
    assert start == end
    return pages


@pytest.mark.parametrize(
    "options",
    [{}, {"data_page_version": "2.0"}, {"compression": "snappy", "write_statistics": True}],
)
def test_page_headers_add_up_to_the_column_chunk_sizes(options):
    table = pa.table(
        {
            "k": pa.array(range(200_000), pa.int64()),
            "s": pa.array([f"v{i % 11}" for i in range(200_000)]),
            "x": pc.random(200_000),
        }
    )
    data = parquet_bytes(table, row_group_size=70_000, **options)
    meta = pq.read_metadata(pa.BufferReader(data))
    for group in range(meta.num_row_groups):
        for leaf in range(meta.num_columns):
            column = meta.row_group(group).column(leaf)
            pages = _chunk_pages(data, column)
            assert sum(h + u for _, h, u in pages) == column.total_uncompressed_size
            assert {kind for kind, _, _ in pages} <= {0, 2, 3}


def test_a_page_header_parser_refuses_what_is_not_a_header():
    with pytest.raises(Incomplete):
        parse_page_header(b"\x15\x00\x15")
    with pytest.raises(Malformed):
        parse_page_header(b"\x00")  # a struct with no fields: no sizes
    with pytest.raises(Malformed):
        parse_page_header(b"\x1d" + b"\x00" * 8)  # compact type 13 does not exist
    nested = b"\x1c" * (64) + b"\x00" * 64  # structs nested deeper than any header
    with pytest.raises(Malformed):
        parse_page_header(nested)


def test_ipc_buffer_sizes_are_read_per_field_from_message_headers():
    rows = 3000
    table = pa.table(
        {
            "k": pa.array(range(rows), pa.int64()),
            "s": pa.array([str(i) for i in range(rows)]),
            "l": pa.array([[i, i] for i in range(rows)]),
            "st": pa.array([{"a": i, "b": str(i)} for i in range(rows)]),
            "d": pa.array([str(i % 3) for i in range(rows)]).dictionary_encode(),
            "m": pa.array([[("a", i)] for i in range(rows)], pa.map_(pa.string(), pa.int64())),
        }
    )
    for compression in (None, "zstd", "lz4"):
        data = ipc_bytes(table, compression=compression, rows=1000)
        layout = IpcLayout(_BytesReader(data), table.schema, max_decoded=1 << 40)
        assert len(layout.batches) == 3 and len(layout.dictionaries) == 1
        batch = ipc.open_file(pa.BufferReader(data)).get_batch(0)
        for index, column in enumerate(batch.columns):
            declared = layout.declared(0, [index])
            assert column.nbytes - 64 <= declared <= column.nbytes + 64  # padding, dictionaries


@dataclass
class _BytesReader:
    """The two calls `IpcLayout` makes of a `VerifiedReader`, over plain bytes."""

    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def peek(self, offset: int, size: int) -> memoryview:
        return memoryview(self.data)[offset : offset + size]


# -- the child's bounds, directly -------------------------------------------------------------


@pytest.fixture
def reader(ws):
    source = record(ws, parquet_bytes(pa.table({"k": [1, 2, 3]})), PARQUET).source
    with verified_object(source, load_manifest(source), max_read_bytes=MIB) as opened:
        yield opened


def _hog() -> Answer:
    return Answer(len(bytearray(512 * MIB)))


def _abort_on_allocation() -> Answer:
    os.write(2, b"terminate called after throwing an instance of 'std::bad_alloc'\n")
    os.abort()


def _read_a_pipe_forever() -> Answer:
    return Answer(os.read(os.pipe()[0], 1))


def _answer(value, payload=b"") -> Answer:
    return Answer(value, payload)


def test_a_child_that_outgrows_its_memory_bound_is_too_large(reader):
    with pytest.raises(TableTooLarge) as caught:
        run_bounded(_hog, reader, Bounds(memory_bytes=64 * MIB))
    assert caught.value.limit == 64 * MIB
    assert run_bounded(_hog, reader, Bounds()).value == 512 * MIB  # unbounded, it would grow


def test_a_child_whose_allocation_aborts_is_too_large(reader):
    with pytest.raises(TableTooLarge):
        run_bounded(_abort_on_allocation, reader, Bounds(memory_bytes=64 * MIB))


def test_a_child_past_its_deadline_is_killed_with_a_typed_error(reader):
    with pytest.raises(SliceTimeout) as caught:
        run_bounded(_read_a_pipe_forever, reader, Bounds(seconds=0.2))
    assert caught.value.limit == 1


def test_a_payload_crosses_beside_the_answer(reader):
    work = functools.partial(_answer, {"n": 1}, b"\x00payload\xff")
    answer = run_bounded(work, reader, Bounds())
    assert answer.value == {"n": 1} and bytes(answer.payload) == b"\x00payload\xff"
    with pytest.raises(TableUnreadable, match="more than it may"):
        run_bounded(
            functools.partial(_answer, None, bytes(2 * MIB)), reader, Bounds(answer_bytes=MIB)
        )


# -- mutants: every outcome is a result or a typed error --------------------------------------


def _base_tables() -> list[tuple[str, bytes]]:
    rows = 900
    table = pa.table(
        {
            "k": pa.array(range(rows), pa.int64()),
            "x": pa.array([None if i % 7 == 3 else i / 4 for i in range(rows)]),
            "s": pa.array([f"v{i % 11}" for i in range(rows)]),
            "cat": pa.array([str(i % 3) for i in range(rows)]).dictionary_encode(),
        }
    )
    return [
        (PARQUET, parquet_bytes(table, row_group_size=200, compression="none")),
        (PARQUET, parquet_bytes(table, row_group_size=300, write_statistics=True)),
        (PARQUET, parquet_bytes(table, row_group_size=450, data_page_version="2.0")),
        (ARROW_FILE, ipc_bytes(table, compression=None, rows=200)),
        (ARROW_FILE, ipc_bytes(table, compression="zstd", rows=300)),
        (ARROW_FILE, ipc_bytes(table, compression="lz4", rows=450)),
    ]


def mutants(count: int, seed: int) -> list[tuple[str, bytes]]:
    """Seeded mutants of valid files; the leading and trailing magic stays (the store checks it).

    Mutations: random bytes anywhere, random bytes in the footer, forged large integers, and
    a span copied over another.
    """
    rng = random.Random(seed)
    bases = _base_tables()
    out = []
    for _ in range(count):
        media_type, base = rng.choice(bases)
        data = bytearray(base)
        low, high = 8, len(data) - 8
        for _ in range(rng.randint(1, 4)):
            kind = rng.randrange(4)
            start = low if kind != 1 else max(low, high - 700)
            at = rng.randrange(start, high - 8)
            if kind in (0, 1):
                data[at] = rng.randrange(256)
            elif kind == 2:
                data[at : at + 4] = rng.choice(FORGED)
            else:
                size = rng.randint(4, 64)
                source = rng.randrange(low, high - size)
                data[at : min(high, at + size)] = data[source : source + size][: high - at]
        out.append((media_type, bytes(data)))
    return out


def _check_mutants(ws, count: int, seed: int) -> int:
    runs = 0
    requests = [SliceRequest(limit=50), SliceRequest(columns=("s", "cat"), where="k > 100")]
    for number, (media_type, data) in enumerate(mutants(count, seed)):
        source = record(ws, data, media_type, name=f"m{seed}-{number}").source
        for request in [None, *requests]:  # show, slice, filtered slice
            runs += 1
            try:
                describe(source) if request is None else read_slice(source, request)
            except ArtifactError as exc:
                assert isinstance(exc, TYPED), f"mutant {number}: {exc!r}"
    return runs


def test_mutants_fail_only_with_typed_errors(ws):
    assert _check_mutants(ws, count=40, seed=1) == 120


@pytest.mark.slow
def test_hundreds_of_mutants_fail_only_with_typed_errors(ws):
    assert _check_mutants(ws, count=400, seed=2) == 1200


# -- whole artmem processes -------------------------------------------------------------------


@dataclass(frozen=True)
class Process:
    status: int
    view: dict
    peak_kib: int


def run_artmem(config: Path, argv: list[str], scratch: Path) -> Process:
    """Run `artmem ... --json` in a fresh process; its exit status, JSON and peak RSS."""
    report = scratch / f"usage-{os.getpid()}-{random.random()}.json"
    command = [sys.executable, "-c", _MEASURE, str(report), "-c", _CLI]
    command += ["--config", str(config), "--project", PROJECT, *argv, "--json"]
    done = subprocess.run(command, capture_output=True, timeout=300, check=False)
    usage = json.loads(report.read_text())
    report.unlink()
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    view = json.loads(lines[-1]) if lines else {}
    return Process(usage["status"], view, usage["peak_kib"])


def _outcome(process: Process) -> str:
    if os.WIFSIGNALED(process.status):
        return f"signal {os.WTERMSIG(process.status)}"
    if "error" in process.view:
        return process.view["error"]["code"]
    return "ok" if process.view else f"exit {os.WEXITSTATUS(process.status)} without JSON"


@pytest.fixture
def cli(ws, tmp_path):
    config, _ = write_config(tmp_path, "[slice]\nmax_seconds = 20\n")
    return config


@pytest.mark.parametrize("name", ["ipc_zeros", "parquet_strings", "parquet_expansion"])
def test_whole_processes_stay_within_the_memory_bound(ws, cli, tmp_path, bomb_files, name):
    _, media_type, where = BOMBS[name]
    small = record(ws, parquet_bytes(pa.table({"k": [1, 2]})), PARQUET).card.experiment_id
    bomb = record(ws, bomb_files[name], media_type).card.experiment_id
    baseline = run_artmem(cli, ["slice", small, "--limit", "1"], tmp_path)
    assert _outcome(baseline) == "ok"
    for argv in (["slice", bomb, "--limit", "1"], ["slice", bomb, "--where", where]):
        process = run_artmem(cli, argv, tmp_path)
        assert _outcome(process) == "slice.table_too_large"
        assert process.peak_kib - baseline.peak_kib < RSS_BOUND_KIB
    shown = run_artmem(cli, ["show", bomb], tmp_path)
    assert _outcome(shown) == "ok" and shown.peak_kib - baseline.peak_kib < RSS_BOUND_KIB


def test_a_whole_process_stops_at_its_configured_time_budget(ws, tmp_path, rows_file):
    config, _ = write_config(tmp_path, "[slice]\nmax_seconds = 1\n")
    experiment = record(ws, rows_file, PARQUET).card.experiment_id
    process = run_artmem(config, ["slice", experiment, "--where", "k > 0"], tmp_path)
    assert _outcome(process) == "slice.timeout"
    assert process.view["error"]["message"].startswith("reading the table did not finish")


def _parallel_runs(ws, cli, tmp_path, files: list[tuple[str, bytes]], seed: int) -> list[str]:
    rng = random.Random(seed)
    jobs = []
    for number, (media_type, data) in enumerate(files):
        experiment = record(ws, data, media_type, name=f"p{seed}-{number}").card.experiment_id
        jobs.append(
            rng.choice(
                [
                    ["show", experiment],
                    ["slice", experiment, "--limit", "7"],
                    ["slice", experiment, "--columns", "s,cat", "--where", "k > 100"],
                ]
            )
        )
    with ThreadPoolExecutor(3) as pool:
        processes = list(pool.map(lambda argv: run_artmem(cli, argv, tmp_path), jobs))
    return [_outcome(process) for process in processes]


def _valid_and_mutant(count: int, seed: int) -> list[tuple[str, bytes]]:
    return [*_base_tables(), *mutants(count, seed)]


def test_processes_in_parallel_end_with_json_never_a_signal(ws, cli, tmp_path):
    outcomes = _parallel_runs(ws, cli, tmp_path, _valid_and_mutant(6, seed=3), seed=3)
    assert set(outcomes) <= {"ok"} | TYPED_CODES, outcomes
    assert outcomes[:6] == ["ok"] * 6  # the valid files


@pytest.mark.slow
def test_hundreds_of_processes_in_parallel_end_with_json_never_a_signal(ws, cli, tmp_path):
    outcomes = _parallel_runs(ws, cli, tmp_path, _valid_and_mutant(150, seed=4), seed=4)
    assert set(outcomes) <= {"ok"} | TYPED_CODES, outcomes
    assert outcomes[:6] == ["ok"] * 6


# pyarrow's I/O threads read through the Python file they were given; in the calling process,
# one that needed the GIL while the interpreter finalized aborted it ("terminate called without
# an active exception", SIGABRT, the JSON lost) or left it hung in exit. Reads now happen in a
# child: the caller must start no pyarrow thread at all (jemalloc's own thread calls no Python).
_THREADS_AFTER_READS = """
import json, os, sys
from cas import ProjectStore
from cas.slicing import SliceRequest, describe, read_slice
def threads():
    tasks = os.listdir("/proc/self/task")
    names = (open(f"/proc/self/task/{t}/comm").read().strip() for t in tasks)
    return [name for name in names if name != "jemalloc_bg_thd"]
before = threads()  # numpy's BLAS pool when numpy is installed: pyarrow imports it
store = ProjectStore(sys.argv[1], sys.argv[2])
for experiment in sys.argv[3:]:
    source = store.locate(experiment).source
    describe(source)
    read_slice(source, SliceRequest(limit=5))
    read_slice(source, SliceRequest(columns=("k", "cat"), where="k > 5"))
print(json.dumps({"before": before, "after": threads(), "numpy": "numpy" in sys.modules}))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs procfs")
def test_reading_tables_starts_no_pyarrow_thread_in_the_caller(ws):
    experiments = [
        record(ws, data, media_type, name=f"threads-{n}").card.experiment_id
        for n, (media_type, data) in enumerate(_base_tables())
    ]
    argv = [str(ws.artifact_root), PROJECT, *experiments]
    done = subprocess.run(
        [sys.executable, "-c", _THREADS_AFTER_READS, *argv], capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-500:]
    seen = json.loads(done.stdout)
    assert seen["after"] == seen["before"]  # the reads started no thread in the caller
    if not seen["numpy"]:  # without numpy's BLAS pool, the main thread alone
        assert len(seen["after"]) == 1
