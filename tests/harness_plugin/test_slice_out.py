"""`artmem slice --out` streams big slices into a file (issue 10 item 11), as whole processes.

With `[slice] max_rows = 1000` and `max_bytes = 64 KiB`, a slice into a Parquet, CSV or JSON
Lines file still writes every matching row, equal to a full pyarrow read filtered the same way;
rows on stdout, the aligned text table and the notebook API keep the slice bounds. The child's
memory stays bounded by a batch: an export many times larger than `max_memory_bytes` succeeds
under that address-space bound, and the process's peak RSS does not grow with it. A write that
fails mid-stream leaves neither the file nor a staged leftover, and an existing file is refused.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import write_config

from cards.errors import ConfigError
from harness_plugin.config import parse_config

ARTMEM = str(Path(sys.executable).parent / "artmem")
ROWS = 30_000
MIB = 1 << 20
WHERE = "cohort != 'c1' and value >= 100"
EXPRESSION = (pc.field("cohort") != "c1") & (pc.field("value") >= 100)
MEDIA = {
    "parquet": "application/vnd.apache.parquet",
    "csv": "text/csv",
    "jsonl": "application/jsonl",
}
# Runs a command as the child of a small process, which reports the child's `wait4` peak RSS
# (its forked decoding child included): pytest's own RSS must not count.
_MEASURE = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"status": status, "peak_kib": usage.ru_maxrss}, out)
"""
# Runs a command with a file size limit: writing past it fails with EFBIG (Python ignores the
# SIGXFSZ that comes with it), as a full disk fails a write.
_FILE_SIZE_LIMIT = """
import os, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
os.execv(sys.argv[2], sys.argv[2:])
"""


def table(rows: int = ROWS) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(range(rows), pa.int64()),
            "cohort": pa.array([f"c{i % 3}" for i in range(rows)]),
            "value": pa.array([i / 10 for i in range(rows)]),
        }
    )


def write(data: pa.Table, fmt: str, path: Path) -> None:
    if fmt == "parquet":
        pq.write_table(data, path, row_group_size=4000)
    elif fmt == "csv":
        pacsv.write_csv(data, path)
    else:
        path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in data.to_pylist()))


def full_read(path: Path, fmt: str) -> pa.Table:
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "csv":
        return pacsv.read_csv(path)
    return pajson.read_json(path)


