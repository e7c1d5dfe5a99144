"""Outbox admission latency (with fsync) and delivery throughput against the local fake server.

Side by side in one run:
- admission: `Outbox.admit` of card-sized entries vs. the bare floor of the same durable write
  (temp file, write, fsync, rename, fsync the directory), p50/p99 each;
- delivery: `DeliveryWorker.drain` (outbox + real SDK over HTTP) vs. the bare SDK posting the
  same messages one request each, against `FakeHoncho` served from a separate process.
Targets (ARCHITECTURE.md, Performance targets): admission p99 under 10 ms; delivery at least
200 cards/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_line, percentile, print_table  # noqa: E402
from _fake_server import fake_honcho  # noqa: E402

from indexer import (  # noqa: E402
    ConversationRef,
    DeliveryWorker,
    HonchoMemoryService,
    HonchoSettings,
    OutboundMessage,
    Outbox,
    OutboxEntry,
    Ownership,
    SessionTarget,
    message_fingerprint,
)

KEY = "bench-key"


def _entry(n: int, sessions: int) -> OutboxEntry:
    """A card-sized delivery whose id is the one its content gives (the outbox verifies it)."""
    session = f"cards-{n % sessions}"
    content = f"Experiment card {n}: per-cohort response table. " + "x" * 600
    ref = ConversationRef(
        workspace_id="bench",
        user_peer_id="user",
        project_id="bench",
        dsh_session_id=session,
        turn=n,
        event_seqs=[n],
        roles=["assistant"],
    )
    delivery = ref.delivery_id(session, [content])
    metadata: dict[str, str | int | bool] = {
        "source": "artmem",
        "kind": "experiment-card",
        "delivery_id": delivery,
    }
    message = OutboundMessage(
        peer_id="artmem-assistant",
        content=content,
        metadata=metadata,
        fingerprint=message_fingerprint("artmem-assistant", content, metadata),
    )
    return OutboxEntry(
        schema_version=1,
        delivery_id=delivery,
        target=SessionTarget(session_id=session, kind="conversation"),
        messages=[message],
        conversation=ref,
        seq=n,
        admitted_at=datetime.now(UTC),
    )


def _bare_durable_write(directory: str, name: str, data: bytes, dir_fd: int) -> None:
    tmp = os.path.join(directory, f".{name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, name))
    os.fsync(dir_fd)


def bench_admission(root: str, count: int) -> list[list[str]]:
    """Admission latencies: ours and the bare durable write of the same bytes."""
    outbox = Outbox(os.path.join(root, "state"))
    entries = [_entry(n, 8) for n in range(count)]
    ours = []
    for entry in entries:
        start = time.perf_counter()
        outbox.admit(entry)
        ours.append(time.perf_counter() - start)
    bare_dir = os.path.join(root, "bare")
    os.makedirs(bare_dir)
    dir_fd = os.open(bare_dir, os.O_RDONLY)
    bare = []
    try:
        for entry in entries:
            data = entry.model_dump_json().encode()
            start = time.perf_counter()
            _bare_durable_write(bare_dir, entry.delivery_id, data, dir_fd)
            bare.append(time.perf_counter() - start)
    finally:
        os.close(dir_fd)
    rows = []
    for label, samples in (("Outbox.admit", ours), ("bare write+fsync+rename+fsync", bare)):
        p50, p99 = percentile(samples, 50) * 1e3, percentile(samples, 99) * 1e3
        rows.append([label, f"{p50:.2f}", f"{p99:.2f}"])
    p99_ratio = percentile(ours, 99) / percentile(bare, 99)
    rows.append(["ratio ours/bare (p99)", "", f"{p99_ratio:.2f}x"])
    rows.append(["target p99 < 10 ms", "", f"{percentile(ours, 99) * 1e3 / 10:.2f} of it"])
    return rows


def _settings(url: str) -> HonchoSettings:
    return HonchoSettings(
        base_url=url,
        workspace_id="bench",
        user_peer_id="user",
        assistant_peer_id="artmem-assistant",
        timeout_s=10,
        create_workspace=True,
    )


def bench_delivery(root: str, url: str, count: int, sessions: int) -> list[list[str]]:
    """Cards per second: the worker draining the outbox vs. the bare SDK loop."""
    state = os.path.join(root, "delivery-state")
    outbox = Outbox(state)
    for n in range(count):
        outbox.admit(_entry(n, sessions))
    ownership = Ownership(state)
    assert ownership.acquire()
    service = HonchoMemoryService(_settings(url), KEY)
    worker = DeliveryWorker(outbox, service, ownership, max_sessions=sessions)
    start = time.perf_counter()
    report = worker.drain(600)
    ours = time.perf_counter() - start
    ownership.release()
    service.close()
    assert report.delivered == count, report
    bare_service = HonchoMemoryService(_settings(url), KEY)
    entries = [_entry(count + n, sessions) for n in range(count)]
    start = time.perf_counter()
    for entry in entries:
        bare_service.deliver(entry.target, entry.messages)
    bare = time.perf_counter() - start
    bare_service.close()
    return [
        ["worker drain (outbox, fsync per state change)", f"{count / ours:.0f}"],
        ["bare SDK loop, one request per card", f"{count / bare:.0f}"],
        ["ratio ours/bare", f"{bare / ours:.2f}x"],
        ["target >= 200 cards/s", f"{count / ours / 200:.2f} of it"],
    ]


def main() -> None:
    """Run both measurements and print them side by side."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--admissions", type=int, default=2000)
    parser.add_argument("--cards", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="200 admissions, 100 cards")
    args = parser.parse_args()
    if args.quick:
        args.admissions, args.cards = 200, 100
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="artmem-bench-outbox-") as root:
        print(f"\nadmission of {args.admissions} card-sized entries (ms)")
        print_table(["", "p50", "p99"], bench_admission(root, args.admissions))
        with fake_honcho(KEY) as server:
            sessions = args.sessions
            print(f"\ndelivery of {args.cards} cards over HTTP to the fake ({sessions} sessions)")
            delivery = bench_delivery(root, server.url, args.cards, args.sessions)
            print_table(["", "cards/s"], delivery)


if __name__ == "__main__":
    main()
