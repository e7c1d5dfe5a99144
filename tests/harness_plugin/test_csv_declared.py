"""CSV types and null tokens declared once at `record`, and every later read agreeing (issue 29).

The scientist's drifting CSV (`x` an integer for most rows, then `250001.5` and `NA`) recorded
with `--csv-type x=float64 --csv-null NA`, then read with no flags by the CLI, the notebook and
a kernel (`rlm_client.read_slice` of what the worker's resolve tool returned): each must agree
with `pandas.read_csv(..., dtype={'x': 'float64'}, na_values=['NA'])`, and with an oracle from
the `csv` module where pandas is not installed.
"""

from __future__ import annotations

import csv
import io
import json

import msgspec
import pyarrow as pa
import pytest
from host_helpers import call_tool, cli_project

from cards.errors import InvalidInput
from cards.results import ResolveResult
from cards.table_read import TableRead, merged, table_read
from harness_plugin.cli import main
from harness_plugin.notebook import open_store
from rlm_client import read_slice as kernel_slice

ROWS = 3000
DRIFT = 2500  # a small file: the large one, sliced past its first block, is in tests/cas


def drifting() -> bytes:
    lines = ["id,x,note"]
    for i in range(ROWS):
        x = str(i) if i < DRIFT else (f"{i}.5" if i % 2 else "NA")
        lines.append(f"{i},{x},{'' if i % 7 == 0 else 'n' + str(i % 5)}")
    return ("\n".join(lines) + "\n").encode()


def expected_x(data: bytes) -> list[float | None]:
    """`x` as pandas reads it with dtype float64 and na_values ['NA'] (blank is null too)."""
    rows = list(csv.DictReader(io.StringIO(data.decode())))
    return [None if r["x"] in ("", "NA") else float(r["x"]) for r in rows]


@pytest.fixture
def project(tmp_path, monkeypatch, capsys):
    exports = cli_project(tmp_path, monkeypatch)
    return tmp_path, exports


def run(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out or out.err)


def record(capsys, name: str, *flags: str) -> tuple[int, dict]:
    return run(capsys, "record", "--session", "s1", name, "--query", f"select * from {name}",
               "--source", "lab", "--source-version", "v1", *flags)  # fmt: skip


