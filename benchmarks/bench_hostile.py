"""Hostile tables: peak RSS and wall time of whole `artmem show` and `artmem slice` processes.

Issue 9 target: any slice or show of any file stays under 256 MiB of peak RSS above the
interpreter's baseline and under the slice time budget, on files built to defeat it. Setup
builds each bomb class (in a child process, so this one stays small) into a session's exports,
records it, and writes a configuration. Then every command runs as a whole `artmem` process,
`--repeat` times in turn; its peak RSS is `ru_maxrss` from `wait4`, which covers the process and
every child it waited for (the largest of them, not their sum). The baseline is the same
command on a small valid table.

Bomb classes:

- ipc_zeros: 200M zero int64s in one zstd record batch (about 49 KB; 1.6 GB decoded)
- ipc_strings: four 400 MB zero strings in one zstd record batch (1.6 GB decoded)
- parquet_strings: four 400 MB zero strings, zstd, plain encoding (about 50 KB)
- parquet_dictionary: the same, dictionary-encoded (about 13 KB: one 400 MB dictionary entry)
- parquet_expansion: a 40 MB dictionary entry repeated by 4,000 rows, written without the Arrow
  schema, so it decodes to dense strings; no page or column chunk declares that size
- parquet_rows: 10^9 zero int64s without statistics (one 10^7-row group listed 100 times;
  30 KB); the filtered slice must scan every row

Each class runs `show`, `slice --limit 1`, a filtered slice, and the filtered slice again under
`[slice] max_seconds = 5`, where the billion-row scan is cut short. Before issue 9's fix,
parquet_expansion grew a slice to all the machine's memory (23 GB here, then the OOM killer):
do not run this against older code on a shared machine.

    .venv/bin/python benchmarks/bench_hostile.py [--repeat 5] [--only CLASS ...] [--dir D]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from _common import machine_line, make_dirs, median, print_table, run_child, verdict, workspace

PROJECT = "bench-project"
SESSION = "bench-s1"
PARQUET = "application/vnd.apache.parquet"
ARROW_FILE = "application/vnd.apache.arrow.file"
RSS_TARGET_MIB = 256.0
TIME_BUDGET_S = 30  # the default `[slice] max_seconds`
TIGHT_S = 5
TIGHT = f"slice --where, max_seconds={TIGHT_S}"
KILL_AFTER_S = 300.0
BOMBS: dict[str, tuple[str, str]] = {  # name: (media type, the filtered slice's --where)
    "baseline": (PARQUET, "k >= 0"),
    "ipc_zeros": (ARROW_FILE, "k > 0"),
    "ipc_strings": (ARROW_FILE, "s is null"),
    "parquet_strings": (PARQUET, "s is null"),
    "parquet_dictionary": (PARQUET, "s is null"),
    "parquet_expansion": (PARQUET, "s is null"),
    "parquet_rows": (PARQUET, "k > 0"),
}


# -- building the files (in a child: pyarrow and gigabytes stay out of this process) ----------


def build(exports: str, names: str) -> dict[str, int]:
    """Write each named bomb into `exports`; return the file sizes."""
    sizes: dict[str, int] = {}
    for name in names.split(","):
        data = _BUILDERS[name]()
        with open(os.path.join(exports, name), "wb") as handle:
            handle.write(data)
        sizes[name] = len(data)
    return sizes


def _zeros(rows: int) -> object:
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(bytearray(rows * 8))])


def _big_strings(count: int, each: int) -> object:
    import pyarrow as pa

    offsets = pa.array([i * each for i in range(count + 1)], pa.int32()).buffers()[1]
    data = pa.py_buffer(bytearray(count * each))
    return pa.Array.from_buffers(pa.string(), count, [None, offsets, data])


def _table(**columns: object) -> object:
    import pyarrow as pa

    return pa.table(columns)


def _ipc(table: object) -> bytes:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    assert isinstance(table, pa.Table)
    sink = pa.BufferOutputStream()
    options = ipc.IpcWriteOptions(compression="zstd")
    with ipc.new_file(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _parquet(table: object, **options: object) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", write_statistics=False, **options)
    return bytes(sink.getvalue())


def _baseline() -> bytes:
    import pyarrow as pa

    return _parquet(_table(k=pa.array(range(1000), pa.int64())))


def _ipc_zeros() -> bytes:
    return _ipc(_table(k=_zeros(200_000_000)))


def _ipc_strings() -> bytes:
    return _ipc(_table(s=_big_strings(4, 400_000_000)))


def _parquet_strings() -> bytes:
    return _parquet(_table(s=_big_strings(4, 400_000_000)), use_dictionary=False)


def _parquet_dictionary() -> bytes:
    table = _table(s=_big_strings(4, 400_000_000))
    return _parquet(table, use_dictionary=True, dictionary_pagesize_limit=2**31 - 1)


def _parquet_expansion() -> bytes:
    """A 40 MB dictionary entry that each of 4,000 rows repeats; no size declares the expansion."""
    import pyarrow as pa

    indices = pa.array([0] * 4000, pa.int32())
    values = pa.DictionaryArray.from_arrays(indices, _big_strings(1, 40_000_000))
    return _parquet(_table(s=values), dictionary_pagesize_limit=2**31 - 1, store_schema=False)


def _parquet_rows() -> bytes:
    """10^9 rows in 30 KB: one row group of 10^7 zeros, listed 100 times by the footer."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = _parquet(_table(k=_zeros(10_000_000)), row_group_size=10_000_000)
    meta = pq.read_metadata(pa.BufferReader(data))
    for _ in range(99):
        meta.append_row_groups(pq.read_metadata(pa.BufferReader(data)))
    sink = pa.BufferOutputStream()
    meta.write_metadata_file(sink)
    footer = bytes(sink.getvalue())[4:]  # without its leading magic
    return data[: len(data) - 8 - int.from_bytes(data[-8:-4], "little")] + footer


