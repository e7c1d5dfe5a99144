"""Columns and shape from the table at record (issue 10 item 1, second half).

A table recorded without `columns` or `shape` takes them from its footer (Parquet, Arrow) or its
first block (CSV, JSON Lines); given values win; a re-record keeps what the card has and fills
what it lacks; a table that cannot be read is recorded anyway, with a warning.
"""

from __future__ import annotations

import datetime
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from conftest import PROJECT, SESSION, fingerprint
from hypothesis import given
from hypothesis import strategies as st

from cards import DEFAULT_LIMITS, parse_metadata
from cards.testing import card_for_bytes
from cas import Catalog, Provenance
from cas.slicing._footer import TableFacts, card_columns, with_facts

ROOT = Path(__file__).parent.parent.parent
BASE = {
    "title": "Dose response",
    "summary": "Per-subject response.",
    "query_fingerprint": fingerprint("footer"),
    "source": "warehouse",
    "source_version": "v1",
}


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def arrow_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


TABLE = pa.table({"subject_id": range(5), "dose_mg": [1.5] * 5, "responder": [True] * 5})


def record(ws, store, name: str, data: bytes | None = None, **fields: object):
    if data is not None:
        ws.export(name, data)
    metadata = parse_metadata({**BASE, **fields})
    return store.record(str(ws.rlm_root), Provenance(session_id=SESSION), metadata, name)


@pytest.fixture
def store(ws):
    return ws.store()


# -- filled from the table ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data"), [("r.parquet", parquet_bytes(TABLE)), ("r.arrow", arrow_bytes(TABLE))]
)
def test_a_footed_record_takes_columns_and_shape_from_its_footer(ws, store, name, data):
    recorded = record(ws, store, name, data)
    assert recorded.card.columns == ["subject_id", "dose_mg", "responder"]
    assert recorded.card.shape == [5, 3]
    assert recorded.warnings == ()
    catalog = Catalog([recorded.card])
    assert [hit.card for hit in catalog.search("dose_mg", limit=5)] == [recorded.card]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("r.csv", b"subject_id,dose_mg,responder\n1,1.5,true\n"),
        ("r.jsonl", b'{"subject_id": 1, "dose_mg": 1.5, "responder": true}\n'),
    ],
)
def test_tables_without_a_row_count_get_columns_but_no_shape(ws, store, name, data):
    recorded = record(ws, store, name, data)
    assert recorded.card.columns == ["subject_id", "dose_mg", "responder"]
    assert recorded.card.shape is None and recorded.warnings == ()


def test_given_values_win_and_an_explicit_empty_list_clears(ws, store):
    data = parquet_bytes(TABLE)
    given = record(ws, store, "r.parquet", data, columns=["subject"], shape=[9, 9])
    assert given.card.columns == ["subject"] and given.card.shape == [9, 9]
    cleared = record(ws, store, "r.parquet", columns=[], query_fingerprint=fingerprint("b"))
    assert cleared.card.columns == [] and cleared.card.shape == [5, 3]


def test_a_re_record_keeps_the_cards_values_and_fills_only_what_it_lacks(ws, store):
    data = parquet_bytes(TABLE)
    octet = "application/octet-stream"
    first = record(ws, store, "r.parquet", data, media_type=octet, tags=["t"])
    assert first.card.columns == [] and first.card.shape is None  # not a table: nothing read
    again = record(ws, store, "r.parquet")
    assert again.card.columns == ["subject_id", "dose_mg", "responder"]
    assert again.card.shape == [5, 3] and again.card.tags == ["t"]
    assert again.changed == ("columns", "shape", "media_type")
    record(ws, store, "r.parquet", columns=["mine"])
    kept = record(ws, store, "r.parquet")
    assert kept.card.columns == ["mine"] and kept.card.shape == [5, 3]
    assert kept.card_updated is False and kept.changed == ()


def test_an_unreadable_table_is_recorded_without_them_and_says_why(ws, store):
    forged = b"PAR1" + b"\x00" * 64 + b"\xff\xff\xff\x7fPAR1"
    recorded = record(ws, store, "bad.parquet", forged)
    assert recorded.card.artifact.media_type == "application/vnd.apache.parquet"
    assert recorded.card.columns == [] and recorded.card.shape is None
    [warning] = recorded.warnings
    assert "slice.table_unreadable" in warning and "recorded without them" in warning
    assert store.resolve(recorded.card.experiment_id).card == recorded.card


