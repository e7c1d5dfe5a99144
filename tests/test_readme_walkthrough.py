"""The README's "Your first project" runs as written, from an empty home to an exported table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

README = Path(__file__).parent.parent / "README.md"


def test_the_walkthrough_runs_as_written(tmp_path):
    section = README.read_text(encoding="utf-8").split("## Your first project", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARTMEM", "HONCHO"))}
    env |= {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", match.group(1)],
                          capture_output=True, text=True, env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Response by cohort" in done.stdout
    work = tmp_path / "artmem-first" / "work" / "trial-analysis"
    sliced = pacsv.read_csv(work / "cohort-b.csv")
    assert sliced.num_rows == 25_000 and sliced.column_names == ["patient_id", "response"]
    assert pq.read_table(work / "response-copy.parquet").num_rows == 100_000
    # The scientist's own drifting CSV, read as declared without repeating the flags.
    assert "  csv types   'x' float64\n  csv nulls   'NA'\n" in done.stdout
    assert "250000  null      n0\n250001  250001.5  n1\n" in done.stdout
    assert "Traceback" not in done.stderr and "note:" not in done.stderr
