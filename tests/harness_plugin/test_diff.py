"""`artmem diff`: card fields, schema, counts and footer statistics, and a bounded row diff."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import cli_project
from hypothesis import given
from hypothesis import strategies as st

from harness_plugin._diff import row_differences
from harness_plugin.cli import main


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    exports = cli_project(tmp_path, monkeypatch, "[slice]\nmax_rows = 500\n")

    def run(*argv: str) -> tuple[int, dict]:
        code = main([*argv, "--json"])
        return code, json.loads(capsys.readouterr().out)

    def record(name: str, table: pa.Table | bytes, **meta: str) -> str:
        if isinstance(table, bytes):
            (exports / name).write_bytes(table)
        else:
            pq.write_table(table, exports / name, row_group_size=100)
        args = {"title": f"T {name}", "summary": "S", "source": "w", "source-version": "v1"}
        args |= meta
        flat = [x for k, v in args.items() for x in (f"--{k}", v)]
        code, view = run("record", "--session", "s1", name, "--query-fingerprint",
                         fingerprint(name), *flat)  # fmt: skip
        assert code == 0, view
        return view["experiment_id"]

    run.record = record  # type: ignore[attr-defined]
    run.exports = exports  # type: ignore[attr-defined]
    run.capsys = capsys  # type: ignore[attr-defined]
    return run


def _tables():
    rng = random.Random(7)
    a = pa.table({
        "id": pa.array(range(300), pa.int64()),
        "dose": pa.array([rng.random() * 10 for _ in range(300)]),
        "arm": pa.array([rng.choice(["x", "y", None]) for _ in range(300)]),
    })  # fmt: skip
    dose = a["dose"].to_pylist()
    dose[5] = 99.5
    b = pa.table({
        "id": pa.array(range(1, 301), pa.int64()),
        "dose": pa.array(dose[1:] + [1.0]),
        "arm": pa.array([str(v) for v in range(300)]).cast(pa.large_string()),
        "site": pa.array([1] * 300, pa.int32()),
    })  # fmt: skip
    return a, b


def test_schema_counts_and_statistics_match_pyarrows(cli):
    a, b = _tables()
    ida = cli.record("a.parquet", a, tag="one")
    idb = cli.record("b.parquet", b, tag="two", title="Other")
    code, view = cli("diff", ida, idb)
    assert code == 0
    fields = {d["field"]: (d["a"], d["b"]) for d in view["card"]}
    assert fields["title"] == ("T a.parquet", "Other") and fields["tags"] == (["one"], ["two"])
    assert not view["files"]["same_bytes"]
    table = view["table"]
    assert table["num_rows"] == {"a": 300, "b": 300}
    assert table["schema"] == {
        "added": [{"name": "site", "type": "int32"}],
        "removed": [],
        "retyped": [{"name": "arm", "a": "string", "b": "large_string"}],
    }
    for side, path in (("a", cli.exports / "a.parquet"), ("b", cli.exports / "b.parquet")):
        meta = pq.ParquetFile(path).metadata
        for j in range(meta.num_columns):
            name = meta.schema.column(j).path
            column = next(c for c in table["columns"] if c["path"] == name)[side]
            groups = [meta.row_group(g).column(j).statistics for g in range(meta.num_row_groups)]
            assert column["null_count"] == sum(s.null_count for s in groups)
            if all(s.has_min_max for s in groups):
                assert column["min"] == min(s.min for s in groups)
                assert column["max"] == max(s.max for s in groups)
    assert main(["diff", ida, idb]) == 0


def test_other_files_compare_sizes_and_digests(cli):
    x = cli.record("x.txt", b"hello\n", **{"media-type": "text/plain"})
    y = cli.record("y.txt", b"hello\n", title="Again", **{"media-type": "text/plain"})
    code, view = cli("diff", x, y)
    assert code == 0 and view["table"] is None and view["files"]["same_bytes"]
    code, view = cli("diff", x, y, "--rows", "--key", "id")
    assert code == 1 and view["error"]["code"] == "slice.unsupported_media_type"


def _oracle(a, b, key):
    """The row diff by plain dictionaries, independently of `row_differences`."""
    ka, kb = {r[key]: r for r in a}, {r[key]: r for r in b}
    shared = sorted(set(a[0]) & set(b[0]) - {key}) if a and b else []
    changed = {k: {c for c in shared if ka[k][c] != kb[k][c]} for k in ka.keys() & kb.keys()}
    return set(kb) - set(ka), set(ka) - set(kb), {k: v for k, v in changed.items() if v}


def test_the_row_diff_by_key(cli):
    a, b = _tables()
    ida, idb = cli.record("a.parquet", a), cli.record("b.parquet", b)
    code, view = cli("diff", ida, idb, "--rows", "--key", "id")
    assert code == 0
    rows = view["rows"]
    added, removed, changed = _oracle(a.to_pylist(), b.to_pylist(), "id")
    assert {r["id"] for r in rows["added"]} == added == {300}
    assert {r["id"] for r in rows["removed"]} == removed == {0}
    assert rows["counts"]["changed"] == len(changed)
    listed = {c["key"]: set(c["columns"]) for c in rows["changed"]}
    assert all(listed[k] == changed[k] for k in listed)
    assert main(["diff", ida, idb, "--rows", "--key", "id"]) == 0  # the text lists them too
    text = cli.capsys.readouterr().out.partition("rows by id:")[2].splitlines()
    assert [line.split(":")[0] for line in text if line.startswith(("  +", "  -"))] == [
        "  + 300",
        "  - 0",
    ]
    assert sum(line.startswith("  ~ ") for line in text) == min(len(changed), 20)
    code, view = cli("diff", ida, idb, "--rows", "--key", "nope")
    assert code == 1 and view["error"]["code"] == "slice.unknown_column"
    code, view = cli("diff", ida, idb, "--rows")
    assert code == 1 and view["error"]["code"] == "input.invalid"


def test_a_row_diff_beyond_the_bounds_is_refused(cli):
    big = pa.table({"id": pa.array(range(600), pa.int64())})
    ida, idb = cli.record("a.parquet", big), cli.record("b.parquet", big.slice(1))
    code, view = cli("diff", ida, idb, "--rows", "--key", "id")
    assert code == 1 and view["error"]["code"] == "slice.table_too_large"


_rows = st.lists(
    st.fixed_dictionaries({"k": st.integers(0, 30), "v": st.integers(0, 3) | st.none()}),
    max_size=25,
    unique_by=lambda r: r["k"],
)


@given(_rows, _rows)
def test_row_differences_equal_the_oracle(a, b):
    got = row_differences(a, b, "k")
    added, removed, changed = _oracle(a, b, "k")
    assert {r["k"] for r in got["added"]} == added
    assert {r["k"] for r in got["removed"]} == removed
    assert {c["key"]: set(c["columns"]) for c in got["changed"]} == changed
