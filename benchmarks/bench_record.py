"""Record throughput and peak RSS against a plain copy-with-fsync of the same file.

Targets (ARCHITECTURE.md): record of 1 GiB at least 0.85 of a plain copy-with-fsync of the same
file, peak RSS under 64 MiB. Every run is a fresh child process that reports its own peak RSS; the
baseline and the record alternate order across repeats, read the same page-cache-warm source,
and write to the same filesystem. Each record gets a fresh artifact root, so nothing is
deduplicated; a re-record of the stored file (the dedup path) and a plain SHA-256 pass are
measured for context.

Two conditions make runs comparable on a shared VM (both can be turned off): each run waits for
a quiet moment (other processes on two CPUs slow a two-thread record more than a one-thread
copy), and each starts right after a size-sized scratch file's page cache is freed, so the run's
page-cache allocation reuses recently freed pages (in a VM whose host reclaims idle guest memory,
fresh pages cost up to ten times more, at random, for either workload).

    .venv/bin/python benchmarks/bench_record.py [--size-mib 1024] [--repeat 3] [--quick] [--dir D]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

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
    print_table,
    remove_tree,
    run_child,
    sizing,
    verdict,
    workspace,
    write_random_file,
)

from cards import parse_metadata, parse_session_id
from cas import ProjectStore, Provenance

PROJECT = "bench-project"
SESSION = "bench-s1"
SOURCE_NAME = "data.bin"
RATIO_TARGET = 0.85
RSS_TARGET_MIB = 64.0
METADATA: dict[str, object] = {
    "title": "Record benchmark payload",
    "summary": "Random bytes recorded by benchmarks/bench_record.py.",
    "query_fingerprint": hashlib.sha256(b"bench-record").hexdigest(),
    "source": "benchmark",
    "source_version": "bench-1",
}


# -- child-process workloads ------------------------------------------------------------------


def record_once(artifact_root: str, rlm_root: str, source: str) -> dict[str, Scalar]:
    """Ours: one `ProjectStore.record` of the export, timed around the call only."""
    store = ProjectStore(artifact_root, PROJECT)
    metadata = parse_metadata(dict(METADATA))
    provenance = Provenance(session_id=parse_session_id(SESSION))
    start = time.perf_counter()
    recorded = store.record(rlm_root, provenance, metadata, source)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "bytes": recorded.card.artifact.bytes,
        "sha256": recorded.card.artifact.sha256,
        "deduplicated": recorded.deduplicated,
    }


def imports_only() -> dict[str, Scalar]:
    """Nothing, after importing what `record_once` imports: the RSS floor of a record child."""
    return {}


# -- the benchmark ----------------------------------------------------------------------------


@dataclass(slots=True)
class Series:
    """Repeated runs of one workload."""

    name: str
    runs: list[ChildResult] = field(default_factory=list)

    def add(self, result: ChildResult) -> ChildResult:
        self.runs.append(result)
        return result

    @property
    def seconds(self) -> list[float]:
        return [run.number("seconds") for run in self.runs]

    @property
    def peak_rss_mib(self) -> float:
        return max(run.peak_rss_mib for run in self.runs)

    def row(self, size: int) -> list[str]:
        seconds = self.seconds
        return [
            self.name,
            f"{best(seconds):.3f}",
            f"{median(seconds):.3f}",
            f"{mib_per_s(size, best(seconds)):,.0f}",
            f"{mib_per_s(size, median(seconds)):,.0f}",
            f"{self.peak_rss_mib:.1f}",
            foreign_load(self.runs),
        ]


@dataclass(slots=True)
class Measured:
    """Everything one benchmark run measured."""

    copy: Series = field(default_factory=lambda: Series("copy + fsync (baseline)"))
    record: Series = field(default_factory=lambda: Series("record (ours, new object)"))
    dedup: Series = field(default_factory=lambda: Series("record again (dedup path)"))
    sha256: Series = field(default_factory=lambda: Series("sha256 pass (context)"))
    floor_plain_mib: float = 0.0
    floor_store_mib: float = 0.0

    def all(self) -> tuple[Series, ...]:
        return (self.copy, self.record, self.dedup, self.sha256)


def _check(result: ChildResult, size: int, digest: str, deduplicated: bool) -> None:
    """Refuse figures from a run that did not do the work it claims."""
    if int(result.number("bytes")) != size or result.text("sha256") != digest:
        raise RuntimeError("a record stored different bytes than the source holds")
    if result.flag("deduplicated") is not deduplicated:
        raise RuntimeError(f"expected deduplicated={deduplicated} from a record")


@dataclass(frozen=True, slots=True)
class Setup:
    """Where a benchmark run reads and writes, and what the source must hash to."""

    workdir: str
    rlm_root: str
    src: str
    size: int
    sha256: str
    conditions: Conditions

    def record(self, store_root: str, series: Series, deduplicated: bool) -> None:
        done = self.conditions.run(
            "bench_record",
            "record_once",
            artifact_root=store_root,
            rlm_root=self.rlm_root,
            source=SOURCE_NAME,
        )
        _check(series.add(done), self.size, self.sha256, deduplicated)


def _measure(setup: Setup, repeat: int) -> Measured:
    measured = Measured()
    store_root = ""
    for number in range(repeat):
        store_root = os.path.join(setup.workdir, f"store-{number}")
        copy_dst = os.path.join(setup.workdir, f"copy-{number}.bin")
        for kind in ("copy", "record") if number % 2 == 0 else ("record", "copy"):
            if kind == "copy":
                copied = setup.conditions.run(
                    "_common", "copy_with_fsync", src=setup.src, dst=copy_dst
                )
                measured.copy.add(copied)
                remove_tree(copy_dst)
            else:
                setup.record(store_root, measured.record, deduplicated=False)
                if number < repeat - 1:
                    remove_tree(store_root)  # the last store stays for the dedup runs
        hashed = setup.conditions.run("_common", "sha256_pass", path=setup.src)
        if measured.sha256.add(hashed).text("sha256") != setup.sha256:
            raise RuntimeError("the SHA-256 pass disagrees with the setup digest")
    for _ in range(repeat):
        setup.record(store_root, measured.dedup, deduplicated=True)
    measured.floor_plain_mib = run_child("_common", "idle").peak_rss_mib
    measured.floor_store_mib = run_child("bench_record", "imports_only").peak_rss_mib
    return measured


def _report(
    measured: Measured,
    size: int,
    repeat: int,
    generated_s: float,
    where: str,
    conditions: Conditions,
) -> None:
    print(
        f"record vs plain copy-with-fsync: {size / MIB:,.0f} MiB of random bytes, "
        f"{repeat} repeat(s), baseline and record alternating order"
    )
    print(f"  {machine_line()}; workspace on {filesystem_line(where)}")
    print(
        "  the source is warm in the page cache for every run (read once before measuring), "
        "the same condition for baseline and record; every destination is fsynced"
    )
    print(f"  {conditions.describe()}")
    print(
        f"  source generated in {generated_s:.1f} s (not timed below); times exclude "
        "interpreter start-up"
    )
    print("  'others' = CPUs busy outside the child while it ran (other processes, writeback)")
    print()
    print_table(
        [
            "run (each in a fresh child)",
            "best s",
            "median s",
            "best MiB/s",
            "median MiB/s",
            "peak RSS MiB",
            "others",
        ],
        [series.row(size) for series in measured.all()],
    )
    print()
    print("  samples, seconds in run order (others' CPUs in brackets):")
    for series in measured.all():
        cells = [f"{r.number('seconds'):.3f} [{_load(r)}]" for r in series.runs]
        print(f"    {series.name:<28} " + "  ".join(cells))
    fsyncs = " ".join(f"{r.number('fsync_seconds'):.3f}" for r in measured.copy.runs)
    print(f"    {'of which fsync, baseline':<28} {fsyncs}")
    print()
    _report_ratios(measured)


def _load(result: ChildResult) -> str:
    return "?" if result.foreign_cpus is None else f"{result.foreign_cpus:.2f}"


def _report_ratios(measured: Measured) -> None:
    copy, record = measured.copy.seconds, measured.record.seconds
    paired = [c / r for c, r in zip(copy, record, strict=True)]
    by_median = median(copy) / median(record)
    by_best = best(copy) / best(record)
    rss = measured.record.peak_rss_mib
    sha = measured.sha256.seconds
    print_table(
        ["ratio / figure", "measured", "target", "verdict"],
        [
            [
                "record / copy+fsync throughput (medians)",
                f"{by_median:.3f}",
                f">= {RATIO_TARGET}",
                verdict(by_median >= RATIO_TARGET),
            ],
            [
                "record / copy+fsync throughput (bests)",
                f"{by_best:.3f}",
                f">= {RATIO_TARGET}",
                verdict(by_best >= RATIO_TARGET),
            ],
            ["record / copy+fsync, per repeat", " ".join(f"{p:.3f}" for p in paired), "", ""],
            [
                "upper bound with one SHA-256 stream: min(1, copy / sha256)",
                f"{min(1.0, best(copy) / best(sha)):.3f}",
                "",
                "",
            ],
            [
                "record peak RSS",
                f"{rss:.1f} MiB",
                f"< {RSS_TARGET_MIB:.0f} MiB",
                verdict(rss < RSS_TARGET_MIB),
            ],
            ["baseline copy peak RSS", f"{measured.copy.peak_rss_mib:.1f} MiB", "", ""],
            ["RSS floor: python + stdlib (idle)", f"{measured.floor_plain_mib:.1f} MiB", "", ""],
            [
                "RSS floor: python + cards/cas imports",
                f"{measured.floor_store_mib:.1f} MiB",
                "",
                "",
            ],
            [
                "dedup re-record, best / median",
                f"{best(measured.dedup.seconds):.3f} / {median(measured.dedup.seconds):.3f} s",
                "",
                "",
            ],
            [
                "dedup re-record / copy+fsync throughput (medians)",
                f"{median(copy) / median(measured.dedup.seconds):.3f}",
                "",
                "",
            ],
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_size_arguments(parser, what="source", runs="runs of each workload")
    add_condition_arguments(parser)
    args = parser.parse_args(argv)
    # Source, the last store's object and a dedup stage coexist at the peak; a baseline copy is
    # removed before the next run starts, and the page-cache scratch file is never synced.
    sized = sizing(parser, args, min_mib=1, copies=3)
    if sized is None:
        return 2
    size, repeat = sized.size, sized.repeat
    with workspace(sized.parent, "artmem-bench-record-") as workdir:
        rlm_root = os.path.join(workdir, "rlm")
        src = os.path.join(
            make_dirs(os.path.join(rlm_root, "sessions", SESSION, "exports")), SOURCE_NAME
        )
        start = time.perf_counter()
        write_random_file(src, size)
        generated_s = time.perf_counter() - start
        with open(src, "rb") as handle:  # also leaves the source warm in the page cache
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        conditions = Conditions(workdir, 0 if args.no_recycle else size, args.quiet_wait)
        setup = Setup(workdir, rlm_root, src, size, digest, conditions)
        measured = _measure(setup, repeat)
        _report(measured, size, repeat, generated_s, workdir, conditions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
