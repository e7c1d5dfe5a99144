"""Processes that open, refresh, search and save one project's catalog at the same time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
