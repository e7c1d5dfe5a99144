"""Processes that open, refresh, search and save one project's catalog at the same time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import fingerprint

_SEARCHER = """
import sys
from cas import LocalCatalog, ProjectStore
store = ProjectStore(sys.argv[1], "trial-analysis")
for _ in range(int(sys.argv[3])):
    catalog = LocalCatalog.open(store, sys.argv[2])
    for hit in catalog.search("cohort", 20):
        assert hit.card.experiment_id.startswith("exp_")
"""


def searchers(
    artifact_root: Path, state: str, rounds: int, count: int = 3
) -> list[subprocess.Popen[bytes]]:
    """`count` processes, each opening (so refreshing and saving) and searching `rounds` times."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", _SEARCHER, str(artifact_root), state, str(rounds)],
            cwd=Path(__file__).parents[1],
        )
        for _ in range(count)
    ]


def record_numbered(ws, store, n: int, **meta: object):
    """Record export `r{n}.bin` (bytes and query fingerprint of its own) with `meta`; its card."""
    ws.export(f"r{n}.bin", f"result {n}".encode())
    meta.setdefault("query_fingerprint", fingerprint(f"q{n}"))
    return ws.record(store, f"r{n}.bin", **meta).card


def cards_dir(ws, store) -> Path:
    return ws.project_dir(store) / "cards"


def settle(ws, store) -> None:
    """Date the cards directory back, so its version is no longer racily fresh."""
    cards = cards_dir(ws, store)
    old = cards.stat().st_mtime_ns - 60 * 10**9
    os.utime(cards, ns=(old, old))


def hit_ids(hits) -> list[str]:
    return [hit.card.experiment_id for hit in hits]
