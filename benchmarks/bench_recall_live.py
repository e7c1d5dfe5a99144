"""First-step recall against the real Honcho, without and with embeddings, side by side.

The instances of `../shared/tools/honcho-env.sh` (HONCHO_BASE_URL, HONCHO_EMBED_BASE_URL; either
may be missing). For each: a fresh workspace, `--turns` completed turns captured and delivered,
then `--recalls` first steps in new sessions, each asking a question about one earlier turn, as a
person would (a question mark, words the turn shares). Prints recall p50/p95 and how many blocks
named the turn asked about; deletes the workspace (sessions first) afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import httpx  # noqa: E402
from _common import machine_line, percentile, print_table  # noqa: E402
from bench_conversation import _host, _turn  # noqa: E402

from indexer import Ownership  # noqa: E402
from indexer.testing import delete_workspace  # noqa: E402

INSTANCES = (("lexical", "HONCHO_BASE_URL"), ("semantic", "HONCHO_EMBED_BASE_URL"))


def _measure(url: str, turns: int, recalls: int) -> tuple[list[float], int]:
    workspace = f"artmem-bench-recall-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="artmem-bench-recall-") as root:
        host = _host(root, url, workspace)
        memory = host.memory
        assert memory is not None
        cwd = os.path.join(root, "work")
        try:
            for turn in range(1, turns + 1):
                for event in _turn(turn, turn * 10, words=2):
                    memory.append("history", cwd, True, event)
            ownership = Ownership(host.runtime.config.state_root)
            assert ownership.acquire()
            service = host.runtime.service()
            host.runtime.worker(ownership, service).drain(300)
            service.close()
            ownership.release()
            samples: list[float] = []
            named = 0
            for n in range(recalls):
                asked = 1 + (n * 7919) % turns
                question = f"Which site does the cohort analysis keep, as decided in turn {asked}?"
                events = _turn(1, 0, words=1)[:2]
                events[1]["data"] = {"content": [{"type": "text", "text": question}],
                                     "source": {"kind": "user"}}  # fmt: skip
                session = f"ask-{n}"
                for event in events:
                    memory.append(session, cwd, True, event)
                started = time.perf_counter()
                reply = memory.first_step(session, cwd, True, {"turn": 1, "step": 1})
                samples.append(time.perf_counter() - started)
                inject = reply["inject"]
                text = inject["text"] if isinstance(inject, dict) else ""
                named += f"turn {asked}:" in str(text)
            return samples, named
        finally:
            host.close()
            with httpx.Client(base_url=url, timeout=30) as admin:
                left = delete_workspace(admin, workspace)
            if left:
                print(f"left behind: {', '.join(left)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="completed turns delivered first")
    parser.add_argument("--recalls", type=int, default=40, help="first steps measured")
    args = parser.parse_args()
    print(machine_line())
    rows = []
    for kind, variable in INSTANCES:
        url = os.environ.get(variable)
        if not url:
            rows.append([kind, "-", "-", f"skipped: {variable} unset"])
            continue
        samples, named = _measure(url, args.turns, args.recalls)
        p50, p95 = percentile(samples, 50) * 1e3, percentile(samples, 95) * 1e3
        rows.append([kind, f"{p50:.0f}", f"{p95:.0f}", f"{named}/{len(samples)}"])
    print(f"\nfirst-step recall against the real Honcho, {args.turns} turns, timeout 1500 ms")
    print_table(["instance", "p50 ms", "p95 ms", "blocks naming the turn asked about"], rows)


if __name__ == "__main__":
    main()
