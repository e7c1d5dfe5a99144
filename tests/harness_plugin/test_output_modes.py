"""Files a person writes out (`export`, `slice --out`) honour their umask; the store stays private.

Real processes: the installed console script under `sh -c 'umask U; exec ...'`.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import write_config

EXE = shutil.which("artmem", path=str(Path(sys.executable).parent))


def _parquet() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"k": list(range(50)), "v": [i / 4 for i in range(50)]}), sink)
    return sink.getvalue()


@pytest.fixture
def env(tmp_path):
    config, project_root = write_config(tmp_path)
    exports = tmp_path / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    (exports / "t.parquet").write_bytes(_parquet())
    return tmp_path, {**os.environ, "ARTMEM_CONFIG": str(config)}, project_root


def _artmem(env, umask: int, *argv: str) -> dict:
    _, environ, cwd = env
    assert EXE is not None
    done = subprocess.run(
        ["sh", "-c", f'umask {umask:03o}; exec "$@"', "sh", EXE, *argv, "--json"],
        capture_output=True, text=True, env=environ, cwd=cwd, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _record(env, umask: int) -> str:
    recorded = _artmem(
        env, umask, "record", "--session", "s1", "t.parquet", "--title", "Keys",
        "--summary", "Keys and values.", "--query-fingerprint", fingerprint("t"),
        "--source", "w", "--source-version", "v1",
        "--media-type", "application/vnd.apache.parquet",
    )  # fmt: skip
    return str(recorded["experiment_id"])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_exported_and_sliced_files_take_the_umask(env, umask):
    tmp, _, _ = env
    experiment = _record(env, umask)
    exported, sliced, small = tmp / "e.parquet", tmp / "s.csv", tmp / "few.csv"
    _artmem(env, umask, "export", experiment, str(exported))
    _artmem(env, umask, "slice", experiment, "--where", "k > 3", "--out", str(sliced))
    _artmem(env, umask, "slice", experiment, "--limit", "2", "--format", "csv", "--out", str(small))
    for path in (exported, sliced, small):
        assert _mode(path) == 0o666 & ~umask, path


def test_the_store_keeps_its_own_files_private_under_a_permissive_umask(env):
    tmp, _, _ = env
    _record(env, 0o000)
    kept = [path for path in (tmp / "artifacts").rglob("*") if path.is_file()]
    assert kept
    for path in kept:
        assert _mode(path) & 0o077 == 0, path  # nothing for the group or others
