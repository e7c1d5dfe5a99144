"""Local card search: build time and search latency against ARCHITECTURE.md's targets.

Targets: search p95 under 5 ms over 10,000 cards, index rebuilt in under 1 s. A naive linear
scan over the same cards and queries runs in the same process as a baseline.

    .venv/bin/python benchmarks/bench_search.py [--cards 10000] [--queries 400] [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import random
import re
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from _common import percentile  # the benchmarks folder is on sys.path when run as a script

from cards import ExperimentCardV1, ProjectId, parse_metadata
from cards.build import with_changes
from cards.testing import card_for_bytes
from cas import Catalog

SEARCH_P95_TARGET_MS = 5.0
BUILD_TARGET_S = 1.0
LIMIT = 20
PROJECT = ProjectId("bench-project")
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)

_STEMS = (
    "sales revenue churn cohort retention latency throughput genome variant expression protein "
    "assay plate sample batch control treatment dose response survival hazard model fit residual "
    "forecast season trend anomaly outlier cluster embedding feature importance gradient loss "
    "accuracy precision recall auc roc calibration bootstrap interval posterior prior mcmc chain "
    "spectrum peak signal noise filter wavelet sensor telemetry vibration temperature pressure "
    "humidity rainfall station region country city store product customer order invoice price"
).split()
_SOURCES = ("duckdb", "pandas", "polars", "spark sql", "notebook", "pyarrow", "numpy", "scipy")


@dataclass(frozen=True, slots=True)
class Query:
    kind: str
    text: str


class Corpus:
    """A Zipf-distributed synthetic vocabulary: a few very common words, a long rare tail."""

    def __init__(self, rng: random.Random) -> None:
        syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qua", "pho", "dri"]
        coined = {"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(6_000)}
        self.words = _STEMS + sorted(coined - set(_STEMS))
        self.weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words))]
        self.tags = [f"{rng.choice(_STEMS)}-{rng.choice(self.words)}" for _ in range(400)]
        self.versions = [f"git:{rng.getrandbits(160):040x}" for _ in range(300)] + ["unknown"]
        self.rng = rng

    def words_of(self, count: int) -> list[str]:
        return self.rng.choices(self.words, weights=self.weights, k=count)

    def sentence(self, low: int, high: int) -> str:
        return " ".join(self.words_of(self.rng.randint(low, high)))


def make_card(corpus: Corpus, number: int) -> ExperimentCardV1:
    rng = corpus.rng
    version = rng.choice(corpus.versions)
    columns = ["_".join(corpus.words_of(rng.randint(1, 2))) for _ in range(rng.randint(2, 14))]
    metadata = parse_metadata(
        {
            "title": corpus.sentence(3, 9).capitalize(),
            "summary": corpus.sentence(15, 60) + ".",
            "query_fingerprint": hashlib.sha256(b"q%d" % number).hexdigest(),
            "source": rng.choice(_SOURCES),
            "source_version": version,
            "media_type": "application/vnd.apache.parquet",
            "columns": columns,
            "tags": sorted(set(rng.sample(corpus.tags, rng.randint(0, 5)))),
        }
    )
    created = EPOCH + timedelta(minutes=rng.randrange(500_000))
    content = f"synthetic result {number}".encode()
    card = card_for_bytes(
        content, metadata, project_id=PROJECT, session_id="bench-session", now=created
    )
    updated = created + timedelta(minutes=rng.randrange(10_000))
    return with_changes(card, {"updated_at": updated})


def make_queries(corpus: Corpus, cards: Sequence[ExperimentCardV1], count: int) -> list[Query]:
    rng = corpus.rng
    makers: list[tuple[str, Callable[[], str]]] = [
        ("single word", lambda: corpus.words_of(1)[0]),
        ("multi word", lambda: " ".join(corpus.words_of(rng.randint(2, 5)))),
        ("exact id", lambda: _exact_probe(rng, rng.choice(cards))),
        ("no match", lambda: f"zz{rng.getrandbits(40):x} qq{rng.getrandbits(40):x}"),
    ]
    return [Query(kind, make()) for kind, make in (makers * count)[:count]]


def _exact_probe(rng: random.Random, card: ExperimentCardV1) -> str:
    choices = [card.experiment_id, card.artifact.artifact_id, card.query_fingerprint]
    return rng.choice(choices + list(card.tags))


class LinearScan:
    """The baseline: every query checks every card's fields and folded text in turn."""

    def __init__(self, cards: Sequence[ExperimentCardV1]) -> None:
        self.cards = list(cards)
        self.text = [_folded(card) for card in self.cards]
        self.exact = [_exact_values(card) for card in self.cards]

    def search(self, query: str, limit: int) -> list[ExperimentCardV1]:
        query = query.strip()
        terms = set(_WORD.findall(unicodedata.normalize("NFKC", query).casefold()))
        scored: list[tuple[int, int, float, str, ExperimentCardV1]] = []
        for card, text, values in zip(self.cards, self.text, self.exact, strict=True):
            exact = query in values
            score = sum(1 for term in terms if term in text)
            if exact or score:
                stamp = -card.updated_at.timestamp()
                scored.append((0 if exact else 1, -score, stamp, card.experiment_id, card))
        scored.sort(key=lambda row: row[:4])
        return [row[4] for row in scored[:limit]]


