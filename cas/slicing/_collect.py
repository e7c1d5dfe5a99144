"""The rows a slice keeps, and how they cross from the child to the caller.

In the child (`_isolated`), `collect` keeps a prefix of the scan's rows within the row limit and
the byte budget, in file order, and hands it to a `BatchSink` as it goes: a kept piece is
copied out of its decoded batch (so a few rows do not keep a whole batch alive), and small
pieces are joined before they are written (so a selective filter does not make a message or a
row group per row). A slice's sink is an Arrow IPC stream in memory (`IpcSink`), the child's
payload, which `read_stream` reads back in the caller; an export's sink encodes into its
output file (`_encoders`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from typing import Protocol

import msgspec
import pyarrow as pa
import pyarrow.ipc as ipc

from cards.errors import TableUnreadable
from cas.slicing._tables import Scan, TableFile

ROW_LIMIT = "row_limit"
BYTE_BUDGET = "byte_budget"
JOIN_BYTES = 1 << 20
JOIN_PIECES = 256
_NO_THREADS = ipc.IpcReadOptions(use_threads=False)


class BatchSink(Protocol):
    """Where kept rows go, a joined batch at a time."""

    def write(self, batch: pa.RecordBatch) -> None:
        """Take the next kept rows, in file order."""
        ...

    def finish(self, schema: pa.Schema) -> None:
        """No more rows follow; `schema` is theirs (when none were written, the scan's)."""
        ...


class IpcSink:
    """The kept rows as an Arrow IPC stream in memory: a slice's payload."""

    def __init__(self) -> None:
        self._sink = pa.BufferOutputStream()
        self._writer: ipc.RecordBatchStreamWriter | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        """Append `batch` to the stream."""
        if self._writer is None:
            self._writer = ipc.new_stream(self._sink, batch.schema)
        self._writer.write_batch(batch)

    def finish(self, schema: pa.Schema) -> None:
        """End the stream (a stream of no batches still carries `schema`)."""
        if self._writer is None:
            self._writer = ipc.new_stream(self._sink, schema)
        self._writer.close()

    def getvalue(self) -> pa.Buffer:
        """The finished stream."""
        return self._sink.getvalue()


class Collected(msgspec.Struct):
    """What a slice kept so far, handed to `sink`; `reason` names the bound reached."""

    schema: pa.Schema
    sink: BatchSink
    rows: int = 0
    nbytes: int = 0
    seen: int = 0
    reason: str | None = None
    _pending: list[pa.RecordBatch] = msgspec.field(default_factory=list)
    _pending_bytes: int = 0

    def keep(self, piece: pa.RecordBatch, whole: pa.RecordBatch) -> None:
        """Keep `piece`, a slice of the decoded batch `whole`."""
        self.schema = piece.schema
        self.rows += piece.num_rows
        self.nbytes += piece.nbytes
        if piece.nbytes >= JOIN_BYTES:
            self._flush()
            self.sink.write(piece)
            return
        # A copy of the piece alone: the slice would keep all of `whole` alive.
        self._pending.append(piece if piece.num_rows == whole.num_rows else _copied(piece))
        self._pending_bytes += piece.nbytes
        if self._pending_bytes >= JOIN_BYTES or len(self._pending) >= JOIN_PIECES:
            self._flush()

    def finish(self) -> None:
        """Hand the sink what is pending, and end it."""
        self._flush()
        self.sink.finish(self.schema)

    def _flush(self) -> None:
        if self._pending:
            self.sink.write(self._pending[0] if len(self._pending) == 1 else _joined(self._pending))
            self._pending, self._pending_bytes = [], 0


def _copied(piece: pa.RecordBatch) -> pa.RecordBatch:
    return pa.concat_batches([piece])  # concatenating one batch copies its rows


def _joined(pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    return pa.concat_batches(pieces)  # dictionaries are unified, not rejected


def collect(
    table: TableFile, scan: Scan, offset: int, limit: int, max_bytes: int, sink: BatchSink
) -> Collected:
    """Read the scan's batches, skip `offset` rows, hand `sink` what fits `limit` and `max_bytes`.

    The caller ends the sink with `Collected.finish`.
    """
    out = Collected(output_schema(table.schema, scan), sink)
    if limit == 0:
        out.reason = ROW_LIMIT
        return out
    skipped, batches = table.batches(scan)
    offset -= skipped
    with contextlib.closing(_generator(batches)) as stream:
        for batch in stream:
            out.seen += 1
            if offset >= batch.num_rows:
                offset -= batch.num_rows
                continue
            _take(out, batch, offset, limit, max_bytes)
            offset = 0
            if out.reason is not None:
                break
    return out


def output_schema(schema: pa.Schema, scan: Scan) -> pa.Schema:
    """The schema of the scan's rows: its output columns, in its order."""
    return pa.schema([schema.field(name) for name in scan.columns])


def _take(out: Collected, batch: pa.RecordBatch, offset: int, limit: int, max_bytes: int) -> None:
    """Keep the prefix of `batch[offset:]` that fits both bounds; note the bound reached."""
    rest = batch.slice(offset)
    rows = min(rest.num_rows, limit - out.rows)
    fits = _rows_within(rest, rows, max_bytes - out.nbytes)
    if fits < rows:
        out.reason = BYTE_BUDGET
    elif out.rows + rows == limit:
        out.reason = ROW_LIMIT
    if fits:
        out.keep(rest.slice(0, fits), batch)


def _rows_within(batch: pa.RecordBatch, rows: int, budget: int) -> int:
    """The most leading rows of `batch` (at most `rows`) whose materialised size fits `budget`."""
    if batch.slice(0, rows).nbytes <= budget:
        return rows
    low, high = 0, rows  # the first `low` rows fit; the first `high` do not
    while high - low > 1:
        middle = (low + high) // 2
        if batch.slice(0, middle).nbytes <= budget:
            low = middle
        else:
            high = middle
    return low


def _generator(batches: Iterator[pa.RecordBatch]) -> Generator[pa.RecordBatch, None, None]:
    """Wrap `batches` so that closing the wrapper closes it (and cancels read-ahead) at once."""
    try:
        yield from batches
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def read_stream(payload: bytes | memoryview) -> pa.Table:
    """Read the kept rows the child streamed, checking the stream's structure.

    Not every value is checked again: the child validated what it decoded (IPC batches fully;
    Parquet pages decode only to valid arrays), and it is not a trust boundary (it runs as us).

    Raises:
        TableUnreadable: the stream is malformed.
    """
    try:
        table = ipc.open_stream(pa.py_buffer(payload), options=_NO_THREADS).read_all()
        table.validate()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise TableUnreadable("the table's reader answered a malformed slice") from exc
    return table


def read_schema(payload: bytes | memoryview) -> pa.Schema:
    """Read the schema the child sent when the request did not fit it.

    Raises:
        TableUnreadable: the schema is malformed.
    """
    try:
        return ipc.read_schema(pa.py_buffer(payload))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise TableUnreadable("the table's reader answered a malformed schema") from exc
