"""Start-up: each command loads only what it uses (DESIGN.md §8).

Each command runs in a fresh interpreter against a real small store, and the set of modules
it loaded is checked: a module-set assertion, never a timing one.
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
# Never for these commands (Honcho is disabled in the store below).
HEAVY = {"pyarrow", "honcho", "httpx", "anyio", "duckdb", "indexer.honcho_adapter", "sqlite3"}
# Value types are msgspec structs: a dataclass compiles its methods when its module loads.
HEAVY |= {"dataclasses", "portalocker"}
# A configuration without a URL of its own parses none (the default Honcho URL is valid).
HEAVY |= {"urllib.parse"}
# msgspec would load it (with inspect and ast) to resolve annotations `typing` resolves alike.
HEAVY |= {"typing_extensions"}
FORBIDDEN = {
    # Argument parsing only: not even the core's ids and bounds.
    "--help": HEAVY | {"pydantic", "cards", "msgspec", "cas", "indexer", "shutil"},
    # The configuration and stored cards are msgspec structs; only caller input (record, the
    # tools' arguments) and the wire models the tools validate against are pydantic.
    "status": HEAVY
    | {"pydantic", "cards.model", "cards.wire", "cas.slicing._formats"}
    | {"harness_plugin.cli._table_commands"},
    "search": HEAVY
    | {"pydantic", "cards.model", "cards.wire", "cas.slicing._formats"}
    | {"harness_plugin.cli._table_commands"},
    # A small file is one chunk: no hashing thread to overlap with (concurrent.futures loads
    # logging).
    "record": HEAVY
    | {"pydantic", "cards.model", "cards.wire", "indexer._cards", "cards.remote"}
    | {"concurrent.futures", "logging"},
    "resolve": HEAVY
    | {"pydantic", "cards.model", "cards.wire", "cas.slicing._formats", "cas._catalog"}
    | {"harness_plugin.cli._table_commands", "harness_plugin.cli._listing"},
    # pyarrow (which loads urllib.parse), of course; orjson (with dataclasses) only for JSON
    # Lines.
    "slice": HEAVY - {"pyarrow", "urllib.parse"} | {"pydantic", "orjson", "cas._catalog"},
}


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


@pytest.mark.parametrize("command", sorted(FORBIDDEN))
def test_a_command_loads_no_heavy_module_it_does_not_use(command, small_store):
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
    heavy = {name for name in loaded if name in FORBIDDEN[command]}
    assert heavy == set(), f"`artmem {' '.join(argv)}` loaded {sorted(heavy)}"


def test_search_and_status_read_the_saved_catalog(small_store):
    config, project_root, _ = small_store
    for argv in (["status"], ["search", "cohort"]):
        assert "cas._catalog_engine" in _loaded(argv, project_root, config)