def artmem(env, cwd, *argv: str, prefix: tuple[str, ...] = ()) -> tuple[int, dict]:
    done = subprocess.run(
        [*prefix, ARTMEM, *argv, "--json"],
        capture_output=True, text=True, env=env, cwd=cwd, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def record(env, cwd, name: str, fmt: str) -> str:
    code, out = artmem(
        env, cwd, "record", "--session", "s1", name, "--title", f"T {name}", "--summary", "S",
        "--query-fingerprint", fingerprint(name), "--source", "w", "--source-version", "v1",
        "--media-type", MEDIA[fmt],
    )  # fmt: skip
    assert code == 0, out
    return out["experiment_id"]


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """A configured project whose slice bounds are small, with the same table in three formats."""
    tmp = tmp_path_factory.mktemp("host")
    config, project_root = write_config(tmp, "[slice]\nmax_rows = 1000\nmax_bytes = 65536\n")
    env = {**os.environ, "ARTMEM_CONFIG": str(config)}
    exports = tmp / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    ids = {}
    for fmt in MEDIA:
        write(table(), fmt, exports / f"t.{fmt}")
        ids[fmt] = record(env, project_root, f"t.{fmt}", fmt)
    write(table(200_000), "parquet", exports / "big.parquet")  # about 5 MB as CSV
    ids["big"] = record(env, project_root, "big.parquet", "parquet")
    return env, project_root, exports, ids


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.mark.parametrize("source", list(MEDIA))
@pytest.mark.parametrize("fmt", list(MEDIA))
def test_out_streams_every_row_beyond_the_slice_bounds(host, out_dir, source, fmt):
    env, cwd, exports, ids = host
    path = out_dir / f"rows.{fmt}"
    code, meta = artmem(
        env, cwd, "slice", ids[source], "--columns", "k,value", "--where", WHERE, "--out", str(path)
    )
    expected = full_read(exports / f"t.{source}", source).filter(EXPRESSION).select(["k", "value"])
    assert code == 0, meta
    assert meta["rows"] == expected.num_rows > 1000 and meta["bytes"] > 65536
    assert not meta["truncated"] and meta["truncated_reason"] is None
    assert meta["file_bytes"] == path.stat().st_size and meta["format"] == fmt
    assert meta["columns"] == ["k", "value"] and meta["chunks_verified"] >= 1
    assert meta["out"] == str(path) and meta["experiment_id"] == ids[source]
    assert full_read(path, fmt).equals(expected)
    assert sorted(p.name for p in out_dir.iterdir()) == [path.name]


def test_stdout_and_the_text_table_keep_the_slice_bounds(host, out_dir):
    env, cwd, _, ids = host
    done = subprocess.run(
        [ARTMEM, "slice", ids["parquet"], "--format", "csv"],
        capture_output=True, text=True, env=env, cwd=cwd, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and len(list(csv.DictReader(io.StringIO(done.stdout)))) == 1000
    assert "stopped at the row_limit" in done.stderr
    code, meta = artmem(env, cwd, "slice", ids["parquet"], "--where", WHERE)
    assert code == 0 and meta["rows"] == 1000 and meta["truncated_reason"] == "row_limit"
    assert meta["file_bytes"] is None and meta["out"] is None
    code, meta = artmem(env, cwd, "slice", ids["csv"], "--limit", "5000")
    assert code == 0 and meta["rows"] == 1000 and meta["capped"] == 1000  # stdout's bound
    text = out_dir / "rows.txt"
    code, meta = artmem(env, cwd, "slice", ids["jsonl"], "--columns", "k", "--out", str(text))
    assert code == 0 and meta["rows"] == 1000 and meta["format"] == "table"
    assert meta["truncated_reason"] == "row_limit" and "(1000 rows, truncated)" in text.read_text()
    code, err = artmem(
        env, cwd, "slice", ids["jsonl"], "--limit", "5000", "--out", str(out_dir / "b.txt")
    )
    assert code == 1 and err["error"]["code"] == "cas.limit_exceeded"
    assert "stream" in err["error"]["message"] and not (out_dir / "b.txt").exists()


def test_a_person_reads_what_was_written(host, out_dir):
    env, cwd, _, ids = host
    path = out_dir / "all.csv"
    done = subprocess.run(
        [ARTMEM, "slice", ids["parquet"], "--out", str(path), "--limit", "2500"],
        capture_output=True, text=True, env=env, cwd=cwd, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == f"wrote 2500 rows to {path}"
    assert "stopped" not in done.stdout  # the rows its --limit asked for
    assert pacsv.read_csv(path).equals(table().slice(0, 2500))


def test_an_existing_out_is_refused_and_left_alone(host, out_dir):
    env, cwd, _, ids = host
    path = out_dir / "mine.parquet"
    path.write_bytes(b"precious")
    code, err = artmem(env, cwd, "slice", ids["parquet"], "--out", str(path))
    assert code == 1 and err["error"]["code"] == "input.invalid"
    assert "existing" in err["error"]["message"]
    assert path.read_bytes() == b"precious" and [p.name for p in out_dir.iterdir()] == [path.name]


def test_a_write_failing_mid_stream_leaves_no_file_and_no_stage(host, out_dir):
    env, cwd, _, ids = host
    limit = 3 * MIB // 2  # the first 1 MiB piece is written, the second crosses the limit
    prefix = (sys.executable, "-c", _FILE_SIZE_LIMIT, str(limit))
    for fmt in ("csv", "jsonl"):
        path = out_dir / f"big.{fmt}"
        code, err = artmem(env, cwd, "slice", ids["big"], "--out", str(path), prefix=prefix)
        assert code == 1 and err["error"]["code"] == "cas.io", err
        assert "cannot write the output file" in err["error"]["message"]
    assert list(out_dir.iterdir()) == []


def test_the_export_bounds_are_strict_configuration(tmp_path):
    base, _ = write_config(tmp_path)
    text = base.read_text()
    config = parse_config(text + "[slice]\nmax_rows = 10\nexport_max_rows = 1000000000000\n")
    assert config.slice.resolve().max_rows == 10
    assert config.slice.resolve().export.max_rows == 10**12
    for bad, key in (
        ('export_max_rows = "10"', "slice.export_max_rows"),
        ("export_max_seconds = 0", "slice.export_max_seconds"),
        ("export_max_bytes = true", "slice.export_max_bytes"),
        ("export_rows = 10", "slice.export_rows"),
    ):
        with pytest.raises(ConfigError, match=key):
            parse_config(text + f"[slice]\n{bad}\n")


def test_the_notebook_reads_past_the_bounds_for_models(host):
    from harness_plugin.notebook import SliceTruncated, open_store

    env, cwd, _, ids = host
    store = open_store(config=env["ARTMEM_CONFIG"], cwd=str(cwd))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SliceTruncated)  # an operator's read: every row
        assert store.read_slice(ids["parquet"], columns=["k"]).num_rows == ROWS


# -- memory: bounded by a batch, not by the result ----------------------------------------------


def _measured(env, cwd, scratch: Path, *argv: str) -> tuple[dict, int]:
    report = scratch / "usage.json"
    code, view = artmem(env, cwd, *argv, prefix=(sys.executable, "-c", _MEASURE, str(report)))
    usage = json.loads(report.read_text())
    report.unlink()
    assert code == 0 and usage["status"] == 0, view
    return view, usage["peak_kib"] * 1024


def test_an_export_many_times_the_memory_bound_keeps_a_flat_peak(tmp_path):
    """400 MB of rows through a child that may map 64 MiB more: the peak does not follow them.

    The address-space bound holds new mappings; what the child touches of what it inherited
    (library pages, reserved arenas) adds a little more, once, whatever the result's size.
    """
    bound = 64 * MIB
    config, cwd = write_config(tmp_path, f"[slice]\nmax_memory_bytes = {bound}\n")
    env = {**os.environ, "ARTMEM_CONFIG": str(config)}
    exports = tmp_path / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    rows = 4_000_000  # 100-character strings from 1,000 values: a small file, 416 MB decoded
    words = pa.array([f"{i:03d}" * 33 + "x" for i in range(1000)])
    values = pc.take(words, pc.remainder(pa.array(range(rows), pa.int64()), 1000))
    pq.write_table(pa.table({"s": values}), exports / "wide.parquet", row_group_size=1 << 20)
    experiment = record(env, cwd, "wide.parquet", "parquet")
    peaks, views = {}, {}
    for limit in (10, rows // 4, rows):
        out = str(tmp_path / f"rows-{limit}.parquet")
        views[limit], peaks[limit] = _measured(
            env, cwd, tmp_path, "slice", experiment, "--limit", str(limit), "--out", out
        )
    assert views[rows]["rows"] == rows and views[rows]["bytes"] > 6 * bound
    assert peaks[rows] - peaks[10] < 2 * bound, peaks  # measured: about 60 MiB
    assert peaks[rows] - peaks[rows // 4] < bound, peaks  # 300 MB more rows; measured: < 20 MiB
    written = pq.ParquetFile(tmp_path / f"rows-{rows}.parquet")
    assert written.metadata.num_rows == rows
    assert written.read_row_group(written.num_row_groups - 1).column("s")[-1] == values[-1]


@pytest.mark.parametrize("fmt", ["csv", "table"])
@pytest.mark.parametrize("where", ["cards", "objects", "state", "symlinked parent"])
def test_out_never_lands_in_the_store_or_the_state_root(host, out_dir, fmt, where):
    # Issue 30: `slice --out` dropped files into cards/ and objects/, and fsck failed after.
    env, cwd, _, ids = host
    tmp = Path(env["ARTMEM_CONFIG"]).parent
    artifacts, state = tmp / "artifacts", tmp / "state"
    target = {
        "cards": next(artifacts.rglob("cards")),
        "objects": next(artifacts.rglob("objects")),
        "state": state,
        "symlinked parent": out_dir / "innocent",
    }[where]
    if where == "symlinked parent":
        target.symlink_to(next(artifacts.rglob("objects")))
    state.mkdir(mode=0o700, exist_ok=True)
    before = sorted(p for p in (*artifacts.rglob("*"), *state.rglob("*")))
    path = target / f"dropped.{'csv' if fmt == 'csv' else 'txt'}"
    code, err = artmem(env, cwd, "slice", ids["parquet"], "--out", str(path), "--format", fmt)
    assert code == 1 and err["error"]["code"] == "cas.path_rejected", err
    assert sorted(p for p in (*artifacts.rglob("*"), *state.rglob("*"))) == before
    code, report = artmem(env, cwd, "fsck")
    assert code == 0 and report["ok"], json.dumps(report)


def test_an_export_many_times_the_recorded_file_is_never_silent(host, out_dir):
    # Issue 30: a 30 KB Parquet of 10^9 rows became a 2 GB CSV in silence. Here 3 million zeros
    # (a few KB of Parquet) become 6 MB of CSV.
    env, cwd, exports, ids = host
    pq.write_table(pa.table({"z": pa.array([0] * 3_000_000, pa.int8())}), exports / "tiny.parquet")
    tiny = record(env, cwd, "tiny.parquet", "parquet")
    size = (exports / "tiny.parquet").stat().st_size
    for argv in (["--json"], []):
        path = out_dir / f"big{len(argv)}.csv"
        done = subprocess.run(
            [ARTMEM, "slice", tiny, "--out", str(path), *argv],
            capture_output=True, text=True, env=env, cwd=cwd, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        written = path.stat().st_size
        assert written > 100 * size
        assert done.stderr.count("warning: the output has passed 100x the recorded file") == 1
        if argv:
            assert json.loads(done.stdout)["amplification"] == round(written / size, 1)
        else:
            assert f"warning: wrote {written / size:,.0f}x the recorded file" in done.stdout
    ordinary = out_dir / "ordinary.csv"
    code, meta = artmem(env, cwd, "slice", ids["parquet"], "--out", str(ordinary))
    assert code == 0 and meta["amplification"] < 100
