"""Shared helpers for the store benchmarks: workspace, random files, child runs, RSS, tables.

This module imports only the standard library, so a baseline run in a child process that imports
only this module carries no `cas` or pydantic import in its peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

MIB = 1 << 20
PIECE_BYTES = 4 * MIB
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
_RESULT_MARK = "@@artmem-bench-result@@ "

# The child runs one function and reports its own peak RSS. Not from getrusage: RUSAGE_CHILDREN
# is the maximum over every child ever waited for, and a child's own ru_maxrss starts from its
# parent's RSS at fork and survives execve, so a lean child of a big parent reports the parent.
# VmHWM is the high-water mark of the child's own address space (Linux); elsewhere ru_maxrss.
_CHILD_CODE = f"""
import importlib, json, resource, sys
sys.path.insert(0, sys.argv[1])
function = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])
result = function(**json.loads(sys.argv[4]))
usage = resource.getrusage(resource.RUSAGE_SELF)
peak = {{"ru_maxrss": usage.ru_maxrss, "cpu_s": usage.ru_utime + usage.ru_stime}}
try:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                peak["vmhwm_kib"] = int(line.split()[1])
except OSError:
    pass
print({_RESULT_MARK!r} + json.dumps({{"result": result, **peak}}), flush=True)
"""

Scalar = float | int | bool | str | None


# -- workspace --------------------------------------------------------------------------------


def check_free_space(directory: str, needed: int) -> str | None:
    """None when `directory` has `needed` bytes free, else a polite refusal to print."""
    free = shutil.disk_usage(directory).free
    if free >= needed:
        return None
    return (
        f"refusing to run: {directory} has {free / MIB:,.0f} MiB free and this benchmark needs "
        f"{needed / MIB:,.0f} MiB; pass --dir on a roomier filesystem or a smaller --size-mib"
    )


@contextlib.contextmanager
def workspace(parent: str, prefix: str) -> Iterator[str]:
    """A fresh directory below `parent`, removed afterwards even where the store made it 0700."""
    path = tempfile.mkdtemp(prefix=prefix, dir=os.path.abspath(parent))
    try:
        yield path
    finally:
        remove_tree(path)


def remove_tree(path: str) -> None:
    """Remove `path`, first giving every directory back its write bit (the store uses 0700/0400)."""
    if not os.path.lexists(path):
        return
    if os.path.isdir(path) and not os.path.islink(path):
        for root, dirs, _files in os.walk(path):
            for name in dirs:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
        try:
            shutil.rmtree(path)
        except OSError as exc:
            print(f"warning: could not remove {path}: {exc}", file=sys.stderr)
    else:
        os.unlink(path)


def make_dirs(path: str) -> str:
    """Create `path` (and parents) with mode 0700, as the store and the harness do."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


# -- files ------------------------------------------------------------------------------------


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of `data` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_random_file(path: str, size: int) -> None:
    """Fill a new file with `size` random bytes, one 4 MiB piece in memory at a time, fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        remaining = size
        while remaining:
            piece = os.urandom(min(PIECE_BYTES, remaining))
            write_all(fd, piece)
            remaining -= len(piece)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_through(path: str) -> None:
    """Read a file once, so every measured run finds it equally warm in the page cache."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        while os.read(fd, PIECE_BYTES):
            pass
    finally:
        os.close(fd)


# -- child-process workloads (baselines: standard library only) -----------------------------


def copy_with_fsync(src: str, dst: str) -> dict[str, Scalar]:
    """Baseline: copy `src` to a new `dst` in 4 MiB reads, fsync and close; times each phase."""
    start = time.perf_counter()
    src_fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    dst_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    copied = 0
    try:
        while chunk := os.read(src_fd, PIECE_BYTES):
            write_all(dst_fd, chunk)
            copied += len(chunk)
        written = time.perf_counter()
        os.fsync(dst_fd)
    finally:
        os.close(dst_fd)
        os.close(src_fd)
    end = time.perf_counter()
    return {"seconds": end - start, "fsync_seconds": end - written, "bytes": copied}