_BUILDERS = {
    "baseline": _baseline,
    "ipc_zeros": _ipc_zeros,
    "ipc_strings": _ipc_strings,
    "parquet_strings": _parquet_strings,
    "parquet_dictionary": _parquet_dictionary,
    "parquet_expansion": _parquet_expansion,
    "parquet_rows": _parquet_rows,
}


def record(artifact_root: str, rlm_root: str, names: str) -> dict[str, str]:
    """Record each exported bomb with its media type; return the experiment ids."""
    from cards import parse_metadata, parse_session_id
    from cas import ProjectStore, Provenance

    store = ProjectStore(artifact_root, PROJECT)
    ids: dict[str, str] = {}
    for name in names.split(","):
        metadata = parse_metadata(
            {
                "title": f"Hostile table {name}",
                "summary": "A table built to exhaust a reader's memory or time.",
                "query_fingerprint": "cd" * 32,
                "source": "bench",
                "source_version": "v1",
                "media_type": BOMBS[name][0],
            }
        )
        session = Provenance(session_id=parse_session_id(SESSION))
        ids[name] = store.record(rlm_root, session, metadata, name).card.experiment_id
    return ids


# -- running whole processes ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One whole `artmem` process: its peak RSS, wall time, and how it ended."""

    peak_mib: float
    seconds: float
    outcome: str


