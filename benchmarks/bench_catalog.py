"""The catalog (a tantivy index per project): build, search, whole processes.

Targets at 100,000 cards: a cold build (parse every card file, index it) at most 15 s, search
p95 at most 1 ms, a new process answering a search at most 0.1 s and 64 MiB; at 2,000 cards
`artmem search` at most 0.1 s whole-process. The card files are generated once into a work
directory (reused when it holds enough cards). Search latency is the median over `--runs`
passes of the queries, each pass on a catalog opened afresh, measured twice: with every hit read
from its card file (a new host), and in a long-lived host that keeps the hit cards it has read
(each still stat'ed, and read again if its file changed). Every figure is printed twice: wall
time, and CPU time (this process's, every thread, plus its children's), with the load average:
on a shared machine the CPU time is the steadier of the two.

    .venv/bin/python benchmarks/bench_catalog.py [--cards 100000] [--changed 100] [--host-only]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

from _common import percentile  # the benchmarks folder is on sys.path when run as a script
from bench_search import PROJECT, Corpus, make_card, make_queries

from cards import DEFAULT_LIMITS, IndexState, IndexStatus, Limits, dump_card, project_key
from cas import LocalCatalog, ProjectStore

LIMIT = 20
T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
_CLI = (
    "import sys; from harness_plugin.cli import main; "
    "sys.argv = ['artmem', *sys.argv[1:]]; sys.exit(main())"
)


def generate(work: Path, count: int, seed: int) -> Path:
    """`count` card files in `work` (reused if already there); the config file's path."""
    cards = work / "artifacts" / "projects" / project_key(PROJECT) / "cards"
    cards.mkdir(parents=True, exist_ok=True)
    for name in ("rlm", "state", "work/trial"):
        (work / name).mkdir(parents=True, exist_ok=True)
    have = sum(1 for _ in os.scandir(cards))
    if have < count:
        corpus = Corpus(random.Random(seed))
        for number in range(count):
            card = make_card(corpus, number)
            if number >= have:
                (cards / f"{card.experiment_id}.json").write_bytes(dump_card(card))
    config = work / "artmem.toml"
    config.write_text(
        f'artifact_root = "{work}/artifacts"\nrlm_root = "{work}/rlm"\n'
        f'state_root = "{work}/state"\n[[projects]]\nid = "{PROJECT}"\nroot = "{work}/work/trial"\n'
    )
    return config


def settle(store: ProjectStore) -> None:
    """Date the cards directory back past the racy window (as minutes of quiet would)."""
    path = store.local_path(store.layout.cards_dir)
    old = os.stat(path).st_mtime_ns - 60 * 10**9
    os.utime(path, ns=(old, old))


def change(store: ProjectStore, names: Sequence[str], round_: int) -> None:
    """Rewrite `names` as the indexer does: a new index status, under the commit lock.

    Through the store's own card writes (logged in the card log where the store has one).
    """
    status = IndexStatus(state=IndexState.QUEUED, attempts=round_ + 1)
    for name in names:
        store.update_index_status(name.removesuffix(".json"), lambda _: status)
    settle(store)


Clocked = tuple[float, float]  # (wall, CPU) seconds


def clocked(run: Callable[[], T]) -> tuple[Clocked, T]:
    """`run`'s wall and CPU time (this process's, every thread, and its children's); its result."""
    cpu, start = _cpu(), time.perf_counter()
    result = run()
    return (time.perf_counter() - start, _cpu() - cpu), result


