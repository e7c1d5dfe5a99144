"""A verified slice of 2 columns and ~1% of rows against DuckDB and a full read, side by side.

Target (ARCHITECTURE.md): the slice no slower than 1.3x DuckDB on the same query, with peak memory a
small fraction of a full read. Setup writes a wide Parquet result (a sorted int64 key, fourteen
float64 columns and a string column, in several row groups, so statistics prune) into a session's
exports and records it. Then each query runs in a fresh child process, in alternating order:

- ours:      `slice_experiment` (card, manifest, chunk verification, pruning, bounded batches)
- duckdb:    `SELECT k, a FROM read_parquet(object) WHERE k >= lo AND k < hi` to an Arrow table
- full read: `pyarrow.parquet.read_table(object)`, then the same filter and projection

Each child reports the query's own time (in-process), the time of its imports and its peak RSS;
the parent also times the whole child process (interpreter start, imports, query), as a command
such as `artmem slice` would spend it. DuckDB is a benchmark-only dependency:
`.venv/bin/pip install duckdb==2.0.0`.

    .venv/bin/python benchmarks/bench_slice.py [--size-mib 1024] [--repeat 3] [--quick] [--dir D]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from _common import (
    MIB,
    ChildResult,
    Scalar,
    add_size_arguments,
    best,
    filesystem_line,
    machine_line,
    make_dirs,
    median,
    print_table,
    read_through,
    run_child,
    sizing,
    verdict,
    workspace,
)

PROJECT = "bench-project"
SESSION = "bench-s1"
SOURCE_NAME = "wide-result.parquet"
ROW_GROUPS = 8
FLOAT_COLUMNS = 14
MAX_SLICE_ROWS = 100_000  # the default row ceiling of a slice
TIME_TARGET = 1.3
QUERIES = ("ours", "artmem_slice", "duckdb", "full_read")


# -- setup ------------------------------------------------------------------------------------


def _row_group(start: int, rows: int) -> object:
    import pyarrow as pa
    import pyarrow.compute as pc

    key = pa.array(range(start, start + rows), pa.int64())
    columns = {"k": key}
    columns["a"] = pc.random(rows)
    columns |= {f"v{i}": pc.random(rows) for i in range(1, FLOAT_COLUMNS)}
    columns["s"] = pc.cast(pc.multiply(key, 7919), pa.string())
    return pa.table(columns)


def write_source(path: str, size: int) -> dict[str, Scalar]:
    """Write about `size` bytes of Parquet in ROW_GROUPS row groups; return its row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    probe_rows = 100_000
    probe = _row_group(0, probe_rows)
    assert isinstance(probe, pa.Table)
    sink = pa.BufferOutputStream()
    # No dictionaries: every value is distinct, and a small probe would still dictionary-encode.
    options: dict[str, object] = {"compression": "snappy", "use_dictionary": False}
    pq.write_table(probe, sink, **options)
    per_row = sink.getvalue().size / probe_rows
    group_rows = max(1000, int(size * 0.99 / per_row / ROW_GROUPS))
    with pq.ParquetWriter(path, probe.schema, **options) as writer:
        for group in range(ROW_GROUPS):
            writer.write_table(_row_group(group * group_rows, group_rows))
    return {
        "rows": group_rows * ROW_GROUPS,
        "group_rows": group_rows,
        "bytes": os.path.getsize(path),
    }


def record_source(artifact_root: str, rlm_root: str, size: int) -> dict[str, Scalar]:
    """Record the exported file; name its experiment and object path."""
    from cards import Limits, parse_metadata, parse_session_id
    from cas import ProjectStore, Provenance

    limits = Limits(artifact_bytes=max(size, 1 << 30), project_bytes=max(4 * size, 20 << 30))
    store = ProjectStore(artifact_root, PROJECT, limits=limits)
    metadata = parse_metadata(
        {
            "title": "Wide synthetic result",
            "summary": "A sorted key, fourteen float columns and a string column.",
            "query_fingerprint": "ab" * 32,
            "source": "bench",
            "source_version": "v1",
            "media_type": "application/vnd.apache.parquet",
        }
    )
    start = time.perf_counter()
    recorded = store.record(
        rlm_root, Provenance(session_id=parse_session_id(SESSION)), metadata, SOURCE_NAME
    )
    seconds = time.perf_counter() - start
    source = store.locate(recorded.card.experiment_id).source
    return {"experiment": recorded.card.experiment_id, "path": source.path, "seconds": seconds}


# -- child-process workloads ------------------------------------------------------------------


def _summary(table: object, seconds: float, imports: float) -> dict[str, Scalar]:
    import pyarrow as pa
    import pyarrow.compute as pc

    assert isinstance(table, pa.Table)
    return {
        "seconds": seconds,
        "import_seconds": imports,
        "rows": table.num_rows,
        "key_sum": pc.sum(table.column("k")).as_py() or 0,
        "columns": ",".join(table.column_names),
    }


