"""What `show` says about a table is true (issue 29 item 9).

Before: an Arrow IPC file's rows were "unknown in 2 row group(s)" (each record batch's message
header holds its row count), a list column's empty lists were counted as nulls (Parquet's leaf
null count), and a zero minimum showed as `-0.0` (how Parquet writers store it).
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from cas.slicing._media import ARROW_FILE, PARQUET
from cas.slicing._slice import describe


def _record(ws, store, data: bytes, media_type: str):
    name = "t-" + hashlib.sha256(data).hexdigest()[:16]
    ws.export(name, data)
    card = ws.record(store, name, media_type=media_type).card
    return card, store.locate(card.experiment_id)


def _ipc_bytes(table: pa.Table, batch_rows: int) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def test_an_arrow_file_counts_its_rows_from_the_batch_headers(ws):
    store = ws.store()
    table = pa.table({"k": range(2500), "s": [f"v{i}" for i in range(2500)]})
    card, located = _record(ws, store, _ipc_bytes(table, 1000), ARROW_FILE)
    info = describe(located.source)
    assert info.num_rows == 2500 and info.num_row_groups == 3
    assert [g.rows for g in info.row_groups] == [1000, 1000, 500]
    assert all(g.compressed_bytes > 0 and g.uncompressed_bytes > 0 for g in info.row_groups)
    assert card.shape == [2500, 2]  # the card's shape, which `list` shows, is recorded too


def test_a_list_columns_empty_lists_are_not_nulls(ws):
    store = ws.store()
    tags = pa.array([[] if i % 2 else ["a"] for i in range(100)] + [None], pa.list_(pa.string()))
    table = pa.table({"k": pa.array(range(101), pa.int64()), "tags": tags})
    _, located = _record(ws, store, _parquet_bytes(table), PARQUET)
    columns = {c.path: c for c in describe(located.source).columns}
    assert columns["k"].null_count == 0
    assert columns["tags.list.element"].null_count is None  # Parquet would say 51


def test_a_zero_minimum_is_not_negative(ws):
    store = ws.store()
    table = pa.table({"response": pa.array([0.0, 0.5, 1.0])})
    _, located = _record(ws, store, _parquet_bytes(table), PARQUET)
    (column,) = describe(located.source).columns
    assert (column.min, column.max) == (0.0, 1.0)
    assert str(column.min) == "0.0"