def timed(run: Callable[[], object]) -> Clocked:
    return clocked(run)[0]


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def host(args: argparse.Namespace, work: Path) -> None:
    """Cold build, catching up, in-process search and a new process's search at `args.cards`."""
    generate(work, args.cards, args.seed)
    limits = Limits(cards_per_project=max(args.cards, DEFAULT_LIMITS.cards_per_project))
    store = ProjectStore(str(work / "artifacts"), PROJECT, limits=limits)
    state = str(work / "state")
    names = sorted(os.listdir(store.local_path(store.layout.cards_dir)))
    change(store, names[:1], -1)  # a first write through the store (it starts the card log)
    index = Path(LocalCatalog(store, state).path or "")
    cold = []
    for _ in range(args.builds):
        shutil.rmtree(index, ignore_errors=True)
        cold.append(timed(lambda: LocalCatalog.open(store, state)))
    warm = [timed(lambda: LocalCatalog.open(store, state)) for _ in range(args.runs)]
    rng = random.Random(args.seed)
    changed: list[Clocked] = []
    ways: list[str] = []
    for round_ in range(args.runs):
        change(store, rng.sample(names, args.changed), round_)
        took, opened = clocked(partial(LocalCatalog.open, store, state))
        changed.append(took)
        ways.append(opened.last_refresh)  # "log": found by the card log
    corpus = Corpus(random.Random(args.seed))
    sample = [make_card(corpus, n) for n in range(200)]  # the same cards: exact probes hit
    mix = make_queries(corpus, sample, args.queries)
    queries = [q.text for q in mix]
    kinds = [q.kind for q in mix]
    fresh, kept = [], []
    for _ in range(args.runs):  # alternating: the machine's load falls on both alike
        reader = LocalCatalog(store, state, hit_cards=None)  # no hit card kept
        reader.refresh()
        fresh.append(_pass(reader.search, queries))
        kept.append(_pass(LocalCatalog.open(store, state).search, queries))
    size = sum(path.stat().st_size for path in index.rglob("*") if path.is_file())
    print(
        f"host: {args.cards:,} cards, {len(queries)} queries, limit {LIMIT}, "
        f"index {size / 1e6:.1f} MB on disk; python {platform.python_version()}; {_load()}"
    )
    _rows("cold build (parse every card, index it)", cold, "s", "< 15 s", f"{args.builds} builds")
    _rows("open, nothing changed", warm, "s")
    _rows(f"open after {args.changed} changed cards", changed, "s")
    _row("  found the changed cards by", ", ".join(sorted(set(ways))))
    _percentiles("search, every hit read from its file", fresh, kinds)
    _percentiles("search, long-lived host (hit cards kept)", kept, kinds)
    _new_process(args, store, state, queries)


def _new_process(
    args: argparse.Namespace, store: ProjectStore, state: str, queries: Sequence[str]
) -> None:
    """A new process that imports the store, opens the catalog and searches: time and RSS."""
    code = (
        "import sys; from cas import LocalCatalog, ProjectStore; "
        "from cards import Limits; limits = Limits(cards_per_project=int(sys.argv[3])); "
        "store = ProjectStore(sys.argv[1], sys.argv[2], limits=limits); "
        "LocalCatalog.open(store, sys.argv[4]).search(sys.argv[5], 20); "
        "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"
    )
    limit = str(store.limits.cards_per_project)
    seconds: list[Clocked] = []
    resident: list[float] = []
    argv = [sys.executable, "-c", code, store.artifact_root, PROJECT, limit, state]
    subprocess.run([*argv, queries[0]], env=_env(), capture_output=True, check=True)  # warm-up
    for number in range(args.runs):
        run = partial(subprocess.run, [*argv, queries[number % len(queries)]], env=_env())
        took, done = clocked(partial(run, capture_output=True, text=True, check=True))
        seconds.append(took)
        # VmHWM, not ru_maxrss: Linux carries a child's maxrss over from its parent at fork.
        resident.append(int(done.stdout) / 1024)
    _rows("a new process: import, open, search", seconds, "s", "< 0.1 s")
    _row("  its peak RSS", _spread(resident, "MiB"), "< 64 MiB")


def _env() -> dict[str, str]:
    """The children's environment: bytecode cached, as an installed package's is.

    With PYTHONDONTWRITEBYTECODE set (some sandboxes set it), every start compiles every
    module it imports from source: 0.03-0.04 s more per `artmem search`.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _pass(search: Callable[[str, int], object], queries: Sequence[str]) -> list[Clocked]:
    """One pass over `queries` (the first 20 run once before), each query's (wall, CPU) in ms."""
    for query in queries[:20]:
        search(query, LIMIT)
    return [_ms(timed(partial(search, query, LIMIT))) for query in queries]


