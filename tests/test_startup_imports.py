"""What a command may load: the properties, not the speed.

Each command's start-up time has a budget measured by the benchmark (`benchmarks/compare.py`,
the `startup`, `record`, `resolve` and `slice` rows), never asserted here. What stays here is
what loading a module would break: with Honcho disabled, no command loads the Honcho client, an
HTTP library or what projects cards for Honcho, so nothing it does can reach the network; and
search and status read the saved catalog. Each command runs in a fresh interpreter against a
real small store and its `sys.modules` is checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_metadata
from host_helpers import write_config

from cas import Provenance
from harness_plugin import build_store
from harness_plugin.config import load_config

ROOT = Path(__file__).parent.parent
# The probe reports `sys.modules` as the process exits: every module loaded, however imported
# (`-X importtime` misses `importlib.import_module` and lists imports that failed).
_RUN = (
    "import atexit, json, sys; "
    "atexit.register(lambda: sys.stderr.write('MODULES ' + json.dumps(sorted(sys.modules)))); "
    "from harness_plugin.cli import main; "
    "sys.argv = ['artmem', *sys.argv[1:]]; sys.exit(main())"
)
# Honcho is disabled in the store below: nothing that could talk to it loads.
NO_NETWORK = {
    "honcho",
    "httpx",
    "anyio",
    "indexer.honcho_adapter",
    "indexer._cards",
    "cards.remote",
}
COMMANDS = ("--help", "status", "search", "record", "resolve", "slice")


def _loaded(argv: list[str], cwd: Path, config: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *argv, "--config", str(config)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reports = [line for line in done.stderr.splitlines() if line.startswith("MODULES ")]
    assert len(reports) == 1, done.stderr[-2000:]
    return set(json.loads(reports[0].removeprefix("MODULES ")))


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    tmp = tmp_path_factory.mktemp("startup")
    config, project_root = write_config(tmp)
    exports = tmp / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    (exports / "r.csv").write_text("cohort,response\na,1\n")
    store = build_store(load_config(str(config)), "trial-analysis")
    recorded = store.record(str(tmp / "rlm"), Provenance(session_id="s1"), make_metadata(), "r.csv")
    return config, project_root, recorded.card.experiment_id


@pytest.mark.parametrize("command", COMMANDS)
def test_with_honcho_disabled_no_command_loads_a_network_client(command, small_store):
    config, project_root, experiment = small_store
    record = ["--session", "s1", "r.csv", "--title", "T", "--summary", "S", "--source", "w"]
    record += ["--source-version", "v2", "--query-fingerprint", "a" * 64]
    table = [experiment, "--columns", "cohort", "--where", "response >= 1"]
    exported = ["--out", "slice.csv"]  # streamed by the bounded child
    arguments = {"search": ["cohort"], "resolve": [experiment], "record": record}
    arguments["slice"] = [*table, "--format", "csv", *exported]
    argv = [command, *arguments.get(command, [])]
    loaded = _loaded(argv, project_root, config)
    assert "harness_plugin.cli" in loaded  # the probe did run the CLI
    network = {name for name in loaded if name in NO_NETWORK}
    assert network == set(), f"`artmem {' '.join(argv)}` loaded {sorted(network)}"


def test_search_and_status_read_the_saved_catalog(small_store):
    config, project_root, _ = small_store
    for argv in (["status"], ["search", "cohort"]):
        assert "cas._catalog_engine" in _loaded(argv, project_root, config)
