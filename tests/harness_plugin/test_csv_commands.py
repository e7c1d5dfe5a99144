"""CSV and JSON Lines results through the real `artmem` command (issue 10 items 1 and 13).

Each command is a whole process: record detects the type and lists the columns, search finds a
column name, show reports the inferred schema without a row count, slice filters and projects
as it does for Parquet, and hostile text ends in a typed `--json` error.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import write_config

ARTMEM = str(Path(sys.executable).parent / "artmem")
ROWS = 5000


def _artmem(env: dict[str, str], cwd: Path, *argv: str) -> tuple[int, dict]:
    done = subprocess.run(
        [ARTMEM, *argv, "--json"], capture_output=True, text=True, env=env, cwd=cwd, check=False
    )
    return done.returncode, json.loads(done.stdout)


def _text(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ARTMEM, *argv], capture_output=True, text=True, env=env, cwd=cwd, check=False
    )


@pytest.fixture
def cli(tmp_path):
    config, project_root = write_config(tmp_path, "[slice]\nmax_rows = 1000\n")
    env = {**os.environ, "ARTMEM_CONFIG": str(config)}
    exports = tmp_path / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    lines = ["subject_id,arm,dose_mg"] + [f"{i},arm{i % 3},{i / 2}" for i in range(ROWS)]
    (exports / "doses.csv").write_text("\n".join(lines) + "\n")
    (exports / "doses.jsonl").write_text(
        "".join(
            json.dumps({"subject_id": i, "arm": f"arm{i % 3}", "dose_mg": i / 2}) + "\n"
            for i in range(ROWS)
        )
    )
    return env, project_root, exports


def _record(cli, name: str) -> dict:
    env, cwd, _ = cli
    code, out = _artmem(
        env, cwd, "record", "--session", "s1", name, "--title", f"Doses {name}",
        "--summary", "Dose per subject.", "--query-fingerprint", fingerprint(name),
        "--source", "trial", "--source-version", "v1",
    )  # fmt: skip
    assert code == 0, out
    return out


@pytest.mark.parametrize(("name", "media_type"), [("doses.csv", "text/csv"), ("doses.jsonl",
                                                   "application/jsonl")])  # fmt: skip
def test_record_show_search_and_slice_a_text_table(cli, name, media_type):
    env, cwd, _ = cli
    recorded = _record(cli, name)
    exp = recorded["experiment_id"]
    code, shown = _artmem(env, cwd, "show", exp)
    assert code == 0 and shown["artifact"]["media_type"] == media_type
    assert shown["card"]["columns"] == ["subject_id", "arm", "dose_mg"]
    fields = [(f["name"], f["type"]) for f in shown["table"]["fields"]]
    assert fields == [("subject_id", "int64"), ("arm", "string"), ("dose_mg", "double")]
    assert shown["table"]["num_rows"] is None
    code, found = _artmem(env, cwd, "search", "dose_mg")
    assert exp in [hit["experiment_id"] for hit in found["hits"]]
    code, meta = _artmem(
        env, cwd, "slice", exp, "--columns", "arm,subject_id", "--where",
        "subject_id >= 4990 and arm = 'arm1'",
    )  # fmt: skip
    assert code == 0 and meta["rows"] == 4 and meta["columns"] == ["arm", "subject_id"]
    done = _text(env, cwd, "slice", exp, "--where", "subject_id < 3", "--format", "csv")
    assert done.returncode == 0
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert [row["subject_id"] for row in rows] == ["0", "1", "2"]
    code, meta = _artmem(env, cwd, "slice", exp)
    assert meta["rows"] == 1000 and meta["truncated_reason"] == "row_limit"


def test_show_for_a_person_says_the_row_count_is_unknown(cli):
    env, cwd, _ = cli
    exp = _record(cli, "doses.csv")["experiment_id"]
    done = _text(env, cwd, "show", exp)
    assert done.returncode == 0
    assert "rows        unknown\n" in done.stdout and "subject_id: int64" in done.stdout
    assert "note: column types are inferred over the whole file" in done.stdout


def test_a_slice_to_a_parquet_file_round_trips(cli, tmp_path):
    env, cwd, _ = cli
    exp = _record(cli, "doses.jsonl")["experiment_id"]
    out = tmp_path / "piece.parquet"
    code, meta = _artmem(env, cwd, "slice", exp, "--where", "dose_mg < 2", "--out", str(out))
    assert code == 0 and pq.read_table(out).column("subject_id").to_pylist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("ragged.csv", b"a,b\n1,2\n" * 10 + b"1,2,3\n", "slice.table_unreadable"),
        ("utf8.jsonl", b'{"a": 1}\n{"a": 2, "b": "\xff"}\n', "slice.table_unreadable"),
        ("line.jsonl", b'{"a": "' + b"x" * (3 << 20) + b'"}\n', "slice.table_too_large"),
        ("quote.csv", b'a,b\n1,"never closed\n' + b"2,x\n" * (1 << 20), "slice.table_unreadable"),
    ],
)
def test_hostile_text_is_a_typed_error(cli, name, data, code):
    env, cwd, exports = cli
    (exports / name).write_bytes(data)
    recorded = _record(cli, name)
    status, out = _artmem(env, cwd, "slice", recorded["experiment_id"], "--where", "a > 1")
    assert status == 1 and out["error"]["code"] == code


def test_a_hostile_parquet_is_recorded_with_a_warning(cli):
    env, cwd, exports = cli
    sink = io.BytesIO()
    pq.write_table(pa.table({"k": [1, 2, 3]}), sink)
    data = bytearray(sink.getvalue())
    data[-8:-4] = (1 << 30).to_bytes(4, "little")  # a footer longer than the file
    (exports / "forged.parquet").write_bytes(bytes(data))
    recorded = _record(cli, "forged.parquet")
    assert recorded["warnings"] and "recorded without them" in recorded["warnings"][-1]
    code, shown = _artmem(env, cwd, "show", recorded["experiment_id"])
    assert code == 1 and shown["error"]["code"] == "slice.table_unreadable"
