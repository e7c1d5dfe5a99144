"""Encoding kept rows into an output file, a batch at a time: Parquet, CSV and JSON Lines.

Runs in the bounded child of `_isolated`, which writes the file an export staged (`_export`)
through its inherited descriptor: the caller runs no pyarrow writer over a Python file, and
what the child holds is bounded by a batch, never by the result. Each sink is a `BatchSink`
for `_collect`, and is built with the output schema before any row is read, so a format that
cannot hold a column is refused before the scan starts, as `InvalidInput`.

The bytes match what `artmem slice` prints for a slice in memory: pyarrow's CSV writer with a
header row, and one `orjson` object a line (`json_lines`: a float that is not finite as the
string "NaN", "Infinity" or "-Infinity", at any depth, as protobuf's JSON spells them; other
values JSON cannot hold as their `str`). Parquet rows are gathered into row groups of a bounded
size (pyarrow's writer closes a row group at every call), so a selective filter does not make a
file of tiny row groups. A Parquet file keeps the source table's schema metadata where it is
still true (`kept_metadata`): pandas' entry names only the columns and index kept.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
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


def open_sink(
    fmt: str,
    output: FileOutput,
    schema: pa.Schema,
    bounds: TableBounds,
    source: pa.Schema | None = None,
) -> BatchSink:
    """A sink that encodes rows of `schema` as `fmt` into `output`.

    `source` is the schema of the table sliced, whose metadata a Parquet file keeps where it is
    still true of the rows written (`kept_metadata`).

    Raises:
        InvalidInput: `fmt` is not an export format, or cannot hold a column of `schema`.
    """
    with refused_columns(fmt):
        if fmt == "parquet":
            row_group = min(MAX_ROW_GROUP_BYTES, max(1, bounds.max_decoded_bytes // 2))
            return ParquetSink(output, schema, row_group, source)
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
    """Rows gathered into row groups of about `row_group_bytes`, written by `ParquetWriter`.

    The writer starts with the first row group, or at the end: its schema's metadata is fixed
    then, and a pandas range index is kept only if as many rows were written as it spans.
    """

    def __init__(
        self,
        output: FileOutput,
        schema: pa.Schema,
        row_group_bytes: int,
        source: pa.Schema | None = None,
    ) -> None:
        pq.ParquetWriter(pa.MockOutputStream(), schema).close()  # a column Parquet cannot hold
        self._output = output
        self._schema = schema
        self._source = source
        self._writer: pq.ParquetWriter | None = None
        self._row_group_bytes = row_group_bytes
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Gather `batch`; write a row group once enough is gathered."""
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self._row_group_bytes:
            self._flush(last=False)

    def finish(self, schema: pa.Schema) -> None:
        """Write the last row group and the footer."""
        self._flush(last=True)
        assert self._writer is not None
        self._writer.close()

    def _flush(self, last: bool) -> None:
        table = pa.Table.from_batches(self._pending) if self._pending else None
        if self._writer is None:
            rows = None  # more may follow
            if last:
                rows = 0 if table is None else table.num_rows
            metadata = kept_metadata(self._source, self._schema.names, rows)
            self._writer = pq.ParquetWriter(self._output, self._schema.with_metadata(metadata))
        if table is not None:
            self._writer.write_table(table, row_group_size=max(1, table.num_rows))
            self._pending, self._pending_bytes = [], 0


def kept_metadata(
    source: pa.Schema | None, names: list[str], rows: int | None
) -> dict[bytes, bytes]:
    """What of `source`'s schema metadata is true of its columns `names` and `rows` of its rows.

    Every key is kept when every column is; else only pandas' entry, which says which columns
    it describes: it keeps the entries of the columns and index columns kept, and a range
    index only if it spans `rows` (None: not known, so it is left out). An entry that is not
    pandas' JSON is left out.
    """
    metadata = dict(source.metadata or {}) if source is not None else {}
    if set(names) != set(source.names if source is not None else ()):
        metadata = {key: value for key, value in metadata.items() if key == b"pandas"}
    if b"pandas" in metadata:
        pandas = _pandas_metadata(metadata.pop(b"pandas"), set(names), rows)
        if pandas is not None:
            metadata[b"pandas"] = pandas
    return metadata


