"""A scientist's second hour (issue 29): truthful output, typed errors, ids that paste back.

Each test here failed before its fix: the CLI printed "truncated" for the rows a `--limit`
asked for, "(1 rows)", a raw `ArrowInvalid` for a list column as CSV on stdout, an error for a
`--limit` above the stdout bound, and nothing about a CSV column it had to widen.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import cli_project

from harness_plugin.cli import main


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    exports = cli_project(tmp_path, monkeypatch, "[slice]\nmax_rows = 1000\n")

    def record(name: str, data: bytes | pa.Table) -> str:
        if isinstance(data, pa.Table):
            pq.write_table(data, exports / name)
        else:
            (exports / name).write_bytes(data)
        assert main(["record", "--session", "s1", name, "--title", f"T {name}", "--summary", "S",
                     "--query-fingerprint", fingerprint(name), "--source", "w",
                     "--source-version", "v1", "--json"]) == 0  # fmt: skip
        return str(json.loads(capsys.readouterr().out)["experiment_id"])

    return record


def _table(rows: int = 3000) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(range(rows), pa.int64()),
            "tags": pa.array([[f"t{i % 3}"] * (i % 2) for i in range(rows)]),
        }
    )


def test_a_limit_reached_as_asked_is_not_called_truncated(cli, capsys):
    exp = cli("r.parquet", _table())
    assert main(["slice", exp, "--columns", "k", "--limit", "5"]) == 0
    captured = capsys.readouterr()
    assert "(5 rows)" in captured.out and "truncated" not in captured.out
    assert "stopped" not in captured.err
    assert main(["slice", exp, "--columns", "k", "--where", "k = 7"]) == 0
    assert "(1 row)" in capsys.readouterr().out
    assert main(["slice", exp, "--columns", "k"]) == 0  # the operator's bound: more may match
    captured = capsys.readouterr()
    assert "(1000 rows, truncated)" in captured.out and "stopped at the row_limit" in captured.err


def test_a_text_file_of_the_rows_asked_is_not_called_truncated_and_json_says_more_may_match(
    cli, capsys, tmp_path
):
    exp = cli("r.parquet", _table())
    out = tmp_path / "five.txt"
    assert main(["slice", exp, "--columns", "k", "--limit", "5", "--out", str(out)]) == 0
    assert out.read_text().endswith("(5 rows)\n") and "stopped" not in str(capsys.readouterr())
    whole = tmp_path / "whole.txt"
    assert main(["slice", exp, "--columns", "k", "--out", str(whole)]) == 0  # the bound cut it
    assert whole.read_text().endswith("(1000 rows, truncated)\n")
    assert "stopped at the row_limit" in capsys.readouterr().out  # with --out, said on stdout
    assert main(["slice", exp, "--columns", "k", "--limit", "5", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)  # a script pages on while this says so
    assert facts["rows"] == 5 and facts["truncated"] and facts["truncated_reason"] == "row_limit"


def test_a_limit_above_the_stdout_bound_is_capped_with_a_message(cli, capsys):
    exp = cli("r.parquet", _table())
    assert main(["slice", exp, "--columns", "k", "--limit", "200000", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 1 + 1000
    assert "printing at most 1000 rows" in captured.err and "--out" in captured.err


def test_a_list_column_as_csv_on_stdout_is_a_typed_error(cli, capsys):
    exp = cli("r.parquet", _table())
    assert main(["slice", exp, "--format", "csv"]) == 1
    captured = capsys.readouterr()
    assert "input.invalid" in captured.err and "csv cannot hold a column" in captured.err
    assert "--columns" in captured.err and "Traceback" not in captured.err
    assert main(["slice", exp, "--columns", "k", "--limit", "1", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"k"', "0"]


def test_a_widened_csv_column_is_noted(cli, capsys):
    rows = 450_000  # past the first two blocks read to infer types, within the whole-file pass
    lines = ["id,x,note"] + [f"{i},{i}," for i in range(rows)] + [f"{rows},1.5,late"]
    exp = cli("drift.csv", ("\n".join(lines) + "\n").encode())
    code = main(["slice", exp, "--where", f"id >= {rows - 1}", "--format", "jsonl"])
    captured = capsys.readouterr()
    assert code == 0 and "note: column 'x' holds '1.5' in row" in captured.err
    assert [json.loads(line) for line in captured.out.splitlines()] == [
        {"id": rows - 1, "x": rows - 1.0, "note": None},
        {"id": rows, "x": 1.5, "note": "late"},
    ]
    assert main(["show", exp]) == 0
    shown = capsys.readouterr().out
    assert "x: double" in shown and "read as double, not int64" in shown


def test_the_ids_list_prints_are_accepted_everywhere(cli, capsys, tmp_path):
    exp = cli("r.parquet", _table(10))
    assert main(["list"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    short = line.split()[2]
    assert exp.startswith("exp_" + short) and len(short) == 12
    for argv in (["show", short], ["slice", short, "--limit", "1"], ["show", exp[4:]]):
        assert main([*argv, "--json"]) == 0, argv
        assert json.loads(capsys.readouterr().out)["experiment_id"] == exp
    from harness_plugin.notebook import open_store

    assert open_store().card(short).experiment_id == exp


@pytest.mark.parametrize("missing", ["exp_" + "a" * 52, "exp_aaaaaaaa", "aaaaaaaa"])
def test_an_id_of_no_experiment_is_one_code_whatever_its_form(cli, capsys, missing):
    cli("r.parquet", _table(10))
    assert main(["show", missing, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "cas.experiment_not_found"


def test_the_example_id_in_the_error_is_itself_valid(cli, capsys):
    assert main(["show", "exp_nope", "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "input.invalid_id"
    import re

    examples = re.findall(r"e\.g\. (\S+) or (\S+)", error["message"])[0]
    for example in examples:
        assert re.fullmatch(r"(exp_)?[a-z2-7]{8,}", example), example


def test_a_notebook_read_is_not_cut_at_the_bounds_for_models(cli):
    from harness_plugin.notebook import SliceTruncated, open_store

    exp = cli("r.parquet", _table())  # 3000 rows; [slice] max_rows = 1000
    store = open_store()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither SliceTruncated nor anything else
        assert store.read_slice(exp, columns=["k"]).column("k").to_pylist() == list(range(3000))
        assert store.read_slice(exp, limit=2500).num_rows == 2500
        assert store.read_slice(exp, limit=1).num_rows == 1  # the one row asked for
        assert store.read_slice(exp, where="k >= 2990").num_rows == 10
        assert store.read_slice(exp, columns=[], where="k >= 500").num_rows == 2500  # a count
        frame = store.to_pandas(exp, where="k >= 1500") if _has_pandas() else None
    assert frame is None or len(frame) == 1500
    with pytest.warns(SliceTruncated):  # an operator's export bound still ends the read
        _bounded_store(store, 100).read_slice(exp, columns=["k"])


def test_a_notebook_resolve_of_a_stale_result_warns(cli):
    from harness_plugin.notebook import StaleResult, open_store

    exp = cli("r.parquet", _table(10))
    with pytest.warns(StaleResult, match="stale"):
        resolved = open_store().resolve(exp, current_source_version="v2")
    assert resolved.freshness == "stale"


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def _bounded_store(store, rows: int):
    from cas.slicing import ExportLimits

    store._limits = store._limits.with_export(ExportLimits(max_rows=rows))
    return store


def _npy(descr: str, shape: tuple[int, ...], version: int = 1) -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    size = len(header).to_bytes(2 if version == 1 else 4, "little")
    values = 8 * (shape[0] * shape[1] if len(shape) == 2 else 1)
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + b"\0" * values


@pytest.mark.parametrize("version", [1, 2])
def test_png_and_npy_are_told_by_their_magic_and_an_arrays_shape_is_recorded(cli, capsys, version):
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
    shown = {}
    for name, data in (("plot.bin", png), ("weights.bin", _npy("<f8", (3, 4), version))):
        exp = cli(name, data)
        assert main(["show", exp, "--json"]) == 0
        shown[name] = json.loads(capsys.readouterr().out)
    assert shown["plot.bin"]["artifact"]["media_type"] == "image/png"
    assert shown["weights.bin"]["artifact"]["media_type"] == "application/x-npy"
    assert shown["weights.bin"]["card"]["shape"] == [3, 4]


def test_a_hostile_npy_header_records_without_a_shape(cli, capsys):
    data = b"\x93NUMPY\x01\x00" + (30).to_bytes(2, "little") + b"{'shape': __import__('os')}\n  "
    exp = cli("evil.npy", data)
    assert main(["show", exp, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["artifact"]["media_type"] == "application/x-npy" and view["card"]["shape"] is None


def test_export_into_a_directory_keeps_a_name(cli, capsys, tmp_path):
    exp = cli("r.parquet", _table(10))
    target = tmp_path / "copies"
    target.mkdir()
    assert main(["export", exp, f"{target}/", "--json"]) == 0
    written = target / f"{exp}.parquet"
    assert json.loads(capsys.readouterr().out)["path"] == str(written)
    assert pq.read_table(written).num_rows == 10


def test_a_missing_configuration_file_is_named(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "nope.toml"
    monkeypatch.setenv("ARTMEM_CONFIG", str(missing))
    assert main(["list", "--json"]) == 1
    assert str(missing) in json.loads(capsys.readouterr().out)["error"]["message"]


def test_fsck_counts_in_the_singular(cli, capsys):
    cli("r.parquet", _table(10))
    assert main(["fsck"]) == 0
    assert "checked 1 object (" in capsys.readouterr().out


@pytest.mark.parametrize("option", [["--config", "x.toml"], ["--project", "p"]])
def test_demo_refuses_options_it_cannot_use(capsys, option):
    assert main(["demo", *option, "--json"]) == 2
    assert (
        "takes no --config or --project" in json.loads(capsys.readouterr().out)["error"]["message"]
    )


def test_a_reader_that_closes_early_ends_the_slice_with_status_141(cli):
    exp = cli("big.parquet", pa.table({"k": range(1000), "s": ["x" * 3000] * 1000}))  # 3 MB
    artmem = str(Path(sys.executable).parent / "artmem")
    with subprocess.Popen([artmem, "slice", exp, "--format", "csv"], stdout=subprocess.PIPE) as p:
        assert p.stdout is not None
        assert p.stdout.readline() == b'"k","s"\n'
        p.stdout.close()  # as `| head -1` does, long before 3 MB could fit in the pipe
        assert p.wait() == 141


def test_source_means_the_data_source_in_every_json(cli, capsys):
    exp = cli("r.parquet", _table(10))
    assert main(["search", "r.parquet", "--json"]) == 0
    (hit,) = [h for h in json.loads(capsys.readouterr().out)["hits"] if h["experiment_id"] == exp]
    assert main(["list", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["experiments"]
    assert hit["source"] == entry["source"] == "w"  # the card's source, as `record --source`
    assert hit["origin"] == "local" and "data_source" not in hit


def test_the_tool_schema_follows_the_wire():
    from cards.results import SearchHit, json_schema

    fields = json_schema(SearchHit)["properties"]
    assert {"source", "origin"} <= set(fields) and "data_source" not in fields


def test_columns_with_commas_or_spaces_are_quoted_and_columns_repeats(cli, capsys):
    table = pa.table({"id": [1, 2], "dose, mg": [0.5, 1.5], " padded ": ["a", "b"], 'q"t': [7, 8]})
    exp = cli("odd.parquet", table)

    def columns(*flags: str) -> list[str]:
        assert main(["slice", exp, *flags, "--json"]) == 0, capsys.readouterr()
        return json.loads(capsys.readouterr().out)["columns"]

    assert columns("--columns", 'id, "dose, mg"') == ["id", "dose, mg"]
    assert columns("--columns", '" padded ",id', "--columns", '"q""t"') == [" padded ", "id", 'q"t']
    for bad, words in [
        (['"dose, mg'], "a quote is never closed"),
        (['"dose" mg'], "must end with its quote"),
        (["id,,x"], "non-empty column names"),
        (["id", "--columns", "id"], "a column is requested more than once"),
    ]:
        assert main(["slice", exp, "--columns", *bad, "--json"]) == 1
        assert words in json.loads(capsys.readouterr().out)["error"]["message"]
