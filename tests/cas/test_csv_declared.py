"""Declared CSV types on a file larger than the whole-file typing pass (issue 29).

Past `WHOLE_FILE_BYTES` a CSV is sliced with its first block's types; a column declared on the
card is read as declared from the first row, so a slice near the drift is neither widened nor
failed, a slice of the head reads little, and a value the declared type cannot hold fails the
slice that meets it with a typed error naming the column and the type.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import metadata_fields

from cards import parse_metadata
from cards.errors import TableUnreadable
from cards.table_read import TableRead
from cas import Provenance
from cas.slicing._export import export_slice
from cas.slicing._limits import SliceLimits
from cas.slicing._media import CSV
from cas.slicing._slice import SliceRequest, describe, read_slice
from cas.slicing._text_tables import WHOLE_FILE_BYTES
from fsedge import CHUNK_BYTES

SMALL = SliceLimits().lowered(max_memory_bytes=20 << 20)  # as tests/cas/test_csv_types.py
ROWS = 1_000_000
DRIFT = ROWS - 100
DECLARED = {"types": {"x": "float64"}, "nulls": ["missing"]}


def drifting() -> bytes:
    """`id,x`: x an int until DRIFT, then `N.5` and `missing` by turns."""
    lines = ["id,x"]
    lines += [f"{i},{i}" for i in range(DRIFT)]
    lines += [f"{i},{i}.5" if i % 2 else f"{i},missing" for i in range(DRIFT, ROWS)]
    return ("\n".join(lines) + "\n").encode()


def record_without_columns(ws, store, name: str, read: dict | None = None):
    """A record whose card's columns come from the table (so the store reads it)."""
    fields = metadata_fields(query_fingerprint="c" * 64)
    del fields["columns"]
    if read is not None:
        fields["table_read"] = read
    return store.record(str(ws.rlm_root), Provenance(session_id="s1"), parse_metadata(fields), name)


@pytest.fixture(scope="module")
def data() -> bytes:
    return drifting()


def test_a_declared_column_is_read_as_declared_from_its_first_row(ws, data):
    assert len(data) > max(WHOLE_FILE_BYTES, 3 * CHUNK_BYTES)
    store = ws.store()
    ws.export("big.csv", data)
    card = ws.record(store, "big.csv", media_type=CSV, table_read=DECLARED, columns=[]).card
    assert card.table_read == TableRead(types={"x": "float64"}, nulls=["missing"])
    source = store.locate(card.experiment_id).source
    assert source.table_read == card.table_read
    info = describe(source, limits=SMALL)
    assert {f.name: f.type for f in info.fields} == {"id": "int64", "x": "double"}
    head = read_slice(source, SliceRequest(columns=("x",), limit=3), limits=SMALL)
    assert head.table.column("x").to_pylist() == [0.0, 1.0, 2.0]
    assert head.bytes_read <= 2 * CHUNK_BYTES
    tail = read_slice(source, SliceRequest(where=f"id >= {DRIFT - 2}", limit=4), limits=SMALL)
    assert tail.table.schema.field("x").type == pa.float64() and tail.notes == ()
    assert tail.table.column("x").to_pylist() == [DRIFT - 2.0, DRIFT - 1.0, None, DRIFT + 1.5]


def test_an_export_reads_with_the_cards_options(ws, data, tmp_path):
    store = ws.store()
    ws.export("big.csv", data)
    card = ws.record(store, "big.csv", media_type=CSV, table_read=DECLARED).card
    out = tmp_path / "x.csv"
    request = SliceRequest(columns=("x",), where=f"id >= {ROWS - 3}")
    result = export_slice(store.locate(card.experiment_id).source, request, str(out), "csv",
                          limits=SMALL)  # fmt: skip
    assert out.read_text().splitlines() == ['"x"', f"{ROWS - 3}.5", "", f"{ROWS - 1}.5"]
    assert result.notes == ()


def test_a_value_the_declared_type_cannot_hold_fails_the_slice_that_meets_it(ws, data):
    store = ws.store()
    ws.export("big.csv", data)
    declared = {"types": {"x": "int64"}}  # the file is too large to be checked at record
    card = ws.record(store, "big.csv", media_type=CSV, table_read=declared).card
    source = store.locate(card.experiment_id).source
    head = read_slice(source, SliceRequest(columns=("x",), limit=2), limits=SMALL)
    assert head.table.column("x").to_pylist() == [0, 1]  # the rows before it read as declared
    with pytest.raises(TableUnreadable) as caught:
        read_slice(source, SliceRequest(where=f"id >= {DRIFT - 1}"), limits=SMALL)
    message = caught.value.message
    assert "column 'x' holds" in message and "declared type int64" in message
    assert "--csv-type x=float64" in message  # the next wider type
    # One read may declare another type over the card's.
    over = SliceRequest(
        where=f"id >= {DRIFT}", limit=2, table_read=TableRead(types={"x": "string"})
    )
    assert read_slice(source, over, limits=SMALL).table.column("x").to_pylist() == [
        "missing",
        f"{DRIFT + 1}.5",
    ]


def test_a_second_experiment_of_the_same_csv_bytes_is_still_a_csv(ws, data):
    """The deduplicating path (a stored object of the same size) detected by the source's name:
    it used to pass no name, and a CSV known by its extension became application/octet-stream."""
    store = ws.store()
    ws.export("big.csv", data)
    first = ws.record(store, "big.csv", query_fingerprint="a" * 64).card
    ws.export("again.csv", data)
    second = ws.record(store, "again.csv", query_fingerprint="b" * 64)
    assert second.deduplicated and second.card.experiment_id != first.experiment_id
    assert first.artifact.media_type == second.card.artifact.media_type == CSV


def test_a_record_says_which_columns_a_csv_widens_without_quoting_a_value(ws):
    store = ws.store()
    rows = 600_000  # past the first two blocks a record reads (2 x ~2 MB), within 8 MiB
    body = b"".join(b"%d,%d\n" % (i, i) for i in range(rows))
    ws.export("w.csv", b"id,x\n" + body + b"%d,0.5\n" % rows)
    recorded = record_without_columns(ws, store, "w.csv")
    (warning,) = (w for w in recorded.warnings if "read as" in w)
    row = rows + 2
    assert warning.startswith(
        f"column 'x' is read as double, not int64: a value in row {row} (the header is row 1)"
    )
    assert "0.5" not in warning and "--csv-type" in warning
    declared = record_without_columns(ws, store, "w.csv", {"types": {"x": "float64"}})
    assert declared.card.columns == ["id", "x"]
    assert not [w for w in declared.warnings if "read as" in w]


def test_a_tsv_is_read_as_its_card_declares(ws):
    store = ws.store()
    ws.export("t.tsv", b"id\tcode\n1\t007\n2\t-\n3\t010\n")
    read = {"types": {"code": "string"}, "nulls": ["-"]}
    card = ws.record(store, "t.tsv", table_read=read).card
    assert card.artifact.media_type == "text/tab-separated-values"
    result = read_slice(store.locate(card.experiment_id).source, SliceRequest())
    assert result.table.column("code").to_pylist() == ["007", None, "010"]
