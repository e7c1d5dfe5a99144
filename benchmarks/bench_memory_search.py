"""`memory_search` latency through the tool surface, with 10,000 cards in the project.

Side by side in one run, each over the same queries:
- local only (Honcho disabled): the catalog built at start, refreshed by one stat per search;
- hybrid against the fake Honcho (separate process) answering at once;
- hybrid against the fake Honcho answering after an added latency (default 50 ms);
- hybrid against a fake Honcho slower than the search deadline: local hits still come back.
ARCHITECTURE.md (Performance targets): local search p95 under 5 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_line, percentile, print_table  # noqa: E402
from _fake_server import fake_honcho  # noqa: E402
from bench_search import PROJECT, Corpus, make_card, make_queries  # noqa: E402

from cards import ExperimentCardV1, dump_card  # noqa: E402
from cards.remote import RemoteCard, project_card  # noqa: E402
from harness_plugin import Runtime, ToolHost, build_store, parse_caller  # noqa: E402
from harness_plugin.config import config_from_mapping  # noqa: E402
from indexer import (  # noqa: E402
    HonchoMemoryService,
    HonchoSettings,
    OutboundMessage,
    SessionTarget,
    cards_session_id,
    message_fingerprint,
)

KEY = "bench-search-key"


def _populate(config_doc: dict[str, object], count: int) -> list[ExperimentCardV1]:
    """Write `count` valid cards (the search benchmark's corpus) into the cards directory."""
    config = config_from_mapping(config_doc)
    store = build_store(config, PROJECT)
    cards_dir = Path(store.local_path(store.layout.cards_dir))
    cards_dir.mkdir(parents=True, mode=0o700)
    corpus = Corpus(random.Random(7))
    cards = [make_card(corpus, n) for n in range(count)]
    for card in cards:
        (cards_dir / f"{card.experiment_id}.json").write_bytes(dump_card(card))
    return cards


def _index_remote(url: str, cards: list[ExperimentCardV1], count: int) -> None:
    """Put the projections of `count` cards into the fake Honcho, as the worker would."""
    settings = HonchoSettings(url, "bench", "user", "artmem-assistant", 10.0, True)
    service = HonchoMemoryService(settings, KEY)
    target = SessionTarget(session_id=cards_session_id(PROJECT), kind="cards")
    try:
        for card in cards[:count]:
            remote = project_card(card)
            assert isinstance(remote, RemoteCard)
            metadata: dict[str, str | int | bool] = dict(remote.metadata)
            fingerprint = message_fingerprint("artmem-assistant", remote.content, metadata)
            message = OutboundMessage(
                peer_id="artmem-assistant",
                content=remote.content,
                metadata=metadata,
                fingerprint=fingerprint,
            )
            service.deliver(target, [message])
    finally:
        service.close()


def _measure(host: ToolHost, root: Path, queries: list[str]) -> tuple[float, list[float]]:
    """The first call (it sets up the Honcho client), then every query timed."""
    who = parse_caller(
        {
            "session_id": "bench",
            "cwd": str(root / "work"),
            "call_id": "c",
            "root_call_id": "r",
            "agent_kind": "root",
        }  # fmt: skip
    )
    start = time.perf_counter()
    host.call("memory_search", {"query": "warm up", "limit": 10}, who)
    first = time.perf_counter() - start
    samples = []
    for query in queries:
        start = time.perf_counter()
        host.call("memory_search", {"query": query, "limit": 10}, who)
        samples.append(time.perf_counter() - start)
    return first, samples


def _row(label: str, measured: tuple[float, list[float]]) -> list[str]:
    first, samples = measured
    p50, p95 = percentile(samples, 50) * 1e3, percentile(samples, 95) * 1e3
    return [label, f"{first * 1e3:.2f}", f"{p50:.2f}", f"{p95:.2f}"]


def main() -> None:
    """Populate a project, then time memory_search four ways."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cards", type=int, default=10_000)
    parser.add_argument("--remote-cards", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--quick", action="store_true", help="500 cards, 100 remote, 40 queries")
    args = parser.parse_args()
    if args.quick:
        args.cards, args.remote_cards, args.queries = 500, 100, 40
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="artmem-bench-search-") as tmp:
        root = Path(tmp)
        (root / "work").mkdir()
        doc: dict[str, object] = {
            "artifact_root": str(root / "artifacts"),
            "rlm_root": str(root / "rlm"),
            "state_root": str(root / "state"),
            "projects": [{"id": PROJECT, "root": str(root / "work")}],
        }
        cards = _populate(doc, args.cards)
        queries = [q.text for q in make_queries(Corpus(random.Random(11)), cards, args.queries)]
        environ = {**os.environ, "BENCH_HONCHO_KEY": KEY}
        start = time.perf_counter()
        local_host = ToolHost(Runtime(config_from_mapping(doc), environ=environ))
        build_s = time.perf_counter() - start
        rows = [_row("local only", _measure(local_host, root, queries))]
        local_host.close()
        with fake_honcho(KEY) as server:
            _index_remote(server.url, cards, args.remote_cards)
            for label, latency_ms, deadline_s in (
                ("hybrid, fake answers at once", 0.0, 2.0),
                (f"hybrid, fake +{args.latency_ms:.0f} ms", args.latency_ms, 2.0),
                ("hybrid, fake slower than a 100 ms deadline", 500.0, 0.1),
            ):
                server.set_latency(latency_ms / 1e3)
                honcho = {"enabled": True, "base_url": server.url, "workspace_id": "bench",
                          "api_key_env": "BENCH_HONCHO_KEY", "create_workspace": True,
                          "search_timeout_s": deadline_s}  # fmt: skip
                runtime = Runtime(config_from_mapping({**doc, "honcho": honcho}), environ=environ)
                host = ToolHost(runtime)
                subset = queries[: max(10, args.queries // 4)]
                rows.append(_row(label, _measure(host, root, subset)))
                host.close()
        print(f"\nmemory_search over {args.cards:,} cards ({args.queries} queries; ms)")
        print_table(["", "first call", "p50", "p95"], rows)
        local_p95 = float(rows[0][3])
        print(
            f"\n  host start (index {args.cards:,} cards from disk): {build_s:.2f} s (target < 1 s)"
        )
        print(f"  local p95 / 5 ms target: {local_p95 / 5:.2f}")


if __name__ == "__main__":
    main()
