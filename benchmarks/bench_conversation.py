"""The conversational layer: `events/append` admission latency and first-step recall latency.

Side by side in one run:
- admission: the `events/append` call that ends a completed root turn (event bookkeeping,
  normalising, redaction, ids, one durable outbox write with fsync) vs. the bare floor of the same
  durable write (temp file, write, fsync, rename, fsync the directory); p50/p99 of each, and of
  every other event of a turn (bookkeeping only);
- recall: `recall/first-step` wall time against `FakeHoncho` served from a separate process with
  added latency per request (0, 100 ms, 400 ms, then 2 s, beyond the 1500 ms timeout: the call
  must come back at the timeout with no block).
Targets (ARCHITECTURE.md, Performance targets): admission p99 under 10 ms with fsync; recall
within its 1500 ms timeout or a clean fail-open.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_line, percentile, print_table  # noqa: E402
from _fake_server import fake_honcho  # noqa: E402

from harness_plugin import Runtime, ToolHost  # noqa: E402
from harness_plugin.config import config_from_mapping  # noqa: E402
from indexer import Ownership  # noqa: E402

KEY = "bench-conversation-key"


def _turn(turn: int, seq: int, words: int) -> list[dict[str, object]]:
    text = f"turn {turn}: we decided the cohort analysis keeps site {turn % 7}. " * words
    answer = {"role": "assistant", "content": [{"type": "text", "text": "Noted. " + text}],
              "source": {"kind": "model"}}  # fmt: skip
    events: list[dict[str, object]] = [
        {"type": "turn/start", "data": {"turn": turn}},
        {
            "type": "user/message",
            "data": {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
        },  # fmt: skip
        {"type": "assistant/message", "data": {"turn": turn, "message": answer}},
        {"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}},
    ]
    for offset, event in enumerate(events):
        event["seq"] = seq + offset
    return events


def _host(root: str, url: str, workspace: str = "bench") -> ToolHost:
    os.environ["ARTMEM_BENCH_KEY"] = KEY
    project = os.path.join(root, "work")
    os.makedirs(project, exist_ok=True)
    config = config_from_mapping({
        "artifact_root": os.path.join(root, "artifacts"), "rlm_root": os.path.join(root, "rlm"),
        "state_root": os.path.join(root, "state"), "projects": [{"id": "bench", "root": project}],
        "honcho": {"enabled": True, "base_url": url, "workspace_id": workspace,
                   "api_key_env": "ARTMEM_BENCH_KEY", "create_workspace": True},
        "capture": {"mode": "completed-root-turns"},
        "recall": {"mode": "first-root-step", "cache_s": 0},
    })  # fmt: skip
    return ToolHost(Runtime(config))


def _bare(directory: str, n: int, data: bytes) -> list[float]:
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    samples = []
    try:
        for i in range(n):
            started = time.perf_counter()
            tmp = os.path.join(directory, f".tmp-{i}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
            os.rename(tmp, os.path.join(directory, f"{i}.json"))
            os.fsync(dir_fd)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(dir_fd)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="completed turns to admit")
    parser.add_argument("--recalls", type=int, default=15, help="first steps per latency")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="artmem-bench-conv-") as root, fake_honcho(KEY) as fake:
        host = _host(root, fake.url)
        memory = host.memory
        assert memory is not None
        cwd = os.path.join(root, "work")
        admit: list[float] = []
        other: list[float] = []
        for turn in range(1, args.turns + 1):
            for event in _turn(turn, turn * 10, words=20):
                started = time.perf_counter()
                reply = memory.append("bench-session", cwd, True, event)
                (admit if event["type"] == "turn/end" else other).append(
                    time.perf_counter() - started
                )
            assert reply["captured"], reply
        bare_dir = os.path.join(root, "bare")
        os.makedirs(bare_dir)
        size = max(len(data) for data in _outbox_documents(root))
        bare = _bare(bare_dir, args.turns, b"x" * size)
        rows = [
            [label, f"{percentile(s, 50) * 1e3:.2f}", f"{percentile(s, 99) * 1e3:.2f}"]
            for label, s in (
                ("events/append ending a turn (admits)", admit),
                ("bare write+fsync+rename+fsync", bare),
                ("events/append, other events", other),
            )
        ]
        print(f"\nadmission, {args.turns} turns, outbox document ~{size} bytes")
        print_table(["what", "p50 ms", "p99 ms"], rows)
        p99_ratio = percentile(admit, 99) / percentile(bare, 99)
        print(f"admission p99 / bare p99: {p99_ratio:.2f}  (target: p99 under 10 ms)")

        runtime = host.runtime
        ownership = Ownership(runtime.config.state_root)
        assert ownership.acquire()
        service = runtime.service()
        runtime.worker(ownership, service).drain(120)  # history for recall to find
        service.close()
        ownership.release()
        recall_rows = []
        session = 0
        for latency in (0.0, 0.1, 0.4, 2.0):
            fake.set_latency(latency)
            samples: list[float] = []
            reasons: set[str] = set()
            for _ in range(args.recalls):
                session += 1
                name = f"recall-{session}"
                for event in _turn(1, 0, words=2)[:2]:
                    memory.append(name, cwd, True, event)
                started = time.perf_counter()
                reply = memory.first_step(name, cwd, True, {"turn": 1, "step": 1})
                samples.append(time.perf_counter() - started)
                reasons.add(str(reply["reason"] or "injected"))
            recall_rows.append([f"{latency * 1e3:.0f}", f"{percentile(samples, 50) * 1e3:.0f}",
                                f"{percentile(samples, 95) * 1e3:.0f}",
                                ", ".join(sorted(reasons))])  # fmt: skip
        print(f"\nfirst-step recall, {args.recalls} first steps per added latency, timeout 1500 ms")
        print_table(["added latency ms", "p50 ms", "p95 ms", "outcome"], recall_rows)
        fake.set_latency(0.0)
        host.close()


def _outbox_documents(root: str) -> list[bytes]:
    found = []
    for directory, _, names in os.walk(os.path.join(root, "state", "outbox")):
        for name in names:
            if name.endswith(".json"):
                with open(os.path.join(directory, name), "rb") as handle:
                    found.append(handle.read())
    return found or [b"x" * 2048]


if __name__ == "__main__":
    main()
