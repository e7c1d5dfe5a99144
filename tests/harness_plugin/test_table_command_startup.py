"""A table command's start-up: pyarrow loads without numpy, and the process stays one thread.

pyarrow imports numpy whenever it is installed (about 0.15 s); no command hands numpy arrays to
anyone. A stand-in `numpy` on the path records any import of it, in a real CLI process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import make_metadata
from host_helpers import write_config

from cas import Provenance
from harness_plugin import build_store
from harness_plugin.config import load_config

ROOT = Path(__file__).parent.parent.parent
_STAND_IN = """
import os
with open(os.environ["NUMPY_MARKER"], "a") as marker:
    marker.write("imported\\n")
raise ImportError("a stand-in numpy")
"""
# Reports, as the CLI exits, how many threads it ran (the bounded child is forked before).
_RUN = (
    "import atexit, os, sys; "
    "atexit.register(lambda: sys.stderr.write("
    "f'THREADS {len(os.listdir(\"/proc/self/task\"))}\\n')); "
    "from harness_plugin.cli import main; sys.argv = ['artmem', *sys.argv[1:]]; sys.exit(main())"
)


def test_a_slice_loads_pyarrow_without_numpy_and_runs_one_thread(tmp_path):
    config, project_root = write_config(tmp_path)
    exports = tmp_path / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    (exports / "r.csv").write_text("cohort,response\na,1\nb,2\n")
    store = build_store(load_config(str(config)), "trial-analysis")
    recorded = store.record(
        str(tmp_path / "rlm"), Provenance(session_id="s1"), make_metadata(), "r.csv"
    )
    stand_in = tmp_path / "site" / "numpy"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text(_STAND_IN)
    marker = tmp_path / "numpy-imported"
    for argv in (
        ["slice", recorded.card.experiment_id, "--where", "response >= 2", "--json"],
        ["show", recorded.card.experiment_id, "--json"],
    ):
        done = subprocess.run(
            [sys.executable, "-c", _RUN, *argv, "--config", str(config)],
            cwd=project_root, capture_output=True, text=True, check=False,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{stand_in.parent}:{ROOT}",
                 "NUMPY_MARKER": str(marker)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout)
        assert "THREADS 1" in done.stderr, done.stderr[-2000:]
    assert not marker.exists()