def sha256_pass(path: str) -> dict[str, Scalar]:
    """Context: one streaming SHA-256 pass over `path` in 4 MiB reads."""
    start = time.perf_counter()
    hasher = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    size = 0
    try:
        while chunk := os.read(fd, PIECE_BYTES):
            hasher.update(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return {"seconds": time.perf_counter() - start, "bytes": size, "sha256": hasher.hexdigest()}


def idle() -> dict[str, Scalar]:
    """Do nothing: the child's peak RSS is then the floor of its interpreter and imports."""
    return {}


# -- running children -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChildResult:
    """What one child run returned, and its own peak resident set size."""

    values: Mapping[str, Scalar]
    peak_rss_mib: float
    foreign_cpus: float | None = None  # other processes' CPU use while the child ran

    def number(self, key: str) -> float:
        """A numeric result, refusing anything else."""
        value = self.values[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"child result {key!r} is not a number: {value!r}")
        return float(value)

    def flag(self, key: str) -> bool:
        """A boolean result, refusing anything else."""
        value = self.values[key]
        if not isinstance(value, bool):
            raise TypeError(f"child result {key!r} is not a boolean: {value!r}")
        return value

    def text(self, key: str) -> str:
        """A string result, refusing anything else."""
        value = self.values[key]
        if not isinstance(value, str):
            raise TypeError(f"child result {key!r} is not a string: {value!r}")
        return value


def run_child(module: str, function: str, **kwargs: Scalar) -> ChildResult:
    """Run `module.function(**kwargs)` in a fresh interpreter; the module is imported from here.

    Raises:
        RuntimeError: the child failed or printed no result.
    """
    argv = [sys.executable, "-c", _CHILD_CODE, BENCH_DIR, module, function, json.dumps(kwargs)]
    busy_before, started = busy_cpu_seconds(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    busy_after, wall = busy_cpu_seconds(), time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{module}.{function} failed ({done.returncode}):\n{done.stderr}")
    lines = [line for line in done.stdout.splitlines() if line.startswith(_RESULT_MARK)]
    if not lines:
        raise RuntimeError(f"{module}.{function} printed no result:\n{done.stdout}{done.stderr}")
    payload = json.loads(lines[-1][len(_RESULT_MARK) :])
    values = payload["result"]
    if not isinstance(values, dict):
        raise RuntimeError(f"{module}.{function} returned {type(values).__name__}, not a dict")
    if "vmhwm_kib" in payload:
        peak = int(payload["vmhwm_kib"]) / 1024
    else:  # ru_maxrss is KiB on Linux and bytes on macOS
        scale = MIB if sys.platform == "darwin" else 1024
        peak = int(payload["ru_maxrss"]) / scale
    foreign = None
    if busy_before is not None and busy_after is not None:
        others = busy_after - busy_before - float(payload["cpu_s"])
        foreign = max(0.0, others) / wall
    return ChildResult(values=values, peak_rss_mib=peak, foreign_cpus=foreign)


# -- fair conditions --------------------------------------------------------------------------


def busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (Linux), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(x) for x in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait_s: float, threshold_cpus: float = 0.2) -> float | None:
    """Wait (at most `max_wait_s`) for a half second in which the machine is nearly idle.

    Other processes competing for the CPUs slow a two-thread record more than a one-thread copy,
    so each measured run starts in a quiet moment when there is one. Returns the busy CPUs of
    the last window (None when /proc/stat is unavailable).
    """
    deadline = time.monotonic() + max_wait_s
    while True:
        before, started = busy_cpu_seconds(), time.perf_counter()
        time.sleep(0.5)
        after = busy_cpu_seconds()
        if before is None or after is None:
            return None
        load = (after - before) / (time.perf_counter() - started)
        if load < threshold_cpus or time.monotonic() >= deadline:
            return load


def recycle_page_cache(directory: str, size: int) -> None:
    """Write and delete an unsynced scratch file of `size` bytes, just before a measured run.

    Deleting it frees `size` bytes of page cache that the next run's writes then reuse. Without
    this, a run's page-cache allocation cost depends on which free pages the kernel hands out;
    in a VM whose host reclaims idle guest memory, first-touch pages can cost ten times more.
    Dirty pages of a deleted file are dropped, never written, so no disk I/O is left behind.
    """
    path = os.path.join(directory, "page-cache-scratch.tmp")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        piece = b"\x5a" * PIECE_BYTES
        for _ in range(size // PIECE_BYTES):
            write_all(fd, piece)
    finally:
        os.close(fd)
        os.unlink(path)


# -- statistics and printing ------------------------------------------------------------------


def percentile(samples: Sequence[float], pct: float) -> float:
    """The nearest-rank percentile of `samples`."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def best(samples: Sequence[float]) -> float:
    """The fastest of several timings (least disturbed by noise)."""
    return min(samples)


def median(samples: Sequence[float]) -> float:
    """The median of several timings."""
    return statistics.median(samples)


def mib_per_s(size: int, seconds: float) -> float:
    """Throughput of moving `size` bytes in `seconds`."""
    return size / MIB / seconds


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print rows under headers: the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        cells = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        print("  " + "  ".join(cells).rstrip())


def machine_line() -> str:
    """Python, platform and CPU count, for the header."""
    return (
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs"
    )


def filesystem_line(path: str) -> str:
    """The device and filesystem type holding `path` (from /proc/mounts when available)."""
    target = os.path.realpath(path)
    chosen: tuple[str, str, str] | None = None
    with contextlib.suppress(OSError), open("/proc/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            device, point, kind = line.split()[:3]
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and (chosen is None or len(point) >= len(chosen[1])):
                chosen = (device, point, kind)
    if chosen is None:
        return "filesystem unknown"
    return f"{chosen[2]} on {chosen[0]} (mounted at {chosen[1]})"


def verdict(met: bool) -> str:
    """'met' or 'NOT met'."""
    return "met" if met else "NOT met"


@dataclass(frozen=True, slots=True)
class Conditions:
    """How every measured child run is started: after a quiet moment, with recycled page cache."""

    scratch_dir: str
    recycle_bytes: int  # 0: no page-cache recycling
    quiet_wait_s: float  # 0: start at once, whatever else runs

    def run(self, module: str, function: str, **kwargs: Scalar) -> ChildResult:
        """Set up the conditions, then run `module.function(**kwargs)` in a fresh child."""
        if self.quiet_wait_s:
            wait_for_quiet(self.quiet_wait_s)
        if self.recycle_bytes:
            recycle_page_cache(self.scratch_dir, self.recycle_bytes)
        return run_child(module, function, **kwargs)

    def describe(self) -> str:
        """One line for the report header."""
        quiet = (
            f"each run waits (up to {self.quiet_wait_s:.0f} s) for a half second with under "
            "0.2 CPU busy"
            if self.quiet_wait_s
            else "runs start at once"
        )
        if self.recycle_bytes:
            recycle = (
                f"starts right after {self.recycle_bytes / MIB:,.0f} MiB of page cache is freed"
            )
        else:
            recycle = "takes page cache as the kernel hands it out"
        return f"{quiet}; each {recycle}"


@dataclass(frozen=True, slots=True)
class Sizing:
    """What a sized benchmark run was asked for: bytes, repeats, and where the workspace goes."""

    size: int
    repeat: int
    parent: str


def add_size_arguments(parser: argparse.ArgumentParser, *, what: str, runs: str) -> None:
    """`--size-mib`, `--repeat`, `--quick` and `--dir`, shared by the 1 GiB benchmarks."""
    parser.add_argument("--size-mib", type=int, default=1024, help=f"{what} size (default 1024)")
    parser.add_argument("--repeat", type=int, default=3, help=f"{runs} (default 3)")
    parser.add_argument("--quick", action="store_true", help="64 MiB, 1 repeat (smoke test)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the workspace goes")


def sizing(
    parser: argparse.ArgumentParser, args: argparse.Namespace, *, min_mib: int, copies: int
) -> Sizing | None:
    """The run's sizing, or None (after saying why) when `copies` of it do not fit on disk."""
    size_mib, repeat = (64, 1) if args.quick else (args.size_mib, args.repeat)
    if size_mib < min_mib or repeat < 1:
        parser.error(f"--size-mib must be at least {min_mib} and --repeat at least 1")
    parent = os.path.abspath(args.dir)
    refusal = check_free_space(parent, copies * size_mib * MIB)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return None
    return Sizing(size_mib * MIB, repeat, parent)


def add_condition_arguments(parser: argparse.ArgumentParser) -> None:
    """The --quiet-wait and --no-recycle options shared by the benchmarks."""
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=30.0,
        help="seconds to wait for an idle machine before each run (0: never wait; default 30)",
    )
    parser.add_argument(
        "--no-recycle",
        action="store_true",
        help="do not free a size-sized scratch file of page cache before each run",
    )


def foreign_load(results: Sequence[ChildResult]) -> str:
    """The median CPU use of other processes during `results`, or '?' when unknown."""
    loads = [r.foreign_cpus for r in results if r.foreign_cpus is not None]
    return f"{median(loads):.2f}" if loads else "?"


# -- whole commands (benchmarks/compare.py) ---------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), or the platform's processor string."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def timed_command(argv: Sequence[str], *, cwd: str | None = None) -> float:
    """Run one whole command, its output captured; return its wall-clock seconds.

    Raises:
        RuntimeError: the command exited non-zero.
    """
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        shown = " ".join(argv)[:200]
        raise RuntimeError(
            f"{shown} exited {done.returncode}:\n{done.stderr.decode(errors='replace')[-2000:]}"
        )
    return seconds


def spread(samples: Sequence[float]) -> str:
    """'median (min–max)' of several timings, in seconds."""
    return f"{median(samples):.3f} ({min(samples):.3f}–{max(samples):.3f})"


# -- paired comparisons of whole commands (benchmarks/compare.py) ------------------------------

Run = Callable[[int], float]  # the run's number (-1: an untimed warm-up) -> its measured seconds
Check = Callable[[list[float], list[float] | None], bool]


@dataclass(frozen=True, slots=True)
class Row:
    """One comparison: artmem's runs, the baseline's, and the target they are held to."""

    name: str
    ours: list[float]
    baseline: str
    theirs: list[float] | None
    target: str
    met: bool | None

    def cells(self) -> list[str]:
        ratio = "" if not self.theirs else f"{median(self.ours) / median(self.theirs):.2f}×"
        base = spread(self.theirs) if self.theirs else ""
        shown = "" if self.met is None else verdict(self.met)
        return [self.name, spread(self.ours), self.baseline, base, ratio, self.target, shown]


@dataclass(frozen=True, slots=True)
class Plan:
    """How the pairs run: repeats, and the conditions of the large-file runs."""

    repeat: int
    quiet_wait: float
    recycle: bool
    scratch_dir: str
    warm_up: bool = True

    def settle(self, heavy: int) -> None:
        """Before a run that moves `heavy` bytes: a quiet moment, then freed page cache."""
        if heavy and self.quiet_wait:
            wait_for_quiet(self.quiet_wait)
        if heavy and self.recycle:
            recycle_page_cache(self.scratch_dir, heavy)


def paired(
    plan: Plan, ours: Run, theirs: Run | None, *, heavy: int = 0
) -> tuple[list[float], list[float] | None]:
    """Run `ours` and `theirs` `plan.repeat` times each, in alternating order.

    Each side runs once untimed first (run number -1), unless the plan skips warming up.
    """
    sides: list[tuple[Run, list[float]]] = [(ours, [])]
    if theirs is not None:
        sides.append((theirs, []))
    for run, _ in sides if plan.warm_up else ():
        run(-1)
    for number in range(plan.repeat):
        for run, samples in sides if number % 2 == 0 else sides[::-1]:
            plan.settle(heavy)
            samples.append(run(number))
    return sides[0][1], (sides[1][1] if theirs is not None else None)


def at_most(seconds: float) -> Check:
    return lambda ours, _theirs: median(ours) <= seconds


def ratio_at_most(limit: float) -> Check:
    return lambda ours, theirs: bool(theirs) and median(ours) / median(theirs or [1]) <= limit


def row(
    name: str,
    pair: tuple[list[float], list[float] | None],
    baseline: str,
    target: str = "",
    check: Check | None = None,
) -> Row:
    ours, theirs = pair
    met = None if check is None else check(ours, theirs)
    return Row(name, ours, baseline, theirs, target, met)