def ours(artifact_root: str, experiment: str, low: int, high: int) -> dict[str, Scalar]:
    """Our verified slice, as `artmem slice` will run it: store, card, manifest, slice."""
    started = time.perf_counter()
    from cas import ProjectStore
    from cas.slicing import SliceRequest, read_slice

    start = time.perf_counter()
    store = ProjectStore(artifact_root, PROJECT)
    request = SliceRequest(columns=("k", "a"), where=f"k >= {low} and k < {high}")
    result = read_slice(store.locate(experiment).source, request)
    seconds = time.perf_counter() - start
    if result.truncated:
        raise RuntimeError(f"the slice was truncated ({result.truncated_reason})")
    summary = _summary(result.table, seconds, start - started)
    summary |= {"bytes_read": result.bytes_read, "chunks_verified": result.chunks_verified}
    return summary


def artmem_slice(config: str, experiment: str, low: int, high: int, out: str) -> dict[str, Scalar]:
    """The whole `artmem slice` command in a fresh process: configuration, checks, Parquet out."""
    started = time.perf_counter()
    import contextlib
    import io

    from harness_plugin.cli import main

    start = time.perf_counter()
    argv = ["--config", config, "--project", PROJECT, "slice", experiment, "--columns", "k,a",
            "--where", f"k >= {low} and k < {high}", "--format", "parquet", "--out", out,
            "--json"]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    seconds = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"artmem slice exited {code}")
    import pyarrow.parquet as pq

    table = pq.read_table(out)
    os.unlink(out)
    return _summary(table, seconds, start - started)


def duckdb_query(path: str, low: int, high: int) -> dict[str, Scalar]:
    """The same query in DuckDB, reading the same stored object, into an Arrow table."""
    started = time.perf_counter()
    import duckdb
    import pyarrow  # noqa: F401 - the result is an Arrow table: count its import here, not below

    start = time.perf_counter()
    query = f"SELECT k, a FROM read_parquet('{path}') WHERE k >= {low} AND k < {high}"
    relation = duckdb.sql(query)
    assert relation is not None
    table = relation.to_arrow_table()
    return _summary(table, time.perf_counter() - start, start - started)


def full_read(path: str, low: int, high: int) -> dict[str, Scalar]:
    """The naive way: read the whole table, then filter and project."""
    started = time.perf_counter()
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    start = time.perf_counter()
    table = pq.read_table(path)
    key = table.column("k")
    mask = pc.and_(pc.greater_equal(key, low), pc.less(key, high))
    selected = table.filter(mask).select(["k", "a"])
    return _summary(selected, time.perf_counter() - start, start - started)


# -- the benchmark ----------------------------------------------------------------------------


def _run(name: str, setup: dict[str, str | int]) -> tuple[ChildResult, float]:
    low, high = int(setup["low"]), int(setup["high"])
    start = time.perf_counter()
    if name == "ours":
        artifact_root, experiment = str(setup["artifact_root"]), str(setup["experiment"])
        child = run_child(
            "bench_slice", "ours", artifact_root=artifact_root, experiment=experiment, low=low,
            high=high,
        )  # fmt: skip
    elif name == "artmem_slice":
        out = os.path.join(str(setup["workdir"]), "slice-out.parquet")
        child = run_child(
            "bench_slice", "artmem_slice", config=setup["config"], experiment=setup["experiment"],
            low=low, high=high, out=out,
        )  # fmt: skip
    elif name == "duckdb":
        child = run_child("bench_slice", "duckdb_query", path=setup["path"], low=low, high=high)
    else:
        child = run_child("bench_slice", "full_read", path=setup["path"], low=low, high=high)
    return child, time.perf_counter() - start


def _measure(
    setup: dict[str, str | int], repeat: int
) -> dict[str, list[tuple[ChildResult, float]]]:
    runs: dict[str, list[tuple[ChildResult, float]]] = {name: [] for name in QUERIES}
    for number in range(repeat):
        order = QUERIES if number % 2 == 0 else tuple(reversed(QUERIES))
        for name in order:
            runs[name].append(_run(name, setup))
    return runs


def _check_agreement(runs: dict[str, list[tuple[ChildResult, float]]]) -> None:
    answers = {(c.number("rows"), c.number("key_sum")) for rs in runs.values() for c, _ in rs}
    if len(answers) != 1:
        raise RuntimeError(f"the three queries disagree: {answers}")


