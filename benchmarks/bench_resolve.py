"""First and cached resolve against hashlib.file_digest over the same stored object.

Targets (ARCHITECTURE.md): the first resolve (which must hash) at least 0.9 of `hashlib.file_digest`
speed over the same object, and a cached resolve under 1 ms. Setup records one file; each repeat
then runs in a fresh child process, which times its first resolve and a `file_digest` of the object
path in alternating order. A last child measures 1,000 cached resolves and, for context, resolves in
`IntegrityMode.ALWAYS`. Each child waits for a quiet moment first (other processes share the CPUs);
`--quiet-wait 0` starts at once.

    .venv/bin/python benchmarks/bench_resolve.py [--size-mib 1024] [--repeat 3] [--quick] [--dir D]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Callable, Sequence

from _common import (
    MIB,
    ChildResult,
    Conditions,
    Scalar,
    add_condition_arguments,
    add_size_arguments,
    best,
    filesystem_line,
    foreign_load,
    machine_line,
    make_dirs,
    median,
    mib_per_s,
    percentile,
    print_table,
    read_through,
    run_child,
    sizing,
    verdict,
    workspace,
    write_random_file,
)

from cas import IntegrityMode, ProjectStore, Resolved, VerificationCache

PROJECT = "bench-project"
SESSION = "bench-s1"
SOURCE_NAME = "data.bin"
SPEED_TARGET = 0.9
CACHED_TARGET_US = 1000.0


# -- child-process workloads ------------------------------------------------------------------


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _file_digest(path: str, expected: str) -> None:
    with open(path, "rb") as handle:
        if hashlib.file_digest(handle, "sha256").hexdigest() != expected:
            raise RuntimeError("file_digest disagrees with the card")


def _first_resolve(store: ProjectStore, experiment: str) -> Resolved:
    resolved = store.resolve(experiment)
    if resolved.hashed is not True:
        raise RuntimeError("a first resolve did not hash the object")
    return resolved


def first_resolve(artifact_root: str, experiment: str, resolve_first: bool) -> dict[str, Scalar]:
    """Ours vs baseline in one fresh process: its first resolve and a file_digest of the object."""
    store = ProjectStore(artifact_root, PROJECT)
    card = store.load_card(experiment)
    path = os.path.join(artifact_root, *store.layout.root)
    path = os.path.join(path, *store.layout.object_path(card.typed_artifact_id))
    with contextlib.suppress(FileNotFoundError):  # a genuine first resolve: no record to trust
        os.unlink(path + ".verified")
    resolve_s = digest_s = 0.0
    for turn in ("resolve", "digest") if resolve_first else ("digest", "resolve"):
        if turn == "resolve":
            resolve_s = _timed(lambda: _first_resolve(store, experiment))
        else:
            digest_s = _timed(lambda: _file_digest(path, card.artifact.sha256))
    return {"resolve_seconds": resolve_s, "digest_seconds": digest_s, "path": path}


def recorded_resolve(artifact_root: str, experiment: str) -> dict[str, Scalar]:
    """A resolve in a fresh process after an earlier one recorded its proof: no rehash."""
    store = ProjectStore(artifact_root, PROJECT, cache=VerificationCache())
    start = time.perf_counter()
    resolved = store.resolve(experiment)
    seconds = time.perf_counter() - start
    if resolved.hashed:
        raise RuntimeError("a resolve with a valid verification record hashed the object")
    return {"seconds": seconds}


def cached_resolves(
    artifact_root: str, experiment: str, count: int, always_repeat: int
) -> dict[str, Scalar]:
    """Cached resolve latencies after one resolve (hashing, or trusting a record), then resolves
    that always hash."""
    store = ProjectStore(artifact_root, PROJECT, cache=VerificationCache())
    store.resolve(experiment)
    for _ in range(20):
        store.resolve(experiment)  # warm: imports, allocator, card parse paths
    samples: list[float] = []
    for _ in range(count):
        start = time.perf_counter_ns()
        resolved = store.resolve(experiment)
        samples.append((time.perf_counter_ns() - start) / 1e3)
        if resolved.hashed:
            raise RuntimeError("a cached resolve hashed the object")
    always = ProjectStore(artifact_root, PROJECT, integrity=IntegrityMode.ALWAYS)
    always_s = [_timed(lambda: _first_resolve(always, experiment)) for _ in range(always_repeat)]
    result: dict[str, Scalar] = {f"p{p}": percentile(samples, p) for p in (50, 95, 99)}
    result |= {"max": max(samples), "always_best": best(always_s), "always_med": median(always_s)}
    return result


def record_setup(artifact_root: str, rlm_root: str) -> dict[str, Scalar]:
    """Record the source once and name its experiment."""
    from bench_record import record_once  # same metadata and session as the record benchmark

    recorded = record_once(artifact_root, rlm_root, SOURCE_NAME)
    store = ProjectStore(artifact_root, PROJECT)
    scan = store.scan_cards()
    if len(scan.cards) != 1:
        raise RuntimeError("the setup record did not leave exactly one card")
    card = scan.cards[0]
    path = os.path.join(artifact_root, *store.layout.root)
    path = os.path.join(path, *store.layout.object_path(card.typed_artifact_id))
    return {"experiment": card.experiment_id, "path": path, "seconds": recorded["seconds"]}


# -- the benchmark ----------------------------------------------------------------------------


def _report(
    size: int,
    firsts: list[ChildResult],
    cached: ChildResult,
    generated_s: float,
    where: str,
    conditions: Conditions,
) -> None:
    resolve = [r.number("resolve_seconds") for r in firsts]
    digest = [r.number("digest_seconds") for r in firsts]
    print(
        f"first resolve vs hashlib.file_digest(sha256) of the same object: {size / MIB:,.0f} MiB, "
        f"{len(firsts)} fresh child process(es), order alternating"
    )
    print(f"  {machine_line()}; store on {filesystem_line(where)}")
    print(
        "  the object is warm in the page cache for every run (just written and read once), "
        "the same condition for both"
    )
    print(f"  {conditions.describe()}")
    print(f"  source generated in {generated_s:.1f} s, recorded once in setup (not timed below)")
    print(
        f"  other processes and kernel threads kept {foreign_load(firsts)} CPUs busy "
        f"(median) in the first-resolve children, {foreign_load([cached])} in the cached one"
    )
    print()
    rows = [
        ("hashlib.file_digest (baseline)", digest),
        ("first resolve (ours, hashed=True)", resolve),
    ]
    print_table(
        ["run", "best s", "median s", "best MiB/s", "median MiB/s", "samples s"],
        [
            [
                name,
                f"{best(s):.3f}",
                f"{median(s):.3f}",
                f"{mib_per_s(size, best(s)):,.0f}",
                f"{mib_per_s(size, median(s)):,.0f}",
                " ".join(f"{x:.3f}" for x in s),
            ]
            for name, s in rows
        ],
    )
    print()
    _report_ratios(size, resolve, digest, firsts, cached)


def _report_ratios(
    size: int,
    resolve: list[float],
    digest: list[float],
    firsts: list[ChildResult],
    cached: ChildResult,
) -> None:
    ratio = median(digest) / median(resolve)
    paired = " ".join(f"{d / r:.3f}" for d, r in zip(digest, resolve, strict=True))
    p99 = cached.number("p99")
    always_med = cached.number("always_med")
    print_table(
        ["ratio / figure", "measured", "target", "verdict"],
        [
            [
                "first resolve / file_digest speed (medians)",
                f"{ratio:.3f}",
                f">= {SPEED_TARGET}",
                verdict(ratio >= SPEED_TARGET),
            ],
            [
                "first resolve / file_digest speed (bests)",
                f"{best(digest) / best(resolve):.3f}",
                "",
                "",
            ],
            ["first resolve / file_digest, per repeat", paired, "", ""],
            ["cached resolve p50", f"{cached.number('p50'):.1f} us", "", ""],
            ["cached resolve p95", f"{cached.number('p95'):.1f} us", "", ""],
            [
                "cached resolve p99",
                f"{p99:.1f} us",
                f"< {CACHED_TARGET_US:.0f} us",
                verdict(p99 < CACHED_TARGET_US),
            ],
            ["cached resolve max", f"{cached.number('max'):.1f} us", "", ""],
            ["IntegrityMode.ALWAYS resolve, median", f"{always_med:.3f} s", "", ""],
            [
                "ALWAYS resolve / file_digest speed (medians)",
                f"{median(digest) / always_med:.3f}",
                "",
                "",
            ],
            [
                "peak RSS of a first-resolve child",
                f"{max(r.peak_rss_mib for r in firsts):.1f} MiB",
                "",
                "",
            ],
            ["peak RSS of the cached-resolve child", f"{cached.peak_rss_mib:.1f} MiB", "", ""],
        ],
    )
    print(f"  ({size / MIB:,.0f} MiB; cached figures over 1,000 resolves in one process)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_size_arguments(parser, what="object", runs="first-resolve children")
    parser.add_argument("--resolves", type=int, default=1000, help="cached resolves timed")
    add_condition_arguments(parser)
    args = parser.parse_args(argv)
    if args.resolves < 1:
        parser.error("--resolves must be at least 1")
    sized = sizing(parser, args, min_mib=1, copies=3)  # source and object, with room to spare
    if sized is None:
        return 2
    size, repeat = sized.size, sized.repeat
    with workspace(sized.parent, "artmem-bench-resolve-") as workdir:
        rlm_root = os.path.join(workdir, "rlm")
        artifact_root = os.path.join(workdir, "store")
        src = os.path.join(
            make_dirs(os.path.join(rlm_root, "sessions", SESSION, "exports")), SOURCE_NAME
        )
        start = time.perf_counter()
        write_random_file(src, size)
        generated_s = time.perf_counter() - start
        setup = run_child(
            "bench_resolve", "record_setup", artifact_root=artifact_root, rlm_root=rlm_root
        )
        experiment = setup.text("experiment")
        read_through(setup.text("path"))
        conditions = Conditions(workdir, 0, args.quiet_wait)  # resolve writes no page cache
        firsts = [
            conditions.run(
                "bench_resolve",
                "first_resolve",
                artifact_root=artifact_root,
                experiment=experiment,
                resolve_first=number % 2 == 1,
            )
            for number in range(repeat)
        ]
        recorded = [
            conditions.run(
                "bench_resolve", "recorded_resolve", artifact_root=artifact_root,
                experiment=experiment,
            ).number("seconds")
            for _ in range(repeat)
        ]  # fmt: skip
        cached = conditions.run(
            "bench_resolve",
            "cached_resolves",
            artifact_root=artifact_root,
            experiment=experiment,
            count=args.resolves,
            always_repeat=repeat,
        )
        _report(size, firsts, cached, generated_s, workdir, conditions)
        print(
            f"repeat resolve in a new process (verification record, no rehash): median "
            f"{median(recorded) * 1e3:.1f} ms over {len(recorded)} processes "
            f"(samples {' '.join(f'{s * 1e3:.1f}' for s in recorded)} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
