"""`artmem show` and `artmem slice` on recorded Parquet results."""

from __future__ import annotations

import csv
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import cli_project

from harness_plugin.cli import main

ROWS = 3000


@pytest.fixture
def recorded(tmp_path, monkeypatch, capsys):
    exports = cli_project(tmp_path, monkeypatch, "[slice]\nmax_rows = 1000\n")
    table = pa.table(
        {
            "k": pa.array(range(ROWS), pa.int64()),
            "cohort": pa.array([f"c{i % 3}" for i in range(ROWS)]),
            "value": pa.array([i / 10 for i in range(ROWS)]),
        }
    )
    pq.write_table(table, exports / "r.parquet", row_group_size=1000)
    (exports / "notes.txt").write_text("plain text result")
    ids = {}
    for name, media in (
        ("r.parquet", "application/vnd.apache.parquet"),
        ("notes.txt", "text/plain"),
    ):
        assert main(["record", "--session", "s1", name, "--title", f"T {name}", "--summary", "S",
                     "--query-fingerprint", fingerprint(name), "--source", "w",
                     "--source-version", "v1", "--media-type", media, "--json"]) == 0  # fmt: skip
        ids[name] = json.loads(capsys.readouterr().out)["experiment_id"]
    return ids, tmp_path


def _json(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_show_reads_the_footer(recorded, capsys):
    ids, _ = recorded
    code, view = _json(capsys, "show", ids["r.parquet"], "--current-source-version", "v2")
    assert code == 0 and view["freshness"] == "stale" and view["warnings"]
    table = view["table"]
    assert table["num_rows"] == ROWS and table["num_row_groups"] == 3
    assert [f["name"] for f in table["fields"]] == ["k", "cohort", "value"]
    k = next(c for c in table["columns"] if c["path"] == "k")
    assert (k["min"], k["max"]) == (0, ROWS - 1)
    assert main(["show", ids["r.parquet"]]) == 0
    text = capsys.readouterr().out
    assert "3,000 in 3 row groups" in text and "k: int64" in text


def test_show_of_a_non_table_shows_the_card(recorded, capsys):
    ids, _ = recorded
    code, view = _json(capsys, "show", ids["notes.txt"])
    assert code == 0 and view["table"] is None and "supported" in view["note"]


def test_slice_metadata_and_bounds(recorded, capsys):
    ids, _ = recorded
    code, meta = _json(
        capsys, "slice", ids["r.parquet"], "--columns", "k,cohort", "--where", "k >= 2500",
        "--limit", "10",
    )  # fmt: skip
    assert code == 0 and meta["rows"] == 10 and meta["truncated"]
    assert meta["columns"] == ["k", "cohort"] and meta["chunks_verified"] >= 1
    code, meta = _json(capsys, "slice", ids["r.parquet"])
    assert meta["rows"] == 1000 and meta["truncated_reason"] == "row_limit"  # operator's bound
    code, out = _json(capsys, "slice", ids["r.parquet"], "--limit", "5000")
    assert code == 0 and out["rows"] == 1000 and out["capped"] == 1000  # stdout's bound


def test_slice_formats(recorded, capsys, tmp_path):
    ids, _ = recorded
    assert main(["slice", ids["r.parquet"], "--where", "k < 3", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["k"] for r in rows] == ["0", "1", "2"]
    assert main(["slice", ids["r.parquet"], "--where", "k < 2", "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["k"] for line in lines] == [0, 1]
    assert main(["slice", ids["r.parquet"], "--where", "cohort = 'c1' and k < 10"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["k", "cohort", "value"] and "(3 rows)" in text
    out = tmp_path / "piece.parquet"
    code, meta = _json(capsys, "slice", ids["r.parquet"], "--where", "k < 7", "--format",
                       "parquet", "--out", str(out))  # fmt: skip
    assert code == 0 and pq.read_table(out).num_rows == 7 and meta["out"] == str(out)
    assert [p.name for p in out.parent.iterdir() if p.name.endswith(".partial")] == []
    code, err = _json(capsys, "slice", ids["r.parquet"], "--format", "parquet", "--out", str(out))
    assert code == 1 and "existing" in err["error"]["message"]
    code, err = _json(capsys, "slice", ids["r.parquet"], "--format", "parquet")
    assert code == 1 and err["error"]["code"] == "input.invalid"


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--columns", "k,nope"], "slice.unknown_column"),
        (["--where", "k >>= 3"], "slice.filter_syntax"),
        (["--where", "cohort > 3"], "slice.filter_type"),
        (["--columns", "k,,cohort"], "input.invalid"),
    ],
)
def test_slice_errors_are_typed(recorded, capsys, argv, code):
    ids, _ = recorded
    status, out = _json(capsys, "slice", ids["r.parquet"], *argv)
    assert status == 1 and out["error"]["code"] == code


def test_slice_of_a_non_table_names_what_is_supported(recorded, capsys):
    ids, _ = recorded
    status, out = _json(capsys, "slice", ids["notes.txt"])
    assert status == 1 and out["error"]["code"] == "slice.unsupported_media_type"
    assert "parquet" in out["error"]["message"]


def test_a_flipped_byte_in_a_read_chunk_fails_the_slice(recorded, capsys):
    ids, tmp_path = recorded
    objects = list((tmp_path / "artifacts").rglob("art_*"))
    parquet = next(p for p in objects if not p.name.endswith(".chunks") and p.stat().st_size > 1000)
    parquet.chmod(0o600)
    with open(parquet, "r+b") as handle:
        handle.seek(100)
        byte = handle.read(1)
        handle.seek(100)
        handle.write(bytes([byte[0] ^ 0xFF]))
    status, out = _json(capsys, "slice", ids["r.parquet"], "--where", "k < 3")
    assert status == 1 and out["error"]["code"] == "cas.integrity"
    assert os.path.exists(parquet)


HOSTILE_NAMES = [
    "osc52\x1b]52;c;ZXZpbA==\x07",  # a clipboard write
    "clear\x1b[2J\x1b[H",  # a screen clear
    "bidi\u202eevil",
    "c1\x9b31m",
]


def test_hostile_column_names_are_escaped_in_show_and_the_slice_header(
    tmp_path, monkeypatch, capsys
):
    # Issue 30: cells were escaped, column names were printed raw.
    exports = cli_project(tmp_path, monkeypatch)
    table = pa.table({name: pa.array([1, 2]) for name in HOSTILE_NAMES})
    pq.write_table(table, exports / "h.parquet")
    assert main(["record", "--session", "s1", "h.parquet", "--title", "T", "--summary", "S",
                 "--query-fingerprint", fingerprint("h"), "--source", "w",
                 "--source-version", "v1", "--media-type", "application/vnd.apache.parquet",
                 "--json"]) == 0  # fmt: skip
    experiment = json.loads(capsys.readouterr().out)["experiment_id"]
    for argv in (["show", experiment], ["slice", experiment, "--format", "table"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert not any(c in out for c in "\x1b\x07\x9b\u202e"), (argv, out)
        assert "osc52\\x1b]52;c;ZXZpbA==\\x07" in out and "bidi\\u202eevil" in out


def test_fsck_escapes_bucket_keys_and_entry_names():
    from harness_plugin._views import fsck_lines

    view = {"ok": False, "problems": 4, "objects": 0, "bytes": 0, "cards": 0,
            "invalid_objects": [], "orphans": [], "dangling_cards": [],
            "invalid_cards": [{"name": "c\x1b[2J.json", "code": "card.invalid"}],
            "manifest_mismatches": [], "stale_stages": [], "live_stages": 0,
            "unknown_entries": ["projects/p/objects/\x1b]52;c;ZXZpbA==\x07", "k\u202e"],
            "removed_stages": [], "quarantined": ["q\x9b2J"]}  # fmt: skip
    text = "\n".join(fsck_lines(view))
    assert not any(c in text for c in "\x1b\x07\x9b\u202e")
    assert "objects/\\x1b]52;c;ZXZpbA==\\x07" in text