_WORD = re.compile(r"[^\W_]+")


def _exact_values(card: ExperimentCardV1) -> set[str]:
    ids = {card.experiment_id, card.artifact.artifact_id, card.query_fingerprint}
    return ids | {card.source_version} | set(card.tags)


def _folded(card: ExperimentCardV1) -> str:
    parts = [card.title, card.summary, card.source, *card.tags, *card.columns]
    return unicodedata.normalize("NFKC", "\n".join(parts)).casefold()


def _time_ms(run: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    run()
    return (time.perf_counter_ns() - start) / 1e6


def _latencies(search: Callable[[str], object], queries: Sequence[Query]) -> list[float]:
    for query in queries[: min(len(queries), 20)]:
        search(query.text)  # warm caches (the lazily computed length norms, dict resizes)
    samples = []
    for query in queries:
        start = time.perf_counter_ns()
        search(query.text)
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def _after_put(
    catalog: Catalog, cards: Sequence[ExperimentCardV1], queries: Sequence[Query]
) -> list[float]:
    """Latencies with cold caches: each search follows a re-record (a put), as after a record."""
    samples = []
    for number, query in enumerate(queries):
        catalog.put(cards[number % len(cards)])
        start = time.perf_counter_ns()
        catalog.search(query.text, limit=LIMIT)
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def _row(name: str, value: str, target: str = "", ratio: str = "") -> None:
    print(f"  {name:<34} {value:>12} {target:>10} {ratio:>14}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cards", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="500 cards, 20 queries (smoke test)")
    parser.add_argument("--seed", type=int, default=20250101)
    args = parser.parse_args(argv)
    card_count, query_count = (500, 20) if args.quick else (args.cards, args.queries)

    corpus = Corpus(random.Random(args.seed))
    started = time.perf_counter()
    cards = [make_card(corpus, number) for number in range(card_count)]
    generated_s = time.perf_counter() - started
    queries = make_queries(corpus, cards, query_count)

    builds = [_time_ms(lambda: Catalog(cards)) for _ in range(3)]
    catalog = Catalog(cards)
    indexed = _latencies(lambda text: catalog.search(text, limit=LIMIT), queries)
    cold = _after_put(catalog, cards, queries)
    scan = LinearScan(cards)
    linear = _latencies(lambda text: scan.search(text, LIMIT), queries)
    with_hits = sum(1 for q in queries if catalog.search(q.text, limit=LIMIT))

    _report(card_count, queries, generated_s, builds, indexed, cold, linear, with_hits)
    return 0


def _report(
    card_count: int,
    queries: Sequence[Query],
    generated_s: float,
    builds: Sequence[float],
    indexed: Sequence[float],
    cold: Sequence[float],
    linear: Sequence[float],
    with_hits: int,
) -> None:
    build_ms = statistics.median(builds)
    p50, p95 = percentile(indexed, 50), percentile(indexed, 95)
    l50, l95 = percentile(linear, 50), percentile(linear, 95)
    print(
        f"local card search: {card_count:,} cards, {len(queries)} queries, limit {LIMIT}; "
        f"python {platform.python_version()} on {platform.machine()}; "
        f"cards generated in {generated_s:.1f} s (not timed below)"
    )
    _row("metric", "measured", "target", "measured/target")
    _row("build (median of 3)", f"{build_ms:.1f} ms", "1000 ms", f"{build_ms / 1e3:.3f}")
    _row("search p50", f"{p50:.3f} ms")
    _row("search p95", f"{p95:.3f} ms", "5 ms", f"{p95 / SEARCH_P95_TARGET_MS:.3f}")
    _row("search max", f"{max(indexed):.3f} ms")
    for kind in dict.fromkeys(query.kind for query in queries):
        samples = [ms for ms, q in zip(indexed, queries, strict=True) if q.kind == kind]
        _row(f"  p95 {kind} ({len(samples)})", f"{percentile(samples, 95):.3f} ms")
    _row("search p50 right after a put", f"{percentile(cold, 50):.3f} ms")
    _row("search p95 right after a put", f"{percentile(cold, 95):.3f} ms")
    _row("queries with at least one hit", f"{with_hits}/{len(queries)}")
    _row("baseline linear scan p50", f"{l50:.3f} ms")
    _row("baseline linear scan p95", f"{l95:.3f} ms")
    _row("speed-up over linear scan (p50)", f"{l50 / p50:.1f}x")
    _row("speed-up over linear scan (p95)", f"{l95 / p95:.1f}x")
    verdict = p95 < SEARCH_P95_TARGET_MS and build_ms < BUILD_TARGET_S * 1e3
    print(f"targets (p95 < 5 ms, build < 1 s): {'met' if verdict else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
