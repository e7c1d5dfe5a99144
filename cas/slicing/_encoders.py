"""Encoding kept rows into an output file, a batch at a time: Parquet, CSV and JSON Lines.

Runs in the bounded child of `_isolated`, which writes the file an export staged (`_export`)
through its inherited descriptor: the caller runs no pyarrow writer over a Python file, and
what the child holds is bounded by a batch, never by the result. Each sink is a `BatchSink`
for `_collect`, and is built with the output schema before any row is read, so a format that
cannot hold a column is refused before the scan starts, as `InvalidInput`.

The bytes match what `artmem slice` prints for a slice in memory: pyarrow's CSV writer with a
header row, and one `orjson` object a line (values JSON cannot hold as their `str`). Parquet
rows are gathered into row groups of a bounded size (pyarrow's writer closes a row group at
every call), so a selective filter does not make a file of tiny row groups.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import fsedge as _fs
from cards import excerpt
from cards.errors import InvalidInput, StoreIOError
from cas.slicing._collect import BatchSink
from cas.slicing._limits import TableBounds

EXPORT_FORMATS = ("parquet", "csv", "jsonl")
OUTPUT_BUFFER_BYTES = 1 << 20
JSON_PIECE_BYTES = 1 << 20
MAX_ROW_GROUP_BYTES = 64 << 20


class FileOutput:
    """A write-only file over an inherited descriptor, written in 1 MiB pieces.

    Each piece starts its own writeback (`_fs.WriteBehind`), so a long export leaves few dirty
    pages for the caller's final fsync. A failed write is a `StoreIOError`, kept in `failure`
    because pyarrow's writers may wrap what a Python file raises.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._behind = _fs.WriteBehind(fd)
        self.written = 0
        self.failure: StoreIOError | None = None
        self.closed = False

    def writable(self) -> bool:
        """Always writable."""
        return True

    def readable(self) -> bool:
        """Never readable."""
        return False

    def seekable(self) -> bool:
        """Never seekable: pyarrow writes these formats front to back."""
        return False

    def tell(self) -> int:
        """The bytes written so far (the position pyarrow records in a Parquet footer)."""
        return self.written + len(self._buffer)

    def write(self, data: bytes | bytearray | memoryview | pa.Buffer) -> int:
        """Buffer `data`, writing out every full piece.

        Raises:
            StoreIOError: the file could not be written (disk full, a file size limit).
        """
        view = memoryview(data)
        self._buffer += view
        if len(self._buffer) >= OUTPUT_BUFFER_BYTES:
            self.flush()
        return view.nbytes

    def flush(self) -> None:
        """Write out what is buffered.

        Raises:
            StoreIOError: the file could not be written.
        """
        if not self._buffer:
            return
        try:
            _fs.write_all(self._fd, memoryview(self._buffer))
        except OSError as exc:
            self.failure = self.failure or StoreIOError(
                f"cannot write the output file: {exc.strerror}"
            )
            raise self.failure from exc
        self._behind.written(len(self._buffer))
        self.written += len(self._buffer)
        self._buffer.clear()

    def close(self) -> None:
        """Write out what is buffered; the descriptor stays open (the caller owns it)."""
        if not self.closed:
            self.flush()
            self.closed = True


def open_sink(fmt: str, output: FileOutput, schema: pa.Schema, bounds: TableBounds) -> BatchSink:
    """A sink that encodes rows of `schema` as `fmt` into `output`.

    Raises:
        InvalidInput: `fmt` is not an export format, or cannot hold a column of `schema`.
    """
    with refused_columns(fmt):
        if fmt == "parquet":
            row_group = min(MAX_ROW_GROUP_BYTES, max(1, bounds.max_decoded_bytes // 2))
            return ParquetSink(output, schema, row_group)
        if fmt == "csv":
            return CsvSink(output, schema)
    if fmt == "jsonl":
        return JsonLinesSink(output)
    raise InvalidInput(f"cannot export as {fmt!r}; the formats are {', '.join(EXPORT_FORMATS)}")


@contextlib.contextmanager
def refused_columns(fmt: str) -> Iterator[None]:
    """A writer refusing a column type says which format, and what to do (`InvalidInput`)."""
    try:
        yield
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        reason = excerpt(str(exc).strip().splitlines()[0] if str(exc).strip() else "unsupported")
        raise InvalidInput(
            f"{fmt} cannot hold a column of this slice ({reason}); leave it out with --columns, "
            "or choose another format (jsonl holds any column)"
        ) from exc


class ParquetSink:
    """Rows gathered into row groups of about `row_group_bytes`, written by `ParquetWriter`."""

    def __init__(self, output: FileOutput, schema: pa.Schema, row_group_bytes: int) -> None:
        self._writer = pq.ParquetWriter(output, schema)
        self._row_group_bytes = row_group_bytes
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Gather `batch`; write a row group once enough is gathered."""
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self._row_group_bytes:
            self._flush()

    def finish(self, schema: pa.Schema) -> None:
        """Write the last row group and the footer."""
        self._flush()
        self._writer.close()

    def _flush(self) -> None:
        if self._pending:
            table = pa.Table.from_batches(self._pending)
            self._writer.write_table(table, row_group_size=max(1, table.num_rows))
            self._pending, self._pending_bytes = [], 0


class CsvSink:
    """Rows written by pyarrow's CSV writer, a header row first."""

    def __init__(self, output: FileOutput, schema: pa.Schema) -> None:
        self._writer = pacsv.CSVWriter(output, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        """Write `batch`'s rows."""
        self._writer.write_batch(batch)

    def finish(self, schema: pa.Schema) -> None:
        """Close the writer."""
        self._writer.close()


class JsonLinesSink:
    """One JSON object a line, built from pieces of about 1 MiB (Python objects are larger)."""

    def __init__(self, output: FileOutput) -> None:
        import orjson  # here: with dataclasses, ~11 ms that other formats need not pay

        self._output = output
        self._dumps = orjson.dumps

    def write(self, batch: pa.RecordBatch) -> None:
        """Write `batch`'s rows."""
        step = max(1, batch.num_rows * JSON_PIECE_BYTES // max(1, batch.nbytes))
        dumps = self._dumps
        for start in range(0, batch.num_rows, step):
            rows = batch.slice(start, step).to_pylist()
            self._output.write(b"".join(dumps(row, default=str) + b"\n" for row in rows))

    def finish(self, schema: pa.Schema) -> None:
        """Nothing to end: a JSON Lines file has no footer."""
