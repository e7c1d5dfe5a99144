"""The notebook API (issue 10 item 12): read-only, verified, and light to import.

Against a real store configured like the CLI's: the module docstring's example runs as written,
a session of calls leaves every file and directory exactly as it was (mtimes included), and a
fresh interpreter that uses the API has loaded no Honcho, indexer or ingest code.
"""

from __future__ import annotations

import doctest
import hashlib
import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import cli_project, write_config

import harness_plugin.notebook as notebook
from cards.errors import (
    ExperimentNotFound,
    FilterSyntaxError,
    IntegrityError,
    InvalidId,
    UnknownProject,
)
from harness_plugin.cli import main
from harness_plugin.notebook import SliceTruncated, StaleResult, open_store

ROOT = Path(__file__).parent.parent.parent
RESPONSES = pa.table(
    {
        "cohort": ["a", "b", "c", "a", "b", "c"],
        "response": [0.125, 0.75, 0.875, 0.25, 0.5, 0.375],
    }
)
# What the API must never load: the remote side, the worker, and the store's write-only rooms.
FORBIDDEN = (
    "honcho",
    "httpx",
    "indexer",
    "harness_plugin._runtime",
    "harness_plugin.worker._serve",
    "harness_plugin.worker._tools",
    "harness_plugin.cli",
    "cas._ingest",
    "cas._sniff",
    "cas._fsck",
    "cas.slicing._footer",
)


def _record(name: str, title: str, *extra: str) -> str:
    out = io.StringIO()
    argv = ["record", "--session", "s1", name, "--title", title, "--summary", "Six subjects.",
            "--query-fingerprint", fingerprint(name), "--source", "trial-warehouse",
            "--source-version", "v1", "--json", *extra]  # fmt: skip
    stdout, sys.stdout = sys.stdout, out
    try:
        assert main(argv) == 0
    finally:
        sys.stdout = stdout
    return str(json.loads(out.getvalue())["experiment_id"])


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    exports = cli_project(tmp_path, monkeypatch)
    pq.write_table(RESPONSES, exports / "responses.parquet")
    (exports / "notes.txt").write_text("plain text")
    ids = {
        "table": _record("responses.parquet", "Treatment response by cohort"),
        "notes": _record("notes.txt", "Lab notes", "--media-type", "text/plain"),
    }
    return tmp_path, ids