def _pandas_metadata(raw: bytes, names: set[str], rows: int | None) -> bytes | None:
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError):  # a hostile table's, too
        return None
    if not isinstance(meta, dict):
        return None
    index, columns = meta.get("index_columns"), meta.get("columns")
    if not isinstance(index, list) or not isinstance(columns, list):
        return None
    kept_index = [entry for entry in index if _index_kept(entry, names, rows)]
    kept_columns = [
        column
        for column in columns
        if isinstance(column, dict) and _named(column.get("field_name", column.get("name")), names)
    ]
    if kept_index == index and kept_columns == columns:
        return raw
    return json.dumps({**meta, "index_columns": kept_index, "columns": kept_columns}).encode()


def _named(name: object, names: set[str]) -> bool:
    return isinstance(name, str) and name in names


def _index_kept(entry: object, names: set[str], rows: int | None) -> bool:
    if isinstance(entry, str):
        return entry in names
    if not isinstance(entry, dict) or entry.get("kind") != "range" or rows is None:
        return False
    try:
        return len(range(entry["start"], entry["stop"], entry["step"])) == rows
    except (KeyError, TypeError, ValueError, OverflowError):
        return False


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
        self._output = output

    def write(self, batch: pa.RecordBatch) -> None:
        """Write `batch`'s rows."""
        step = max(1, batch.num_rows * JSON_PIECE_BYTES // max(1, batch.nbytes))
        for start in range(0, batch.num_rows, step):
            self._output.write(json_lines(batch.slice(start, step)))

    def finish(self, schema: pa.Schema) -> None:
        """Nothing to end: a JSON Lines file has no footer."""


def json_lines(batch: pa.RecordBatch) -> bytes:
    """`batch`'s rows as JSON Lines: one `orjson` object a line.

    orjson writes a float that is not finite as null, like a missing value; it is written as
    the string "NaN", "Infinity" or "-Infinity" instead, wherever it is nested. Only the
    columns holding one are looked at again, in Python: a float column's rows that hold one,
    every row of a nested column that does. Values JSON cannot hold otherwise are their `str`.
    """
    import orjson  # here: with dataclasses, ~11 ms that other formats need not pay

    rows = batch.to_pylist()
    last = {name: i for i, name in enumerate(batch.schema.names)}  # to_pylist keeps the last
    for name, i in last.items():
        column = batch.column(i)
        if not _may_hold_non_finite(column):
            continue
        if pa.types.is_floating(column.type):
            finite = pc.fill_null(pc.is_finite(column), True)
            for row in pc.indices_nonzero(pc.invert(finite)).to_pylist():
                rows[row][name] = _spelled(rows[row][name])
        else:
            for row in rows:
                row[name] = _spelled(row[name])
    dumps = orjson.dumps
    return b"".join(dumps(row, default=str) + b"\n" for row in rows)


def _holds_floats(kind: pa.DataType) -> bool:
    if pa.types.is_floating(kind):
        return True
    if pa.types.is_dictionary(kind):
        return _holds_floats(kind.value_type)
    if isinstance(kind, pa.BaseExtensionType):
        return _holds_floats(kind.storage_type)
    return any(_holds_floats(kind.field(i).type) for i in range(kind.num_fields))


def _may_hold_non_finite(array: pa.Array) -> bool:
    """Whether `array` may hold a float that is not finite (at any depth), cheaply in Arrow."""
    kind = array.type
    if not _holds_floats(kind):
        return False
    if pa.types.is_floating(kind):
        return pc.all(pc.is_finite(array), min_count=0).as_py() is not True
    if isinstance(array, pa.MapArray):  # its keys and items: unsliced, so maybe more
        return _may_hold_non_finite(array.keys) or _may_hold_non_finite(array.items)
    if isinstance(array, pa.StructArray):
        return any(_may_hold_non_finite(child) for child in array.flatten())
    if isinstance(array, (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray)):
        return _may_hold_non_finite(array.flatten())
    if isinstance(array, pa.DictionaryArray):
        return _may_hold_non_finite(array.dictionary)
    if isinstance(array, pa.ExtensionArray):
        return _may_hold_non_finite(array.storage)
    return True  # another nesting (a union, run-end encoding, list views): look in Python


def _spelled(value: object) -> object:
    """`value` with each float in it that is not finite as its JSON string."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _spelled(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_spelled(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_spelled(item) for item in value)
    return value