def _ms(clocked: Clocked) -> Clocked:
    return clocked[0] * 1e3, clocked[1] * 1e3


def _percentiles(name: str, passes: Sequence[Sequence[Clocked]], kinds: Sequence[str]) -> None:
    """p50 and p95 of each pass, as medians over the passes (min-max), then by kind of query."""
    runs = f"{len(passes)} passes"
    for pct, target in ((50, ""), (95, "< 1 ms")):
        values = [
            (percentile([w for w, _ in times], pct), percentile([c for _, c in times], pct))
            for times in passes
        ]
        _rows(f"{name}: p{pct}", values, "ms", target, runs)
    for kind in dict.fromkeys(kinds):
        cpu = [
            statistics.median(
                percentile([c for (_, c), k in zip(times, kinds, strict=True) if k == kind], pct)
                for times in passes
            )
            for pct in (50, 95)
        ]
        _row(f"  {kind}: CPU p50 / p95", f"{cpu[0]:.2f} / {cpu[1]:.2f} ms")


def cli(args: argparse.Namespace, work: Path) -> None:
    """Whole-process `artmem search` / `status` at `args.cli_cards` cards, paired with python."""
    config = generate(work, args.cli_cards, args.seed)
    cwd = work / "work" / "trial"
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "artmem --help": [sys.executable, "-c", _CLI, "--help"],
        "artmem status": [sys.executable, "-c", _CLI, "status", "--config", str(config)],
        "artmem search": [sys.executable, "-c", _CLI, "search", "cohort", "--config", str(config)],
    }
    env = _env()
    for argv in commands.values():  # warm the page cache and build the catalog
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)
    samples: dict[str, list[Clocked]] = {name: [] for name in commands}
    for _ in range(args.runs):  # paired: each round runs every command once
        for name, argv in commands.items():
            run = partial(subprocess.run, argv, cwd=cwd, env=env, capture_output=True)
            samples[name].append(timed(run))
    base = statistics.median(wall for wall, _ in samples["python -c pass"])
    print(f"CLI: {args.cli_cards:,} cards, {args.runs} paired runs, whole processes; {_load()}")
    for name, values in samples.items():
        target = {"artmem --help": "0.08 s", "artmem status": "0.15 s"}.get(name, "")
        target = "0.1 s" if name == "artmem search" else target
        ratio = f"{statistics.median(wall for wall, _ in values) / base:.1f}x python"
        _rows(name, values, "s", target, ratio)


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _rows(
    name: str, values: Sequence[Clocked], unit: str, target: str = "", note: str = ""
) -> None:
    """Two rows: the wall times' median (min-max), then the CPU times'."""
    _row(f"{name} (wall)", _spread([wall for wall, _ in values], unit), target, note)
    _row(f"{name} (CPU)", _spread([cpu for _, cpu in values], unit))


def _spread(values: Sequence[float], unit: str) -> str:
    return f"{statistics.median(values):.3f} {unit} ({min(values):.3f}-{max(values):.3f})"


def _row(name: str, value: str, target: str = "", note: str = "") -> None:
    print(f"  {name:<42} {value:>26} {target:>8} {note:>14}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cards", type=int, default=100_000)
    parser.add_argument("--changed", type=int, default=100)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--cli-cards", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--builds", type=int, default=3, help="cold builds timed")
    parser.add_argument("--work", help="a directory to keep the generated cards in, for reuse")
    parser.add_argument("--quick", action="store_true", help="2,000 cards, 3 runs (smoke test)")
    parser.add_argument("--host-only", action="store_true", help="skip the whole-process CLI runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.cards, args.runs, args.queries, args.changed, args.builds = 2_000, 3, 40, 10, 1
    work = Path(args.work or tempfile.mkdtemp(prefix="artmem-bench-catalog-"))
    host(args, work / f"host-{args.cards}")
    if not args.host_only:
        cli(args, work / f"cli-{args.cli_cards}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
