"""Search latency of one word and of several words at 100,000 cards, wall and CPU time.

The cards, the catalog and the query mix are `bench_catalog.py`'s (same seed); searches go
through `LocalCatalog.search`, hits re-read from disk, as there. Two passes over the queries
after 20 warm-up queries: the first as `bench_catalog.py` measures it (caches filled on the
way), the second with what the first left in the caches (a long-running host). CPU time
beside wall time: less disturbed when another process shares the CPUs. To compare two
versions of the code, alternate runs with `PYTHONPATH=<other checkout>`, each with its own
`--state` (the catalog file format may differ between them).

    .venv/bin/python benchmarks/bench_search_words.py [--work DIR] [--state DIR] [--cards N]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from _common import percentile  # the benchmarks folder is on sys.path when run as a script
from bench_catalog import generate
from bench_search import PROJECT, Corpus, make_card, make_queries

from cards import DEFAULT_LIMITS, Limits
from cas import LocalCatalog, ProjectStore

LIMIT = 20
KINDS = ("single word", "multi word")


def open_catalog(work: Path, cards: int, seed: int, state: Path) -> LocalCatalog:
    """The catalog of `cards` generated cards (a cold build once per state directory)."""
    generate(work, cards, seed)
    limits = Limits(cards_per_project=max(cards, DEFAULT_LIMITS.cards_per_project))
    store = ProjectStore(str(work / "artifacts"), PROJECT, limits=limits)
    state.mkdir(parents=True, exist_ok=True)
    return LocalCatalog.open(store, str(state))


def measure(
    search: Callable[[str], object], queries: Sequence[tuple[str, str]]
) -> dict[str, list[float]]:
    """Wall and CPU milliseconds per query, by "wall <kind>" / "cpu <kind>" (kind "mix": all)."""
    found: dict[str, list[float]] = {}
    for kind, text in queries:
        wall, cpu = time.perf_counter(), time.process_time()
        search(text)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        for name, value in (("wall", wall), ("cpu", cpu)):
            for of in (kind, "mix"):
                found.setdefault(f"{name} {of}", []).append(value * 1e3)
    return found


def _resident() -> int:
    """This process's resident set in bytes (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except OSError:
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cards", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--work", help="a directory to keep the cards in, for reuse")
    parser.add_argument("--state", help="the state root (default: beside the cards)")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="artmem-bench-words-"))
    host = work / f"host-{args.cards}"
    catalog = open_catalog(host, args.cards, args.seed, Path(args.state or host / "state"))
    corpus = Corpus(random.Random(args.seed))
    sample = [make_card(corpus, n) for n in range(200)]  # bench_catalog's queries, exactly
    queries = [(q.kind, q.text) for q in make_queries(corpus, sample, args.queries)]
    print(f"{len(catalog):,} cards, {len(queries)} queries, limit {LIMIT}")
    loaded = _resident()
    for _, text in queries[:20]:
        catalog.search(text, LIMIT)
    for number in (1, 2):
        found = measure(lambda text: catalog.search(text, LIMIT), queries)
        for name in ("wall", "cpu"):
            for kind in (*KINDS, "mix"):
                values = found[f"{name} {kind}"]
                p50, p95 = percentile(values, 50), percentile(values, 95)
                print(f"  pass {number} {name:<4} {kind:<12} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms")
    print(f"  RSS grew by {(_resident() - loaded) / 2**20:.0f} MiB over the searches (caches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