def run_artmem(config: str, argv: Sequence[str], scratch: str) -> Run:
    """Run `artmem` with `argv` to its end (killed after KILL_AFTER_S); measure it with wait4."""
    out_path = os.path.join(scratch, "stdout.json")
    command = [_artmem(), "--config", config, "--project", PROJECT, *argv, "--json"]
    with open(out_path, "wb") as out, open(os.devnull, "wb") as null:
        actions = [
            (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
            (os.POSIX_SPAWN_DUP2, null.fileno(), 2),
        ]
        started = time.perf_counter()
        pid = os.posix_spawn(command[0], command, os.environ, file_actions=actions)
        status, usage = _wait(pid, started)
        seconds = time.perf_counter() - started
    with open(out_path, "rb") as handle:
        output = handle.read()
    os.unlink(out_path)
    return Run(usage.ru_maxrss / 1024, seconds, _outcome(status, output))


def _artmem() -> str:
    path = os.path.join(os.path.dirname(sys.executable), "artmem")
    if not os.path.exists(path):
        raise SystemExit(f"no artmem next to {sys.executable}: install the project first")
    return path


def _wait(pid: int, started: float) -> tuple[int, resource.struct_rusage]:
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage
        if time.perf_counter() - started > KILL_AFTER_S:
            os.kill(pid, 9)
            _, status, usage = os.wait4(pid, 0)
            return status, usage
        time.sleep(0.005)


def _outcome(status: int, output: bytes) -> str:
    import json

    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    try:
        view = json.loads(output.decode("utf-8").strip().splitlines()[-1])
    except (ValueError, IndexError, UnicodeDecodeError):
        return f"exit {os.WEXITSTATUS(status)}, no JSON"
    if "error" in view:
        return str(view["error"].get("code"))
    return f"ok, {view['rows']} rows" if "rows" in view else "ok"


def _commands(experiment: str, where: str) -> dict[str, list[str]]:
    return {
        "show": ["show", experiment],
        "slice": ["slice", experiment, "--limit", "1"],
        "slice --where": ["slice", experiment, "--where", where, "--limit", "1"],
        TIGHT: ["slice", experiment, "--where", where, "--limit", "1"],
    }


def _write_config(workdir: str, rlm_root: str, artifact_root: str, extra: str = "") -> str:
    project_root = make_dirs(os.path.join(workdir, "work"))
    path = os.path.join(workdir, f"artmem{len(extra)}.toml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(
            f'artifact_root = "{artifact_root}"\nrlm_root = "{rlm_root}"\n'
            f'state_root = "{os.path.join(workdir, "state")}"\n'
            f'[[projects]]\nid = "{PROJECT}"\nroot = "{project_root}"\n{extra}'
        )
    return path


def _bench(workdir: str, names: list[str], repeat: int) -> None:
    rlm_root, artifact_root = os.path.join(workdir, "rlm"), os.path.join(workdir, "store")
    exports = make_dirs(os.path.join(rlm_root, "sessions", SESSION, "exports"))
    joined = ",".join(names)
    sizes = run_child("bench_hostile", "build", exports=exports, names=joined).values
    ids = run_child(
        "bench_hostile", "record", artifact_root=artifact_root, rlm_root=rlm_root, names=joined
    ).values
    config = _write_config(workdir, rlm_root, artifact_root)
    tight = _write_config(workdir, rlm_root, artifact_root, f"[slice]\nmax_seconds = {TIGHT_S}\n")
    runs: dict[tuple[str, str], list[Run]] = {}
    for _ in range(repeat):
        for name in names:
            for command, argv in _commands(str(ids[name]), BOMBS[name][1]).items():
                chosen = tight if command == TIGHT else config
                runs.setdefault((name, command), []).append(run_artmem(chosen, argv, workdir))
    _report(names, sizes, runs, repeat)


def _report(
    names: list[str],
    sizes: Mapping[str, object],
    runs: dict[tuple[str, str], list[Run]],
    repeat: int,
) -> None:
    print(f"hostile tables: whole artmem processes, median of {repeat} runs")
    print(f"  {machine_line()}")
    base = {cmd: median([r.peak_mib for r in runs[("baseline", cmd)]]) for cmd in _commands("", "")}
    rows = []
    worst = 0.0
    for name in names:
        for command in _commands("", ""):
            done = runs[(name, command)]
            peak = median([r.peak_mib for r in done])
            above = peak - base[command]
            if name != "baseline":
                worst = max(worst, max(r.peak_mib for r in done) - base[command])
            outcomes = sorted({r.outcome for r in done})
            rows.append(
                [
                    name if command == "show" else "",
                    f"{int(str(sizes[name])) / 1024:,.0f} KiB" if command == "show" else "",
                    command,
                    f"{peak:,.0f}",
                    f"{above:+,.0f}",
                    f"{median([r.seconds for r in done]):.2f}",
                    "; ".join(outcomes),
                ]
            )
    headers = ["class", "file", "command", "peak MiB", "over baseline", "s", "outcome"]
    print_table(headers, rows)
    slowest = max(max(r.seconds for r in done) for done in runs.values())
    print(f"  worst single run above baseline {worst:,.0f} MiB (target < {RSS_TARGET_MIB:.0f}): "
          f"{verdict(worst < RSS_TARGET_MIB)}")  # fmt: skip
    print(f"  slowest process {slowest:.1f} s (target: within the default [slice] max_seconds "
          f"of {TIME_BUDGET_S} s): {verdict(slowest < TIME_BUDGET_S)}")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--only", nargs="+", choices=sorted(BOMBS), help="these classes only")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the workspace goes")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    names = ["baseline", *(n for n in BOMBS if n != "baseline" and n in (args.only or BOMBS))]
    with workspace(args.dir, "artmem-bench-hostile-") as workdir:
        _bench(workdir, names, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
