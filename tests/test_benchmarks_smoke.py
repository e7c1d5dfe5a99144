"""`benchmarks/compare.py --quick` runs every comparison end to end and prints its table.

A smoke test only: it checks that each row ran (real `artmem` processes against a real store
in a temporary directory) and that a missing baseline is skipped with a line, never the figures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = (
    "record 16 MiB, fresh content",
    "record 16 MiB already stored",
    "record 1 MiB, fresh content",
    "artmem resolve, first",
    "artmem resolve, repeat",
    "artmem search, 200 cards",
    "artmem status",
    "artmem --help",
)


def test_compare_quick_runs_every_comparison(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "compare.py"),
            "--quick",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "CPUs; Python" in out and "temp dir:" in out
    for name in ROWS:
        assert name in out
    for label in ("DuckDB", "polars"):
        ran = f"to CSV ({label})" in out
        skipped = f"skipped: the {label} baseline" in out
        assert ran != skipped
    assert ("skipped: `dvc add`" in out) != ("dvc add" in out.replace("skipped: `dvc add`", ""))
    assert list(tmp_path.iterdir()) == []  # the workspace is removed