def test_declared_types_reach_the_cli_the_notebook_and_a_kernel(project, capsys):
    tmp, exports = project
    data = drifting()
    (exports / "drift.csv").write_bytes(data)
    code, out = record(capsys, "drift.csv", "--csv-type", "x=float64", "--csv-null", "NA")
    assert code == 0, out
    exp = out["experiment_id"]
    want = expected_x(data)

    # The CLI, with no flag: the card's declared types.
    code, shown = run(capsys, "show", exp)
    assert shown["card"]["table_read"] == {"types": {"x": "float64"}, "nulls": ["NA"]}
    assert {f["name"]: f["type"] for f in shown["table"]["fields"]}["x"] == "double"
    assert any("except the declared ones" in n for n in shown["table"]["notes"])
    assert main(["slice", exp, "--columns", "x", "--format", "csv", "--limit", str(ROWS)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [None if v == "" else float(v) for v in lines] == want
    assert main(["show", exp]) == 0
    text = capsys.readouterr().out
    assert "csv types   'x' float64" in text and "csv nulls   'NA'" in text

    # The notebook, with no argument.
    store = open_store()
    assert store.read_slice(exp, ["x"]).column("x").to_pylist() == want

    # A kernel: the worker's resolve tool, then `rlm_client.read_slice` with no argument.
    raw = call_tool(tmp, "memory_artifact_resolve", {"experiment_id": exp})
    resolved = msgspec.convert(raw, ResolveResult)
    piece = kernel_slice(resolved, columns=["x"], limit=ROWS)
    assert piece.table.schema.field("x").type == pa.float64()
    assert piece.table.column("x").to_pylist() == want
    assert piece.notes == ()  # declared, not widened


def test_the_notebooks_frame_is_pandas_own(project, capsys):
    pd = pytest.importorskip("pandas")  # not a dependency: checked where it is installed
    _, exports = project
    data = drifting()
    (exports / "drift.csv").write_bytes(data)
    exp = record(capsys, "drift.csv", "--csv-type", "x=float64", "--csv-null", "NA")[1][
        "experiment_id"
    ]
    frame = pd.read_csv(io.BytesIO(data), dtype={"x": "float64"}, na_values=["NA"])
    got = open_store().to_pandas(exp)
    pd.testing.assert_frame_equal(got, frame, check_dtype=False)
    assert str(got["x"].dtype) == "float64"


def test_a_call_overrides_the_card_for_itself(project, capsys):
    _, exports = project
    (exports / "t.csv").write_bytes(b"id,code\n1,007\n2,-\n3,010\n")
    code, out = record(capsys, "t.csv", "--csv-type", "code=string")
    assert code == 0, out
    exp = out["experiment_id"]
    store = open_store()
    assert store.read_slice(exp).column("code").to_pylist() == ["007", "-", "010"]
    over = store.read_slice(exp, csv_types={"code": "int64"}, csv_nulls=["-"])
    assert over.column("code").to_pylist() == [7, None, 10]
    assert main(["slice", exp, "--csv-null", "-", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"id","code"', '1,"007"', "2,", '3,"010"']


def test_a_re_record_replaces_keeps_or_clears_the_options(project, capsys):
    _, exports = project
    (exports / "t.csv").write_bytes(b"a,b\n1,2\n")
    code, out = record(capsys, "t.csv", "--csv-type", "a=float64")
    exp = out["experiment_id"]
    assert record(capsys, "t.csv", "--tag", "x")[1]["changed"] == ["tags"]  # options kept
    assert run(capsys, "show", exp)[1]["card"]["table_read"]["types"] == {"a": "float64"}
    code, out = record(capsys, "t.csv", "--csv-null", "-")
    assert out["changed"] == ["table_read"]
    assert run(capsys, "show", exp)[1]["card"]["table_read"] == {"types": {}, "nulls": ["-"]}
    assert record(capsys, "t.csv", "--csv-type", "")[1]["changed"] == ["table_read"]
    assert run(capsys, "show", exp)[1]["card"]["table_read"] is None


INVALID = "input.invalid"


@pytest.mark.parametrize(
    ("flags", "code", "words"),
    [
        (["--csv-type", "x=float128"], INVALID, "unknown type 'float128' for column 'x'"),
        (["--csv-type", "x"], INVALID, "is not COLUMN=TYPE"),
        (["--csv-type", "nope=int64"], INVALID, "column 'nope', which the table does not have"),
        (["--csv-type", "x=int64"], INVALID, "holds '2.5' in row 3 (the header is row 1), which "
         "does not fit its declared type int64"),
        (["--csv-null", "a\nb"], INVALID, "a null token must be one line"),
        (["--csv-null", "n" * 65], INVALID, "a null token must be 1 to 64 characters"),
    ],
)  # fmt: skip
def test_hostile_options_are_refused_at_record_with_the_bad_part_named(
    project, capsys, flags, code, words
):
    _, exports = project
    (exports / "d.csv").write_bytes(b"x,y\n1,a\n2.5,b\n")
    status, out = record(capsys, "d.csv", *flags)
    assert status == 1 and out["error"]["code"] == code
    assert words in out["error"]["message"]
    assert run(capsys, "list")[1]["experiments"] == []  # nothing recorded


def test_ten_thousand_declared_columns_are_refused(project, capsys):
    _, exports = project
    (exports / "d.csv").write_bytes(b"x\n1\n")
    flags = [arg for i in range(10_000) for arg in ("--csv-type", f"c{i}=int64")]
    code, out = record(capsys, "d.csv", *flags)
    assert code == 1 and out["error"]["code"] == "input.invalid"
    assert "10000 column types declared; at most 256" in out["error"]["message"]


def test_options_for_a_parquet_are_refused(project, capsys):
    import pyarrow.parquet as pq

    _, exports = project
    pq.write_table(pa.table({"x": [1]}), exports / "t.parquet")
    code, out = record(capsys, "t.parquet", "--csv-type", "x=float64")
    assert code == 1 and "apply to CSV and TSV files" in out["error"]["message"]
    code, out = record(capsys, "t.parquet")
    assert code == 0
    code, err = run(capsys, "slice", out["experiment_id"], "--csv-null", "NA")
    assert code == 1 and "apply to CSV and TSV tables" in err["error"]["message"]


def test_a_value_the_declared_type_cannot_hold_is_a_typed_slice_error(project, capsys):
    """Declared per call (the card cannot hold a type the file refutes): named column and type."""
    _, exports = project
    (exports / "d.csv").write_bytes(b"id,x\n1,1\n2,oops\n")
    code, out = record(capsys, "d.csv")
    code, err = run(capsys, "slice", out["experiment_id"], "--csv-type", "x=int64")
    assert code == 1 and err["error"]["code"] == "slice.table_unreadable"
    message = err["error"]["message"]
    assert "column 'x' holds 'oops'" in message and "declared type int64" in message
    with pytest.raises(Exception, match="unknown type 'decimal'"):
        open_store().read_slice(out["experiment_id"], csv_types={"x": "decimal"})


def test_diff_says_how_two_experiments_are_read(project, capsys):
    _, exports = project
    (exports / "t.csv").write_bytes(b"a,b\n1,2\n")
    plain = record(capsys, "t.csv")[1]["experiment_id"]
    declared = run(
        capsys,
        "record",
        "--session",
        "s1",
        "t.csv",
        "--query",
        "other",
        "--source",
        "lab",
        "--source-version",
        "v1",
        "--csv-type",
        "a=float64",
    )[1]
    code, diff = run(capsys, "diff", plain, declared["experiment_id"])  # fmt: skip
    fields = {change["field"]: (change["a"], change["b"]) for change in diff["card"]}
    assert fields["table_read"] == (None, {"types": {"a": "float64"}, "nulls": []})
    assert fields["query"] == ("select * from t.csv", "other")
    assert main(["diff", plain, declared["experiment_id"]]) == 0
    assert "rows: unknown -> unknown" in capsys.readouterr().out


def semicolons() -> bytes:
    """A spreadsheet's "CSV" where the decimal mark is a comma: `;` between values."""
    lines = ["id;dose;site"]
    lines += [f"{i};{i // 3},{i % 100:02d};s,{i % 4}" for i in range(ROWS)]
    return ("\r\n".join(lines) + "\r\n").encode()


def test_a_declared_decimal_comma_reaches_the_cli_the_notebook_and_a_kernel(project, capsys):
    tmp, exports = project
    data = semicolons()
    (exports / "eu.csv").write_bytes(data)
    want = [float(f"{i // 3}.{i % 100:02d}") for i in range(ROWS)]  # as a point would write it

    code, out = record(capsys, "eu.csv")
    assert code == 0, out
    exp = out["experiment_id"]
    assert any("'dose' holds numbers with a decimal comma" in w for w in out["warnings"])
    assert run(capsys, "show", exp)[1]["table"]["fields"][1]["type"] == "string"
    code, out = record(capsys, "eu.csv", "--csv-decimal", ",")
    assert code == 0 and out["changed"] == ["table_read"], out
    code, shown = run(capsys, "show", exp)
    assert shown["card"]["table_read"] == {"types": {}, "nulls": [], "decimal": ","}
    assert [f["type"] for f in shown["table"]["fields"]] == ["int64", "double", "string"]
    assert not any("decimal comma" in n for n in shown["table"]["notes"])
    assert main(["show", exp]) == 0 and "csv decimal ','" in capsys.readouterr().out

    code, sliced = run(capsys, "slice", exp, "--where", "dose >= 999.98", "--columns", "id")
    assert code == 0 and sliced["rows"] == sum(1 for v in want if v >= 999.98)
    store = open_store()
    assert store.read_slice(exp, ["dose"]).column("dose").to_pylist() == want
    assert store.read_slice(exp, ["site"], limit=2).column("site").to_pylist() == ["s,0", "s,1"]
    raw = call_tool(tmp, "memory_artifact_resolve", {"experiment_id": exp})
    piece = kernel_slice(msgspec.convert(raw, ResolveResult), columns=["dose"], limit=ROWS)
    assert piece.table.column("dose").to_pylist() == want

    # A read overrides it for itself; the card keeps it.
    point = store.read_slice(exp, ["dose"], limit=2, csv_decimal=".")
    assert point.column("dose").to_pylist() == ["0,00", "0,01"]
    kernel = kernel_slice(msgspec.convert(raw, ResolveResult), columns=["dose"], csv_decimal=".")
    assert kernel.table.column("dose").to_pylist()[:2] == ["0,00", "0,01"]
    assert store.read_slice(exp, ["dose"], limit=1).column("dose").to_pylist() == [0.0]

    pd = pytest.importorskip("pandas")  # not a dependency: checked where it is installed
    frame = pd.read_csv(io.BytesIO(data), sep=";", decimal=",")
    pd.testing.assert_frame_equal(store.to_pandas(exp), frame, check_dtype=False)


@pytest.mark.parametrize("mark", [";", "point", ",,"])
def test_a_decimal_mark_is_a_point_or_a_comma(project, capsys, mark):
    _, exports = project
    (exports / "t.csv").write_bytes(b"a;b\n1;2,5\n")
    code, out = record(capsys, "t.csv", "--csv-decimal", mark)
    assert code == 1 and out["error"]["code"] == "input.invalid"
    assert "the decimal mark must be '.' or ','" in out["error"]["message"]
    with pytest.raises(InvalidInput, match="the decimal mark must be"):
        table_read(decimal=mark)


def test_a_card_declaring_no_decimal_mark_keeps_its_bytes():
    """Cards written before the decimal mark existed encode as they did (no `decimal` key)."""
    read = table_read({"x": "float"}, ["NA"])
    assert msgspec.json.encode(read) == b'{"types":{"x":"float64"},"nulls":["NA"]}'
    assert msgspec.json.decode(msgspec.json.encode(read), type=TableRead) == read
    assert merged(read, table_read(decimal=",")) == TableRead(
        types={"x": "float64"}, nulls=["NA"], decimal=","
    )


def windows_csv() -> bytes:
    """What a spreadsheet on Windows in many languages saves as "CSV": cp1252, ';', 1,5."""
    lines = ["Größe;Wert;Notiz"]
    lines += [f"{i};{i // 4},{i % 4 * 25:02d};Müller é{i % 3}" for i in range(ROWS)]
    return ("\r\n".join(lines) + "\r\n").encode("cp1252")


def test_a_declared_encoding_reaches_the_cli_the_notebook_and_a_kernel(project, capsys):
    tmp, exports = project
    data = windows_csv()
    (exports / "win.csv").write_bytes(data)
    code, out = record(capsys, "win.csv")
    assert code == 0, out  # recorded; its columns could not be read, and the warning says why
    assert any("--csv-encoding cp1252" in w for w in out["warnings"])
    exp = out["experiment_id"]
    code, out = run(capsys, "slice", exp)
    assert code == 1 and "--csv-encoding cp1252" in out["error"]["message"]

    code, out = record(capsys, "win.csv", "--csv-encoding", "Windows-1252", "--csv-decimal", ",")
    assert code == 0 and out["changed"] == ["columns", "table_read"], out
    code, shown = run(capsys, "show", exp)
    assert shown["card"]["table_read"] == {
        "types": {},
        "nulls": [],
        "decimal": ",",
        "encoding": "cp1252",
    }
    fields = {f["name"]: f["type"] for f in shown["table"]["fields"]}
    assert fields == {"Größe": "int64", "Wert": "double", "Notiz": "string"}
    assert main(["show", exp]) == 0 and "csv encoding cp1252" in capsys.readouterr().out
    want = [float(f"{i // 4}.{i % 4 * 25:02d}") for i in range(ROWS)]
    notes = [f"Müller é{i % 3}" for i in range(ROWS)]

    store = open_store()
    table = store.read_slice(exp)
    assert table.column("Wert").to_pylist() == want and table.column("Notiz").to_pylist() == notes
    raw = call_tool(tmp, "memory_artifact_resolve", {"experiment_id": exp})
    piece = kernel_slice(msgspec.convert(raw, ResolveResult), columns=["Notiz"], limit=ROWS)
    assert piece.table.column("Notiz").to_pylist() == notes
    code, sliced = run(capsys, "slice", exp, "--where", "Notiz = 'Müller é2'", "--columns", "Wert")
    assert code == 0 and sliced["rows"] == ROWS // 3

    pd = pytest.importorskip("pandas")  # not a dependency: checked where it is installed
    frame = pd.read_csv(io.BytesIO(data), sep=";", decimal=",", encoding="cp1252")
    pd.testing.assert_frame_equal(store.to_pandas(exp), frame, check_dtype=False)


def test_an_encoding_is_one_that_keeps_asciis_bytes(project, capsys):
    _, exports = project
    (exports / "t.csv").write_bytes(b"a,b\n1,2\n")
    code, out = record(capsys, "t.csv", "--csv-encoding", "utf-16")
    assert code == 1 and out["error"]["code"] == "input.invalid"
    assert "unknown csv encoding 'utf-16'" in out["error"]["message"]
    with pytest.raises(InvalidInput, match="unknown csv encoding"):
        table_read(encoding="ebcdic")
    assert msgspec.json.encode(table_read(encoding="latin1")) == (
        b'{"types":{},"nulls":[],"encoding":"latin-1"}'
    )