def _report(
    runs: dict[str, list[tuple[ChildResult, float]]], size: int, rows: int, setup_line: str
) -> None:
    inner = {n: [c.number("seconds") for c, _ in rs] for n, rs in runs.items()}
    imports = {n: [c.number("import_seconds") for c, _ in rs] for n, rs in runs.items()}
    whole = {n: [w for _, w in rs] for n, rs in runs.items()}
    peak = {n: max(c.peak_rss_mib for c, _ in rs) for n, rs in runs.items()}
    first = runs["ours"][0][0]
    print(setup_line)
    print()
    print_table(
        ["query", "in-process s (best / median)", "its imports s", "whole process s",
         "peak RSS MiB"],
        [
            [name, f"{best(inner[name]):.3f} / {median(inner[name]):.3f}",
             f"{median(imports[name]):.3f}", f"{median(whole[name]):.3f}", f"{peak[name]:,.0f}"]
            for name in QUERIES
        ],
    )  # fmt: skip
    print()
    time_ratio = median(inner["ours"]) / median(inner["duckdb"])
    whole_ratio = median(whole["ours"]) / median(whole["duckdb"])
    bare_ratio = _less(whole["ours"], imports["ours"]) / _less(whole["duckdb"], imports["duckdb"])
    hashed = first.number("chunks_verified") * 4 * MIB
    print_table(
        ["ratio / figure", "measured", "target", "verdict"],
        [
            ["ours / DuckDB time, in-process (medians)", f"{time_ratio:.2f}",
             f"<= {TIME_TARGET}", verdict(time_ratio <= TIME_TARGET)],
            ["ours / DuckDB time, whole processes (medians)", f"{whole_ratio:.2f}", "", ""],
            ["ours / DuckDB time, whole processes less imports", f"{bare_ratio:.2f}", "", ""],
            ["artmem slice / DuckDB, whole processes (medians)",
             f"{median(whole['artmem_slice']) / median(whole['duckdb']):.2f}", "", ""],
            ["ours / full-read time, in-process (medians)",
             f"{median(inner['ours']) / median(inner['full_read']):.3f}", "", ""],
            ["ours / full-read peak RSS", f"{peak['ours'] / peak['full_read']:.3f}",
             "small fraction", ""],
            ["ours / DuckDB peak RSS", f"{peak['ours'] / peak['duckdb']:.2f}", "", ""],
            ["bytes hashed by our slice / object size",
             f"{hashed / size:.3f} ({first.number('chunks_verified'):.0f} chunks of 4 MiB)", "",
             ""],
            ["rows returned (all three agree)", f"{first.number('rows'):,.0f} of {rows:,}", "",
             ""],
        ],
    )  # fmt: skip


def _less(totals: list[float], parts: list[float]) -> float:
    return median([total - part for total, part in zip(totals, parts, strict=True)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_size_arguments(parser, what="Parquet", runs="runs of each query")
    args = parser.parse_args(argv)
    sized = sizing(parser, args, min_mib=8, copies=3)
    if sized is None:
        return 2
    with workspace(sized.parent, "artmem-bench-slice-") as workdir:
        _bench(workdir, sized.size, sized.repeat)
    return 0


def _write_config(workdir: str, rlm_root: str, artifact_root: str) -> str:
    """A configuration for the `artmem slice` runs, over the benchmark's own store."""
    project_root = make_dirs(os.path.join(workdir, "work"))
    path = os.path.join(workdir, "artmem.toml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(
            f'artifact_root = "{artifact_root}"\nrlm_root = "{rlm_root}"\n'
            f'state_root = "{os.path.join(workdir, "state")}"\n'
            f'[[projects]]\nid = "{PROJECT}"\nroot = "{project_root}"\n'
        )
    return path


def _bench(workdir: str, size: int, repeat: int) -> None:
    rlm_root, artifact_root = os.path.join(workdir, "rlm"), os.path.join(workdir, "store")
    exports = make_dirs(os.path.join(rlm_root, "sessions", SESSION, "exports"))
    start = time.perf_counter()
    written = run_child("bench_slice", "write_source", path=os.path.join(exports, SOURCE_NAME),
                        size=size)  # fmt: skip
    generated_s = time.perf_counter() - start
    rows, actual = int(written.number("rows")), int(written.number("bytes"))
    recorded = run_child(
        "bench_slice", "record_source", artifact_root=artifact_root, rlm_root=rlm_root, size=actual
    )
    read_through(recorded.text("path"))
    low = rows // 2 + 12_345
    setup: dict[str, str | int] = {
        "artifact_root": artifact_root,
        "workdir": workdir,
        "config": _write_config(workdir, rlm_root, artifact_root),
        "experiment": recorded.text("experiment"),
        "path": recorded.text("path"),
        "low": low,
        "high": low + min(rows // 100, MAX_SLICE_ROWS),
    }
    runs = _measure(setup, repeat)
    _check_agreement(runs)
    line = (
        f"slice of 2 columns and 1% of rows: {actual / MIB:,.0f} MiB Parquet, {rows:,} rows in "
        f"{ROW_GROUPS} row groups, {2 + FLOAT_COLUMNS} columns; {repeat} run(s) of each query, "
        f"each in a fresh process, order alternating\n  {machine_line()}; store on "
        f"{filesystem_line(workdir)}; object warm in the page cache for every run\n"
        f"  generated in {generated_s:.1f} s, recorded in {recorded.number('seconds'):.1f} s "
        "(not timed below)"
    )
    _report(runs, actual, rows, line)


if __name__ == "__main__":
    sys.exit(main())
