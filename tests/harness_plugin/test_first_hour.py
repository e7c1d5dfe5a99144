"""Issue 10, "A scientist's first hour": clean slice output, --json errors, messages, re-records."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import cli_project

from cards import parse_metadata, parse_project_id, wire
from cards.build import revised_card
from cards.testing import card_for_bytes
from harness_plugin.cli import main

ROWS = 3000
ARTMEM = str(Path(sys.executable).parent / "artmem")


@pytest.fixture
def env(tmp_path, monkeypatch):
    exports = cli_project(tmp_path, monkeypatch, "[slice]\nmax_rows = 1000\n")
    table = pa.table(
        {"k": pa.array(range(ROWS), pa.int64()), "c": [f"c{i % 3}" for i in range(ROWS)]}
    )
    pq.write_table(table, exports / "r.parquet", row_group_size=1000)
    return tmp_path


def _json(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _record_argv(name: str, *extra: str) -> list[str]:
    return ["record", "--session", "s1", name, "--title", "T", "--summary", "S",
            "--query-fingerprint", fingerprint(name), "--source", "w",
            "--source-version", "v1", *extra]  # fmt: skip


def _recorded(capsys, name: str = "r.parquet", *extra: str) -> str:
    code, out = _json(capsys, *_record_argv(name, "--media-type",
                                            "application/vnd.apache.parquet", *extra))  # fmt: skip
    assert code == 0, out
    return str(out["experiment_id"])


# -- 3. slice output is clean -------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_truncated_slice_keeps_its_notice_out_of_the_data(env, capsys, fmt):
    exp = _recorded(capsys)
    assert main(["slice", exp, "--format", fmt]) == 0
    captured = capsys.readouterr()
    assert "stopped" not in captured.out and "row_limit" in captured.err
    lines = captured.out.splitlines()
    assert len(lines) == 1000 + (fmt == "csv")


def test_a_closed_pipe_ends_the_slice_quietly(env, capsys):
    exp = _recorded(capsys)
    reader, writer = os.pipe()
    os.close(reader)  # the reader (think `head`) is gone before the first write
    proc = subprocess.run(
        [ARTMEM, "slice", exp, "--format", "csv"], stdout=writer, stderr=subprocess.PIPE,
        text=True, check=False,
    )  # fmt: skip
    os.close(writer)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
    assert proc.returncode == 141


def test_out_infers_the_format_from_its_extension(env, capsys, tmp_path):
    exp = _recorded(capsys)
    out = tmp_path / "piece.parquet"
    code, meta = _json(capsys, "slice", exp, "--where", "k < 4", "--out", str(out))
    assert code == 0 and meta["format"] == "parquet" and pq.read_table(out).num_rows == 4
    csv_out = tmp_path / "piece.csv"
    assert main(["slice", exp, "--where", "k < 2", "--out", str(csv_out)]) == 0
    assert csv_out.read_text().splitlines()[0] == '"k","c"'


def test_a_format_that_contradicts_the_extension_is_refused(env, capsys, tmp_path):
    exp = _recorded(capsys)
    out = tmp_path / "piece.parquet"
    code, err = _json(capsys, "slice", exp, "--format", "csv", "--out", str(out))
    assert code == 1 and err["error"]["code"] == "input.invalid"
    assert "contradicts" in err["error"]["message"] and not out.exists()


# -- 4. --json errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["slice", "exp_x", "--format", "xlsx"],
        ["slice", "exp_x", "--limit", "abc"],
        ["search"],
        ["no-such-command"],
        ["search", "x", "--no-such-option"],
    ],
)
def test_argument_errors_under_json_are_json(env, capsys, argv):
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert code == 2 and error["code"] == "input.invalid" and error["message"]
    assert captured.err == ""


def test_argument_errors_for_people_still_show_usage(env, capsys):
    assert main(["slice", "exp_x", "--limit", "abc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: artmem slice") and "invalid int value" in err


# -- 6. messages that help ----------------------------------------------------------------


def test_a_wrong_session_names_the_session_and_the_exports_directory(env, capsys):
    code, out = _json(capsys, *_record_argv("r.parquet") + ["--session", "s9"])
    assert code == 1 and out["error"]["code"] == "cas.source_missing"
    assert "'s9'" in out["error"]["message"]
    assert str(env / "rlm" / "sessions" / "s9" / "exports") in out["error"]["message"]


def test_metadata_errors_say_what_the_field_must_look_like(env, capsys):
    argv = _record_argv("r.parquet", "--title", "x" * 500)
    argv[argv.index("--query-fingerprint") + 1] = "abc"
    code, out = _json(capsys, *argv)
    message = out["error"]["message"]
    assert code == 1 and "64 lowercase hex characters" in message
    assert "at most 200 characters" in message and "x" * 20 not in message


def test_an_invalid_experiment_id_shows_the_expected_form(env, capsys):
    code, out = _json(capsys, "resolve", "exp-123")
    assert code == 1 and out["error"]["code"] == "input.invalid_id"
    assert "exp_ followed by 52 characters" in out["error"]["message"]


@pytest.mark.parametrize(
    ("where", "hint"),
    [
        ("k == 3", "not =="),
        ("c = null", "is null"),
        ('c = "c1"', "single quotes"),
        ("k between 1 and 3", "supported operators"),
    ],
)
def test_filter_errors_suggest_the_fix(env, capsys, where, hint):
    exp = _recorded(capsys)
    code, out = _json(capsys, "slice", exp, "--where", where)
    assert code == 1 and hint in out["error"]["message"]


def test_a_date_string_against_a_date_column_suggests_a_date_literal(env, capsys):
    exports = env / "rlm" / "sessions" / "s1" / "exports"
    table = pa.table({"d": pa.array([datetime.date(2024, 1, i) for i in range(1, 4)])})
    pq.write_table(table, exports / "d.parquet")
    exp = _recorded(capsys, "d.parquet")
    code, out = _json(capsys, "slice", exp, "--where", "d >= '2024-01-02'")
    assert code == 1 and "date 'YYYY-MM-DD'" in out["error"]["message"]
    code, out = _json(capsys, "slice", exp, "--where", "d >= date '2024-01-02'")
    assert code == 0 and out["rows"] == 2


def test_sync_with_honcho_off_says_so(env, capsys):
    code, out = _json(capsys, "sync")
    assert code == 1 and out["error"]["code"] == "indexer.disabled"
    assert "Honcho indexing is disabled" in out["error"]["message"]


# -- 7. after fsck --repair ---------------------------------------------------------------


def test_a_quarantined_result_keeps_its_card_and_says_how_to_restore(env, capsys):
    exp = _recorded(capsys)
    code, resolved = _json(capsys, "resolve", exp)
    path = Path(resolved["path"])
    path.chmod(0o600)
    path.write_bytes(b"corrupt")
    code, report = _json(capsys, "fsck", "--repair")
    assert report["quarantined"]
    code, shown = _json(capsys, "show", exp)
    assert code == 0 and shown["available_locally"] is False
    assert shown["card"]["title"] == "T" and "record the original" in shown["note"]
    code, found = _json(capsys, "search", "T")
    assert found["hits"][0]["available_locally"] is False
    assert main(["search", "T"]) == 0
    assert "not available locally" in capsys.readouterr().out
    code, out = _json(capsys, "resolve", exp)
    assert code == 1 and "record the original" in out["error"]["message"]
    _recorded(capsys)  # recording the same bytes again restores them
    code, shown = _json(capsys, "show", exp)
    assert shown["available_locally"] is True and shown["table"]["num_rows"] == ROWS


# -- 2. a re-record keeps what it does not restate ------------------------------------------


def test_a_re_record_keeps_omitted_fields_and_lists_what_changed(env, capsys):
    parquet = "application/vnd.apache.parquet"
    argv = _record_argv("r.parquet", "--media-type", parquet)
    code, first = _json(capsys, *argv, "--tag", "a", "--tag", "b", "--column", "k")
    code, again = _json(capsys, *_record_argv("r.parquet"))
    assert code == 0 and again["changed"] == [] and again["deduplicated"]
    code, shown = _json(capsys, "show", first["experiment_id"])
    assert shown["card"]["tags"] == ["a", "b"] and shown["card"]["columns"] == ["k"]
    assert shown["artifact"]["media_type"] == parquet
    code, cleared = _json(capsys, *_record_argv("r.parquet", "--tag", "", "--title", "New"))
    assert cleared["changed"] == ["title", "tags"]
    code, shown = _json(capsys, "show", first["experiment_id"])
    assert shown["card"]["tags"] == [] and shown["card"]["columns"] == ["k"]
    assert main(_record_argv("r.parquet", "--title", "Newer")) == 0
    assert "updated   title" in capsys.readouterr().out


def test_the_tool_arguments_leave_omitted_fields_unset():
    fields = {"title": "T", "summary": "S", "query_fingerprint": fingerprint(), "source": "w",
              "source_version": "v1"}  # fmt: skip
    card = card_for_bytes(
        b"x",
        parse_metadata({**fields, "tags": ["a"], "columns": ["k"], "media_type": "text/csv"}),
        project_id=parse_project_id("trial-analysis"),
        session_id="s1",
        now=datetime.datetime.now(datetime.UTC),
    )
    args = wire.RecordArgs.model_validate({**fields, "source_path": "x.csv"})
    assert revised_card(card, args.metadata(), card.created_at) is card
    cleared = wire.RecordArgs.model_validate({**fields, "source_path": "x", "tags": []})
    revised = revised_card(card, cleared.metadata(), card.created_at)
    assert revised.tags == [] and revised.columns == ["k"]
    assert revised.artifact.media_type == "text/csv"


# -- 1. tables are recognised by their content ----------------------------------------------


def test_parquet_and_arrow_are_detected_from_their_content(env, capsys):
    exports = env / "rlm" / "sessions" / "s1" / "exports"
    table = pa.table({"k": pa.array(range(10), pa.int64())})
    with (
        pa.OSFile(str(exports / "t.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as w,
    ):
        w.write_table(table)
    with pa.OSFile(str(exports / "t.stream"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    (exports / "renamed.parquet").write_bytes(b"not parquet at all")
    (exports / "data.csv").write_text("k\n1\n")
    expected = {
        "r.parquet": "application/vnd.apache.parquet",
        "t.arrow": "application/vnd.apache.arrow.file",
        "t.stream": "application/vnd.apache.arrow.stream",
        "renamed.parquet": "application/octet-stream",  # a name alone is not trusted
        "data.csv": "text/csv",
    }
    for name, media_type in expected.items():
        code, out = _json(capsys, *_record_argv(name))
        assert code == 0, out
        code, shown = _json(capsys, "show", out["experiment_id"])
        assert shown["artifact"]["media_type"] == media_type, name
    code, out = _json(capsys, *_record_argv("r.parquet"))
    code, sliced = _json(capsys, "slice", out["experiment_id"], "--where", "k < 3")
    assert code == 0 and sliced["rows"] == 3


def test_a_media_type_that_contradicts_the_content_is_refused(env, capsys):
    exports = env / "rlm" / "sessions" / "s1" / "exports"
    (exports / "notes.txt").write_text("plain")
    code, out = _json(capsys, *_record_argv("r.parquet", "--media-type", "text/csv"))
    assert code == 1 and out["error"]["code"] == "input.invalid"
    assert "contradicts" in out["error"]["message"]
    parquet = "application/vnd.apache.parquet"
    code, out = _json(capsys, *_record_argv("notes.txt", "--media-type", parquet))
    assert code == 1 and "magic number" in out["error"]["message"]


def test_a_re_record_corrects_an_octet_stream_card_of_a_table(env, capsys):
    octet = "application/octet-stream"
    code, out = _json(capsys, *_record_argv("r.parquet", "--media-type", octet))
    code, again = _json(capsys, *_record_argv("r.parquet"))
    assert again["changed"] == ["columns", "shape", "media_type"]
    code, shown = _json(capsys, "show", out["experiment_id"])
    assert shown["table"]["num_rows"] == ROWS


# -- 14. version, help and status -----------------------------------------------------------


def test_version_help_and_readable_status(env, capsys):
    version = subprocess.run([ARTMEM, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("artmem ")
    help_text = subprocess.run(
        [ARTMEM, "record", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert help_text.count("repeat for more") == 4  # --tag, --column, --csv-type, --csv-null
    _recorded(capsys)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "1 disabled" in out and "trial-analysis" in out and "{" not in out


# -- 9. short ids ---------------------------------------------------------------------------


def test_a_unique_prefix_names_an_experiment(env, capsys):
    exp = _recorded(capsys)
    proc = subprocess.run(
        [ARTMEM, "show", exp[:12], "--json"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["experiment_id"] == exp
    code, out = _json(capsys, "resolve", "exp_abc")
    assert code == 1 and "at least 8" in out["error"]["message"]
    other = "exp_" + ("a" if exp[4] != "a" else "b") * 10
    code, out = _json(capsys, "slice", other)
    assert code == 1 and out["error"]["code"] == "cas.experiment_not_found"  # as a full id