def _snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path below `root`: kind, mode, size, mtime and (for files) a digest of the bytes."""
    seen: dict[str, tuple[object, ...]] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        seen[str(path.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return seen


# -- the documented example ----------------------------------------------------------------


def _example() -> doctest.DocTest:
    [test] = [
        t for t in doctest.DocTestFinder().find(notebook) if t.name == "harness_plugin.notebook"
    ]
    return test


def test_the_docstring_example_runs_as_written(workspace):
    test = _example()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    result = runner.run(test, out=report.write)
    assert result.attempted == len(test.examples) >= 8
    assert result.failed == 0, report.getvalue()


def test_the_readme_shows_the_docstring_example_when_it_documents_the_api():
    readme = (ROOT / "README.md").read_text()
    if "harness_plugin.notebook" not in readme:
        return  # the README does not document the API yet
    lines = [line.strip() for line in readme.splitlines()]
    position = 0
    for example in _example().examples:
        want = ">>> " + example.source.strip()
        assert want in lines[position:], f"README lacks {want!r}"
        position = lines.index(want, position) + 1


# -- read-only ------------------------------------------------------------------------------


def test_a_session_of_calls_changes_nothing_on_disk(workspace):
    tmp_path, ids = workspace
    before = _snapshot(tmp_path)
    store = open_store()
    exp = ids["table"]
    assert [hit.card.experiment_id for hit in store.search("cohort response")][0] == exp
    assert [card.experiment_id for card in store.list()] == [ids["notes"], exp]
    assert store.card(exp[:12]).title == "Treatment response by cohort"
    assert store.resolve(exp, "v1").freshness == "fresh"
    assert store.show(exp).table.num_rows == 6
    assert store.show(ids["notes"]).table is None
    assert store.read_slice(exp, ["response"], "cohort = 'a'").column(0).to_pylist() == [
        0.125,
        0.25,
    ]
    with pytest.raises(FilterSyntaxError):
        store.read_slice(exp, where="cohort == 'a'")
    with pytest.raises(InvalidId):
        store.card("exp_nothere1")
    assert _snapshot(tmp_path) == before


def test_a_store_that_has_recorded_nothing_is_not_created(tmp_path, monkeypatch):
    config, project_root = write_config(tmp_path)
    store = open_store(config=str(config), cwd=str(project_root))
    assert store.project_id == "trial-analysis"
    assert store.search("anything") == [] and store.list() == []
    with pytest.raises(ExperimentNotFound):
        store.card("exp_" + "a" * 52)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artmem.toml", "work"]


def test_the_project_comes_from_the_id_or_the_directory(workspace, tmp_path):
    assert open_store("trial-analysis", cwd="/").project_id == "trial-analysis"
    with pytest.raises(UnknownProject) as outside:
        open_store(cwd="/")
    assert "pass project=ID" in outside.value.message and "--project" not in outside.value.message
    with pytest.raises(UnknownProject):
        open_store("elsewhere")


# -- verification, bounds and warnings ------------------------------------------------------


def test_a_slice_that_keeps_the_rows_asked_for_does_not_warn(workspace):
    _, ids = workspace
    store = open_store()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SliceTruncated)
        table = store.read_slice(ids["table"], limit=2)
    assert table.num_rows == 2


def test_a_stale_result_warns(workspace):
    _, ids = workspace
    with pytest.warns(StaleResult):
        open_store().read_slice(ids["table"], current_source_version="v2")


def test_corrupt_bytes_are_refused_as_by_the_cli(workspace):
    tmp_path, ids = workspace
    store = open_store()
    path = Path(store.resolve(ids["table"]).path)
    os.chmod(path, 0o600)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        store.read_slice(ids["table"])
    with pytest.raises(IntegrityError):
        open_store().resolve(ids["table"])


def test_a_missing_object_shows_the_card_as_unavailable(workspace):
    _, ids = workspace
    store = open_store()
    path = Path(store.resolve(ids["table"]).path)
    path.rename(path.with_name("moved-away"))
    shown = store.show(ids["table"])
    assert not shown.available_locally and shown.table is None
    assert shown.card.experiment_id == ids["table"] and "record the original" in shown.note


# -- dataframes, where their libraries are installed ----------------------------------------


@pytest.mark.parametrize(("method", "module"), [("to_pandas", "pandas"), ("to_polars", "polars")])
def test_dataframes_need_their_library_only_when_asked(workspace, monkeypatch, method, module):
    _, ids = workspace
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(ModuleNotFoundError):
        getattr(open_store(), method)(ids["table"])


def test_to_pandas(workspace):
    pytest.importorskip("pandas")
    _, ids = workspace
    frame = open_store().to_pandas(ids["table"], where="response > 0.5")
    assert list(frame["cohort"]) == ["b", "c"]


def test_to_polars(workspace):
    pytest.importorskip("polars")
    _, ids = workspace
    frame = open_store().to_polars(ids["table"], where="response > 0.5")
    assert frame["cohort"].to_list() == ["b", "c"]


# -- what a notebook loads ------------------------------------------------------------------


def test_the_api_loads_no_honcho_indexer_or_write_path(workspace):
    tmp_path, ids = workspace
    probe = (
        "import json, sys\n"
        "from harness_plugin.notebook import open_store\n"
        "store = open_store()\n"
        f"exp = {ids['table']!r}\n"
        "store.search('cohort'); store.list(); store.card(exp[:12]); store.resolve(exp)\n"
        "store.show(exp); store.read_slice(exp, where='response > 0.5')\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    loaded = json.loads(done.stdout)
    assert "cas.slicing._slice" in loaded and "harness_plugin.notebook" in loaded
    forbidden = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert forbidden == []