@pytest.mark.parametrize(
    ("data", "words"),
    [(b"a,b\n1,2\n3,4,5\n", "Expected 2 columns"), (b"a\xff,b\n1,2\n", "not UTF-8")],
)
def test_a_malformed_csv_is_recorded_with_a_warning(ws, store, data, words):
    recorded = record(ws, store, "r.csv", data)
    assert recorded.card.artifact.media_type == "text/csv"
    assert recorded.card.columns == [] and words in recorded.warnings[0]


def test_a_wide_table_lists_the_first_names_within_the_bounds(ws):
    store = ws.store(limits=DEFAULT_LIMITS.lowered(columns=4, column_chars=10))
    names = ["a", "b\nc", "very_long_name", "a", "d", "e", "f", "g"]
    columns = [pa.array([1]) for _ in names]
    table = pa.Table.from_arrays(columns, names=names)
    recorded = record(ws, store, "wide.parquet", parquet_bytes(table))
    assert recorded.card.columns == ["a", "d", "e", "f"]
    assert recorded.card.shape == [1, 8]
    assert any("the table has 8 columns" in w for w in recorded.warnings)
    assert any("3 column name(s) not listed" in w for w in recorded.warnings)


def test_recording_a_table_loads_no_pyarrow_in_the_recording_process(ws):
    ws.export("r.parquet", parquet_bytes(TABLE))
    probe = f"""
import json, sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from conftest import Workspace
from cas import Provenance
from cards import parse_metadata
ws = Workspace(root=None, artifact_root={str(ws.artifact_root)!r}, rlm_root={str(ws.rlm_root)!r})
meta = parse_metadata({json.dumps(BASE)})
card = ws.store().record(str(ws.rlm_root), Provenance(session_id="s1"), meta, "r.parquet").card
print(json.dumps({{"columns": card.columns, "pyarrow": "pyarrow" in sys.modules}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == {
        "columns": ["subject_id", "dose_mg", "responder"],
        "pyarrow": False,
    }


# -- the pure merge -----------------------------------------------------------------------------

names = st.lists(st.text(min_size=0, max_size=12), max_size=30)


@given(names=names, bound=st.integers(1, 8), chars=st.integers(1, 12))
def test_card_columns_are_valid_unique_ordered_and_bounded(names, bound, chars):
    limits = DEFAULT_LIMITS.lowered(columns=bound, column_chars=chars)
    facts = TableFacts(tuple(names), len(names), None)
    kept, warnings = card_columns(facts, limits)
    assert len(kept) <= bound and len(set(kept)) == len(kept)
    positions = [names.index(name) for name in kept]
    assert positions == sorted(positions)
    assert all(len(name) <= chars for name in kept)
    parse_metadata({**BASE, "columns": kept})  # every kept name is a valid card column
    assert bool(warnings) == (len(kept) < len(names))


@given(given_fields=st.sets(st.sampled_from(["columns", "shape"])), on_card=st.booleans())
def test_given_and_carded_fields_are_never_replaced(given_fields, on_card):
    fields = {**BASE}
    if "columns" in given_fields:
        fields["columns"] = ["given"]
    if "shape" in given_fields:
        fields["shape"] = [1, 1]
    metadata = parse_metadata(fields)
    existing = None
    if on_card:
        carded = parse_metadata({**BASE, "columns": ["old"], "shape": [2, 2]})
        now = datetime.datetime.now(datetime.UTC)
        existing = card_for_bytes(b"x", carded, project_id=PROJECT, session_id=SESSION, now=now)
    facts = TableFacts(("x", "y"), 2, 7)
    merged, _ = with_facts(metadata, facts, existing, DEFAULT_LIMITS)
    for name, derived in (("columns", ["x", "y"]), ("shape", [7, 2])):
        if name in given_fields:
            assert getattr(merged, name) == getattr(metadata, name)
        elif on_card:
            assert name not in merged.given  # the card keeps its value
        else:
            assert getattr(merged, name) == derived and name in merged.given
