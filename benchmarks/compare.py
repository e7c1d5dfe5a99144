"""Every comparison of issue 14, side by side in one run, as whole processes.

Each row times `artmem ...` commands (the installed CLI, against a real configuration and store
in a temporary directory) and a baseline command in the same run, in pairs whose order
alternates, and prints medians, their spread (min–max) and the ratio of the medians:

- record of `--size-mib` of fresh content (a fresh store per run) vs `cp` + `sync` of the file
- record of bytes already stored (a new card, the object deduplicated) vs `hashlib.file_digest`
- record of 1 MiB of fresh content vs `cp` + `sync` of it
- `artmem resolve`: first (its verification record deleted) and repeat, vs `file_digest`
- `artmem search` over 2,000 cards, `artmem status` and `artmem --help` vs `python -c pass`
- `artmem slice` of 2 columns and 1% of rows of a Parquet file to CSV vs DuckDB and polars
  (the `bench` extra; a missing module is skipped with a line saying so), and a selective
  slice (2 columns of a 0.4% key range inside one row group) vs DuckDB
- record vs `dvc add` of the same fresh file, only where `dvc` is installed

Before the measured pairs each command runs once untimed (caches, a persisted catalog), except
under `--quick`, a smoke run of about 10 seconds whose figures mean little. Each
run of the large-file rows waits for a quiet moment (at most `--quiet-wait` seconds) and starts
right after a file-sized scratch file's page cache is freed (`--no-recycle` turns that off).

    .venv/bin/python benchmarks/compare.py [--size-mib 1024] [--repeat 5] [--quick] [--dir D]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from _common import (
    MIB,
    Plan,
    Row,
    Run,
    Scalar,
    at_most,
    check_free_space,
    cpu_model,
    filesystem_line,
    make_dirs,
    paired,
    print_table,
    ratio_at_most,
    read_through,
    remove_tree,
    row,
    run_child,
    timed_command,
    workspace,
    write_random_file,
)

if TYPE_CHECKING:
    from cards import CardMetadata

PROJECT = "bench-project"
CARDS_PROJECT = "cards-project"
SESSION = "bench-s1"
BIG = "big.bin"
WIDE = "wide.parquet"
MAX_SIZE_MIB = 1024  # the default `limits.artifact_bytes`: a larger record is refused
SMALL = MIB
PY = sys.executable
DIGEST = "import hashlib, sys; hashlib.file_digest(open(sys.argv[1], 'rb'), 'sha256')"
DUCKDB = (
    "import duckdb, sys; duckdb.sql(f\"COPY (SELECT k, a FROM read_parquet('{sys.argv[1]}') "
    "WHERE k >= {sys.argv[2]} AND k < {sys.argv[3]}) TO '{sys.argv[4]}' (HEADER)\")"
)
POLARS = (
    "import polars as pl, sys; k = pl.col('k'); pl.scan_parquet(sys.argv[1])"
    ".filter((k >= int(sys.argv[2])) & (k < int(sys.argv[3]))).select('k', 'a')"
    ".sink_csv(sys.argv[4])"
)

WORDS = "cohort response survival assay dose forecast churn retention latency genome".split()
BENCH_EXTRA = "install the `bench` extra: pip install -c constraints.txt -e '.[bench]'"


# -- child-process setup (imports the store only in the child) --------------------------------


def make_cards(artifact_root: str, rlm_root: str, count: int) -> dict[str, Scalar]:
    """Record one small table into the cards project, then write `count - 1` more cards for it.

    Writing card files directly keeps setup fast (a record fsyncs several times); every card is
    valid and names the one recorded object.
    """
    from cards import ProjectId, dump_card, parse_metadata, parse_session_id
    from cards.testing import card_for_bytes
    from cas import ProjectStore, Provenance

    def metadata(number: int) -> CardMetadata:
        words = " ".join(WORDS[number % 7 :][:4])
        return parse_metadata(
            {
                "title": f"Result {number} {words}",
                "summary": f"Synthetic card {number} for the search comparison: {words}.",
                "query_fingerprint": hashlib.sha256(b"card-%d" % number).hexdigest(),
                "source": "bench",
                "source_version": "v1",
            }
        )

    store = ProjectStore(artifact_root, CARDS_PROJECT)
    content = b"cohort,response\nA,0.5\nB,0.75\n"
    with open(os.path.join(rlm_root, "sessions", SESSION, "exports", "cards.csv"), "wb") as out:
        out.write(content)
    provenance = Provenance(session_id=parse_session_id(SESSION))
    first = store.record(rlm_root, provenance, metadata(0), "cards.csv").card
    located = store.locate(first.experiment_id).source.path
    cards_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(located))), "cards")
    for number in range(1, count):
        card = card_for_bytes(
            content, metadata(number), project_id=ProjectId(CARDS_PROJECT), session_id=SESSION,
            now=first.created_at, chunk_manifest_sha256=first.chunk_manifest_sha256,
        )  # fmt: skip
        path = os.path.join(cards_dir, card.experiment_id + ".json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(dump_card(card))
    return {"cards": count}


# -- the workspace ----------------------------------------------------------------------------


class Bench:
    """The temporary workspace: roots, projects, source files, and the `artmem` command."""

    def __init__(self, workdir: str, size: int) -> None:
        self.workdir = os.path.realpath(workdir)
        self.size = size
        self.rlm_root = os.path.join(self.workdir, "rlm")
        self.exports = make_dirs(os.path.join(self.rlm_root, "sessions", SESSION, "exports"))
        self.config = self.write_config("main")
        self.cli = _artmem_command()

    def path(self, *parts: str) -> str:
        return os.path.join(self.workdir, *parts)

    def write_config(self, name: str) -> str:
        """A configuration with its own artifact and state roots below `name`."""
        roots = {"artifact_root": self.path(name, "store"), "state_root": self.path(name, "state")}
        lines = [f'{key} = "{value}"' for key, value in roots.items()]
        lines.append(f'rlm_root = "{self.rlm_root}"')
        for project in (PROJECT, CARDS_PROJECT):
            root = make_dirs(self.path("work", project))
            lines += ["[[projects]]", f'id = "{project}"', f'root = "{root}"']
        path = self.path(f"{name}.toml")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        return path

    def argv(self, *args: str, config: str | None = None, project: str = PROJECT) -> list[str]:
        return [*self.cli, "--config", config or self.config, "--project", project, *args]

    def json(self, *args: str, project: str = PROJECT) -> dict[str, object]:
        """Run an untimed `artmem ... --json` and return what it printed."""
        done = subprocess.run(
            self.argv(*args, "--json", project=project), capture_output=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"artmem {args[0]} failed: {done.stdout!r} {done.stderr!r}")
        value = json.loads(done.stdout)
        assert isinstance(value, dict)
        return value

    def record_args(self, name: str, number: int) -> list[str]:
        fingerprint = hashlib.sha256(f"{name}-{number}".encode()).hexdigest()
        return ["record", "--session", SESSION, name, "--title", f"Benchmark {name}",
                "--summary", "Bytes recorded by benchmarks/compare.py.",
                "--query-fingerprint", fingerprint, "--source", "bench",
                "--source-version", "v1"]  # fmt: skip


def _artmem_command() -> list[str]:
    """The installed CLI beside this interpreter, else the one on PATH, else the module."""
    beside = os.path.join(os.path.dirname(sys.executable), "artmem")
    if os.access(beside, os.X_OK):
        return [beside]
    found = shutil.which("artmem")
    return [found] if found else [PY, "-m", "harness_plugin.cli"]


def cp_sync(source: str, target: str) -> float:
    """`cp` then `sync` of the copy (an fsync of that file), as two whole processes."""
    seconds = timed_command(["cp", source, target]) + timed_command(["sync", target])
    os.unlink(target)
    return seconds


def record_fresh(bench: Bench, number: int) -> float:
    """`artmem record` of the big file into a fresh store (run `number`), removed after."""
    config = bench.write_config(f"fresh{number}")
    try:
        return timed_command(bench.argv(*bench.record_args(BIG, 0), "--json", config=config))
    finally:
        remove_tree(bench.path(f"fresh{number}"))


# -- the rows ---------------------------------------------------------------------------------


def record_rows(bench: Bench, plan: Plan) -> list[Row]:
    """Fresh content (a fresh store per run) and bytes already stored, vs cp+sync and hashing."""
    big = os.path.join(bench.exports, BIG)
    mib = bench.size // MIB

    def fresh(number: int) -> float:
        return record_fresh(bench, number)

    def copy(number: int) -> float:
        return cp_sync(big, bench.path(f"copy{number}.bin"))

    def stored(number: int) -> float:
        return timed_command(bench.argv(*bench.record_args(BIG, number + 2), "--json"))

    def digest(_number: int) -> float:
        return timed_command([PY, "-c", DIGEST, big])

    bench.json(*bench.record_args(BIG, 1))  # the object the dedup runs find stored
    return [
        row(f"record {mib} MiB, fresh content", paired(plan, fresh, copy, heavy=bench.size),
            "cp + sync", "≤ 1.18×", ratio_at_most(1.18)),
        row(f"record {mib} MiB already stored", paired(plan, stored, digest, heavy=bench.size),
            "hashlib.file_digest", "≤ 1.1×", ratio_at_most(1.1)),
    ]  # fmt: skip


def small_record_row(bench: Bench, plan: Plan) -> Row:
    """1 MiB of fresh content each run, recorded vs copied."""

    def small(number: int) -> str:
        path = os.path.join(bench.exports, f"small{number}.bin")
        if not os.path.exists(path):
            write_random_file(path, SMALL)
        return path

    def ours(number: int) -> float:
        name = os.path.basename(small(number))
        return timed_command(bench.argv(*bench.record_args(name, 0), "--json"))

    def theirs(number: int) -> float:
        return cp_sync(small(number), bench.path(f"small-copy{number}.bin"))

    return row("record 1 MiB, fresh content", paired(plan, ours, theirs), "cp + sync",
               "≤ 0.12 s", at_most(0.12))  # fmt: skip


def resolve_rows(bench: Bench, plan: Plan) -> list[Row]:
    """The first resolve (no verification record) and a repeat, vs hashing the object."""
    experiment = str(bench.json(*bench.record_args(BIG, 1))["experiment_id"])
    obj = str(bench.json("resolve", experiment)["path"])
    record = obj + ".verified"

    def first(_number: int) -> float:
        if os.path.exists(record):
            os.unlink(record)
        return timed_command(bench.argv("resolve", experiment, "--json"))

    def repeat(_number: int) -> float:
        bench.json("resolve", experiment)
        return timed_command(bench.argv("resolve", experiment, "--json"))

    def digest(_number: int) -> float:
        return timed_command([PY, "-c", DIGEST, obj])

    return [
        row("artmem resolve, first", paired(plan, first, digest, heavy=bench.size),
            "hashlib.file_digest", "≤ 1.1×", ratio_at_most(1.1)),
        row("artmem resolve, repeat", paired(plan, repeat, digest),
            "hashlib.file_digest", "≤ 0.15 s", at_most(0.15)),
    ]  # fmt: skip


def startup_rows(bench: Bench, plan: Plan, cards: int) -> list[Row]:
    """search over the cards project, status and --help, vs an interpreter doing nothing."""
    store = bench.path("main", "store")
    run_child("compare", "make_cards", artifact_root=store, rlm_root=bench.rlm_root, count=cards)
    commands = {
        f"artmem search, {cards:,} cards": (["search", "cohort response", "--json"], 0.15),
        "artmem status": (["status", "--json"], 0.15),
        "artmem --help": (["--help"], 0.08),
    }
    rows = []
    for name, (args, target) in commands.items():
        argv = (
            bench.argv(*args, project=CARDS_PROJECT)
            if args[0] != "--help"
            else [*bench.cli, "--help"]
        )

        def ours(_number: int, argv: list[str] = argv) -> float:
            return timed_command(argv)

        def nothing(_number: int) -> float:
            return timed_command([PY, "-c", "pass"])

        pair = paired(plan, ours, nothing)
        rows.append(row(name, pair, "python -c pass", f"≤ {target} s", at_most(target)))
    return rows


def slice_rows(bench: Bench, plan: Plan) -> list[Row | str]:
    """2 columns of a Parquet file, to CSV, vs DuckDB and polars: 1% of its rows, and a
    selective slice (a narrow key range, 0.4% of the rows, inside one row group) vs DuckDB."""
    parquet = os.path.join(bench.exports, WIDE)
    written = run_child("bench_slice", "write_source", path=parquet, size=bench.size)
    rows, group_rows = int(written.number("rows")), int(written.number("group_rows"))
    experiment = str(bench.json(*bench.record_args(WIDE, 0))["experiment_id"])
    obj = str(bench.json("resolve", experiment)["path"])
    read_through(obj)
    counts: dict[str, int] = {}

    def command(name: str, argv_of: Callable[[str], list[str]]) -> Run:
        def run(number: int) -> float:
            out = bench.path(f"{name}{number}.csv")
            try:
                return timed_command(argv_of(out))
            finally:
                counts.setdefault(name, _csv_rows(out))
                os.unlink(out)

        return run

    def ours(name: str, low: int, high: int) -> Run:
        where = f"k >= {low} and k < {high}"
        argv = ["slice", experiment, "--columns", "k,a", "--where", where, "--json", "--out"]
        return command(name, lambda out: bench.argv(*argv, out))

    low = rows // 2 + 12_345
    high = low + rows // 100
    results: list[Row | str] = []
    for label, module, code, target in (
        ("DuckDB", "duckdb", DUCKDB, 1.3),
        ("polars", "polars", POLARS, None),
    ):
        if importlib.util.find_spec(module) is None:
            results.append(f"skipped: the {label} baseline (no module {module!r}; {BENCH_EXTRA})")
            continue
        theirs = command(module, _query(code, obj, low, high))
        name = f"artmem slice 2 cols, 1% rows, to CSV ({label})"
        pair = paired(plan, ours("artmem", low, high), theirs)
        check = None if target is None else ratio_at_most(target)
        results.append(row(name, pair, label, "" if target is None else f"≤ {target}×", check))
    results.append(selective_row(plan, group_rows, ours, command, obj))
    for narrow in (False, True):
        if len({n for name, n in counts.items() if name.endswith("-narrow") == narrow}) > 1:
            raise RuntimeError(f"the slices disagree on their rows: {counts}")
    return results


def selective_row(
    plan: Plan,
    group_rows: int,
    ours: Callable[[str, int, int], Run],
    command: Callable[[str, Callable[[str], list[str]]], Run],
    obj: str,
) -> Row | str:
    """A person's selective slice: 2 columns of a 0.4% key range inside one row group.

    Start-up bound: what it measures is the whole process (imports, the bounded child, the
    verified reads of one row group's two column chunks), against DuckDB from Python.
    """
    if importlib.util.find_spec("duckdb") is None:
        return f"skipped: the selective slice (no module 'duckdb'; {BENCH_EXTRA})"
    low = 3 * group_rows + group_rows // 3  # inside the fourth of the 8 row groups
    high = low + group_rows // 32  # 0.4% of the rows
    theirs = command("duckdb-narrow", _query(DUCKDB, obj, low, high))
    name = f"artmem slice 2 cols, {high - low} rows in 1 row group, to CSV (DuckDB)"
    pair = paired(plan, ours("artmem-narrow", low, high), theirs)
    return row(name, pair, "DuckDB", "≤ 1.5×", ratio_at_most(1.5))


def _query(code: str, path: str, low: int, high: int) -> Callable[[str], list[str]]:
    return lambda out: [PY, "-c", code, path, str(low), str(high), out]


def _csv_rows(path: str) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle) - 1


def dvc_row(bench: Bench, plan: Plan) -> Row | str:
    """`dvc add` of the same fresh file into a fresh repository, where dvc is installed."""
    dvc = shutil.which("dvc")
    if dvc is None:
        return "skipped: `dvc add` (dvc is not installed)"
    big = os.path.join(bench.exports, BIG)

    def ours(number: int) -> float:
        return record_fresh(bench, number)

    def theirs(number: int) -> float:
        repo = make_dirs(bench.path(f"dvc{number}"))
        try:
            subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=repo, check=True)
            os.link(big, os.path.join(repo, BIG))
            return timed_command([dvc, "add", "-q", BIG], cwd=repo)
        finally:
            remove_tree(repo)

    mib = bench.size // MIB
    return row(f"record {mib} MiB, fresh content", paired(plan, ours, theirs, heavy=bench.size),
               "dvc add")  # fmt: skip


# -- the command ------------------------------------------------------------------------------

GROUPS = ("record", "resolve", "startup", "slice", "dvc")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size-mib", type=int, default=1024, help="large files (default 1024)")
    parser.add_argument("--repeat", type=int, default=5, help="paired runs per row (default 5)")
    parser.add_argument("--cards", type=int, default=2000, help="cards searched (default 2000)")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 16 MiB, 200 cards, 1 run, no warm-up"
    )
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the workspace goes")
    parser.add_argument("--only", action="append", choices=GROUPS, help="run these rows only")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=10.0,
        help="seconds a large-file run waits for an idle machine (default 10)",
    )
    parser.add_argument(
        "--no-recycle",
        action="store_true",
        help="do not free a file-sized scratch file of page cache before runs",
    )
    args = parser.parse_args(argv)  # fmt: skip
    # Every command runs with its bytecode cached, as an installed package's is and as a user's
    # second command finds it: with PYTHONDONTWRITEBYTECODE (some sandboxes set it) every
    # `artmem` start would compile every module it imports (~0.03-0.04 s more per command).
    bytecode_off = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    size_mib, repeat = (16, 1) if args.quick else (args.size_mib, args.repeat)
    if not 2 <= size_mib <= MAX_SIZE_MIB or repeat < 1 or args.cards < 1:
        parser.error(f"--size-mib must be 2..{MAX_SIZE_MIB}; --repeat and --cards at least 1")
    refusal = check_free_space(os.path.abspath(args.dir), 7 * size_mib * MIB)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    groups = set(args.only or GROUPS)
    with workspace(args.dir, "artmem-compare-") as workdir:
        bench = Bench(workdir, size_mib * MIB)
        quiet = 0.0 if args.quick else args.quiet_wait
        recycle = not (args.quick or args.no_recycle)
        plan = Plan(repeat, quiet, recycle, bench.workdir, warm_up=not args.quick)
        _header(bench, plan, bytecode_off)
        results = _run(bench, plan, groups, 200 if args.quick else args.cards)
    _report(results)
    return 0


def _run(bench: Bench, plan: Plan, groups: set[str], cards: int) -> list[Row | str]:
    started = time.perf_counter()
    write_random_file(os.path.join(bench.exports, BIG), bench.size)
    read_through(os.path.join(bench.exports, BIG))
    results: list[Row | str] = []
    if "record" in groups:
        results += [*record_rows(bench, plan), small_record_row(bench, plan)]
    if "resolve" in groups:
        results += resolve_rows(bench, plan)
    if "startup" in groups:
        results += startup_rows(bench, plan, cards)
    if "slice" in groups:
        results += slice_rows(bench, plan)
    if "dvc" in groups:
        results.append(dvc_row(bench, plan))
    results.append(f"whole run: {time.perf_counter() - started:.0f} s")
    return results


def _header(bench: Bench, plan: Plan, bytecode_off: bool) -> None:
    version = subprocess.run([*bench.cli, "--version"], capture_output=True, text=True).stdout
    print(f"artmem {version.strip().split()[-1] if version.strip() else '?'}: "
          f"{plan.repeat} paired run(s) per row, order alternating, whole processes; "
          "seconds, median (min–max)")  # fmt: skip
    print(f"  machine: {cpu_model()}, {os.cpu_count()} CPUs; Python {platform.python_version()} "
          f"on {platform.system()} {platform.machine()}")  # fmt: skip
    print(f"  temp dir: {filesystem_line(bench.workdir)}")
    print(f"  libraries: {_versions('pyarrow', 'duckdb', 'polars', 'dvc')}")
    heavy = (
        f"large-file runs wait up to {plan.quiet_wait:.0f} s for a quiet moment"
        if plan.quiet_wait
        else "runs start at once"
    )
    freed = "; each starts after a file-sized page-cache scratch is freed" if plan.recycle else ""
    print(f"  {heavy}{freed}; large files: {bench.size // MIB} MiB")
    if bytecode_off:
        print("  PYTHONDONTWRITEBYTECODE was set: dropped for the commands, which cache bytecode")
    print()


def _versions(*names: str) -> str:
    from importlib import metadata

    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return ", ".join(found)


def _report(results: list[Row | str]) -> None:
    rows = [r for r in results if isinstance(r, Row)]
    headers = ["comparison", "artmem s", "baseline", "baseline s", "ratio", "target", "verdict"]
    print_table(headers, [r.cells() for r in rows])
    notes = [r for r in results if isinstance(r, str)]
    if notes:
        print()
        for note in notes:
            print(f"  {note}")


if __name__ == "__main__":
    sys.exit(main())
