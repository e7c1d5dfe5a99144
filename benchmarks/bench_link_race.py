"""The hard-link race against record: escapes of an outside file's bytes, per racer mode.

Issue 30 (item 3): a kernel may record only its own exports, never a file that also lives
elsewhere (a hard link). A racer process keeps passing an outside file's inode through the
exports directory, so that at some instants the inode has one name, in `exports/`; each try
records `exports/x` through `ProjectStore.record` while the racer runs. An escape is a record
that succeeds with the outside file's bytes. The two modes:

- relink: `link(O, x); unlink(O); link(x, O); unlink(x)`, over and over: the outside file O
  sits alone in `exports/` between the second and third step.
- swap: `x` is the kernel's own file K; `rename(x, .k); link(O, x); unlink(O); link(x, O);
  rename(.k, x)`: O replaces K in `exports/` and sits alone there for an instant.

Every try ends as an escape, a record of the kernel's own bytes (swap only), or a refusal
(hard-linked, changed, missing or a symlink path); the table counts each. The target: 0 escapes
in 10,000 tries per mode. Before issue 30 the re-check compared identity, size and mtime only,
and records caught O alone at open time passed it.

    .venv/bin/python benchmarks/bench_link_race.py [--tries 10000] [--mode relink swap] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable

from _common import machine_line, print_table, remove_tree, verdict

SESSION = "race-s1"
OUTSIDE = b"OUTSIDE " * 512  # 4 KiB: the bytes that must never be recorded
KERNEL = b"KERNEL! " * 512  # the same size
MODES = ("relink", "swap")


def race(mode: str, outside: str, exports: str) -> None:
    """The racer: run `mode` until killed (in its own process)."""
    x, aside = os.path.join(exports, "x"), os.path.join(exports, ".k")
    steps: list[Callable[[], None]] = {
        "relink": [lambda: os.link(outside, x), lambda: os.unlink(outside),
                   lambda: os.link(x, outside), lambda: os.unlink(x)],
        "swap": [lambda: os.rename(x, aside), lambda: os.link(outside, x),
                 lambda: os.unlink(outside), lambda: os.link(x, outside),
                 lambda: os.rename(aside, x)],
    }[mode]  # fmt: skip
    print("racing", flush=True)
    while True:
        for step in steps:
            try:
                step()
            except OSError:
                pass


def tries(mode: str, count: int, parent: str) -> Counter[str]:
    """Record `exports/x` `count` times while a racer process runs `mode`; outcomes counted."""
    from cards import ArtifactError, CardMetadata, parse_session_id
    from cas import ProjectStore, Provenance

    root = tempfile.mkdtemp(prefix="link-race-", dir=parent)
    try:
        exports = os.path.join(root, "rlm", "sessions", SESSION, "exports")
        os.makedirs(exports, mode=0o700)
        outside = os.path.join(root, "outside.bin")
        with open(outside, "wb") as handle:
            handle.write(OUTSIDE)
        if mode == "swap":
            with open(os.path.join(exports, "x"), "wb") as handle:
                handle.write(KERNEL)
        store = ProjectStore(os.path.join(root, "artifacts"), "race-project")
        metadata = CardMetadata(
            title="Race", summary="A raced export.", query_fingerprint="a" * 64,
            source="bench", source_version="v1",
        )  # fmt: skip
        escape = hashlib.sha256(OUTSIDE).hexdigest()
        racer = subprocess.Popen(
            [sys.executable, __file__, "--race", mode, outside, exports],
            stdout=subprocess.PIPE,
        )
        outcomes: Counter[str] = Counter()
        try:
            assert racer.stdout is not None and racer.stdout.readline() == b"racing\n"
            rlm = os.path.join(root, "rlm")
            for _ in range(count):
                try:
                    recorded = store.record(
                        rlm, Provenance(session_id=parse_session_id(SESSION)), metadata, "x"
                    )
                except ArtifactError as exc:
                    outcomes[str(exc.code)] += 1
                    continue
                kind = "ESCAPE" if recorded.card.artifact.sha256 == escape else "kernel bytes"
                outcomes[kind] += 1
        finally:
            racer.send_signal(signal.SIGKILL)
            racer.wait()
        return outcomes
    finally:
        remove_tree(root)


def main(argv: list[str] | None = None) -> int:
    """Run the tries and print the counts; exit 1 on any escape."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=10_000, help="records per mode")
    parser.add_argument("--mode", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to work")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--race", nargs=3, metavar=("MODE", "OUTSIDE", "EXPORTS"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args(argv)
    if args.race:
        race(*args.race)
        return 0
    results: dict[str, dict[str, int]] = {}
    started = time.monotonic()
    for mode in args.mode:
        results[mode] = dict(tries(mode, args.tries, args.dir))
    escapes = sum(counts.get("ESCAPE", 0) for counts in results.values())
    if args.json:
        print(json.dumps({"tries": args.tries, "results": results, "escapes": escapes}))
        return 1 if escapes else 0
    print(f"link race: {args.tries:,} records per mode against a racing process")
    print(machine_line())
    kinds = sorted({kind for counts in results.values() for kind in counts})
    rows = [[mode, *(f"{counts.get(k, 0):,}" for k in kinds)] for mode, counts in results.items()]
    print_table(["mode", *kinds], rows)
    print(f"escapes: {escapes} (target 0)  {verdict(escapes == 0)}")
    print(f"{time.monotonic() - started:.0f} s")
    return 1 if escapes else 0


if __name__ == "__main__":
    sys.exit(main())
