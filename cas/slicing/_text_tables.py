"""The text table formats: CSV (and TSV) and JSON Lines, streamed in bounded blocks.

Text has no footer, so the schema is inferred from a bounded first block, and every later block
is converted to those types: a later value that does not fit (an int column that turns to
floats, a CSV row with more fields) is `TableUnreadable`, and says that the types came from the
first block. A CSV column empty throughout the first block is read as text, not as pyarrow's
`null` type, which no later value would fit. Invalid UTF-8 is refused, not inferred as binary.

Nothing reads the whole file. CSV goes through pyarrow's streaming reader over the verified
reader; that reader keeps up to 32 blocks read ahead on its I/O thread (not configurable from
Python, ARROW-12090), so a block is sized for 33 of them to fit one decode's share of the
memory bound, and a slice of ten rows reads at most 33 blocks whatever the file's size. The
first block is typed from an in-memory copy, so no read-ahead runs before the scan. pyarrow has
no streaming JSON reader, so JSON Lines is cut here into blocks that end at a newline, each
parsed on its own with the first block's schema (only the needed fields are converted). A line,
a CSV row or a quoted value longer than a block is `TableTooLarge`.

Runs in the bounded child of `_isolated`, like the footed readers of `_tables`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from cards import excerpt
from cards.errors import TableTooLarge, TableUnreadable
from cas.slicing._limits import TableBounds
from cas.slicing._reader import VerifiedReader
from cas.slicing._tables import Scan, check_width, filtered

MAX_BLOCK_BYTES = 4 << 20
MIN_BLOCK_BYTES = 64 << 10
READ_AHEAD_BLOCKS = 33  # pyarrow's CSV read-ahead queue (32), and the block being parsed
_STRADDLES = "straddl"  # pyarrow's word for a row or value that does not fit in one block


def block_bytes(bounds: TableBounds) -> int:
    """The bytes read and parsed at a time: CSV's read-ahead fits one decode's share of memory."""
    share = bounds.max_decoded_bytes // READ_AHEAD_BLOCKS
    return max(MIN_BLOCK_BYTES, min(MAX_BLOCK_BYTES, share))


class CsvTable:
    """A CSV or TSV file with a header row, typed from its first block."""

    def __init__(self, reader: VerifiedReader, bounds: TableBounds, delimiter: str) -> None:
        self.reader = reader
        self.block = block_bytes(bounds)
        self._parse = pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
        # Two blocks in memory: pyarrow types the first, and takes its last row for the whole
        # of it only when it is the final block, so a row cut at its end must not look final.
        head = bytes(reader.peek(0, 2 * self.block))
        _check_header(head[: self.block], reader.size, self.block)
        if head[: self.block].split(b"\n", 1)[0].count(delimiter.encode()) >= bounds.max_columns:
            check_width(bounds.max_columns + 1, bounds)  # before pyarrow builds every column
        read = pacsv.ReadOptions(use_threads=False, block_size=self.block)
        with _block_errors(self.block):
            inferred = pacsv.open_csv(pa.BufferReader(head), read, self._parse).schema
        binary = [f.name for f in inferred if pa.types.is_binary(f.type)]
        if binary:
            raise TableUnreadable(f"column {excerpt(binary[0])} holds text that is not UTF-8")
        self.schema = pa.schema([_as_text_if_null(f) for f in inferred])

    def batches(self, scan: Scan) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Nothing is skipped unread; the needed columns of each block, filtered and projected."""
        # An empty list means "every column" to pyarrow: read one, to count rows.
        needed = [f.name for f in self.schema if f.name in scan.needed] or self.schema.names[:1]
        convert = pacsv.ConvertOptions(
            column_types={f.name: f.type for f in self.schema if f.name in needed},
            include_columns=needed,
        )
        self.reader.seek(0)
        read = pacsv.ReadOptions(use_threads=False, block_size=self.block)
        source = pa.PythonFile(self.reader, mode="r")
        with _block_errors(self.block, self.reader):
            stream = pacsv.open_csv(source, read, self._parse, convert)
        return 0, filtered(_guarded(stream, self.block, self.reader), scan)


def _check_header(head: bytes, size: int, block: int) -> None:
    """Refuse a header that is not UTF-8 (pyarrow would silently replace the bad bytes).

    Raises:
        TableUnreadable: the header is not UTF-8.
        TableTooLarge: the header row is longer than a block.
    """
    end = head.find(b"\n")
    if end < 0 and len(head) < size:
        raise _too_long(block)
    try:
        (head if end < 0 else head[:end]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TableUnreadable("the header row is not UTF-8 text") from exc


def _as_text_if_null(field: pa.Field) -> pa.Field:
    return field.with_type(pa.string()) if pa.types.is_null(field.type) else field


class JsonLinesTable:
    """A JSON Lines file (one object a line), typed from its first block."""

    def __init__(self, reader: VerifiedReader, bounds: TableBounds) -> None:
        self.reader = reader
        self.block = block_bytes(bounds)
        first = next(self._blocks(), b"")
        if not first or first.isspace():
            raise TableUnreadable("the JSON Lines file holds no object in its first block")
        self.schema = _parse_json(first, None, self.block).schema

    def batches(self, scan: Scan) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Nothing is skipped unread; each block parsed with the needed fields of the schema."""
        wanted = pa.schema([f for f in self.schema if f.name in scan.needed])
        return 0, filtered(self._parsed(wanted), scan, validate=True)

    def _parsed(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        for block in self._blocks():
            if not block.isspace():
                yield from _parse_json(block, schema, self.block).to_batches()

    def _blocks(self) -> Iterator[bytes]:
        """The file in blocks of at most `self.block` bytes, each ending at a newline or EOF."""
        position, size = 0, self.reader.size
        while position < size:
            data = bytes(self.reader.peek(position, self.block))
            end = len(data) if position + len(data) >= size else data.rfind(b"\n") + 1
            if end == 0:
                raise _too_long(self.block)
            yield data[:end]
            position += end


def _parse_json(block: bytes, schema: pa.Schema | None, limit: int) -> pa.Table:
    """One block of JSON Lines as a table: inferred, or converted to `schema`'s fields only."""
    parse = pajson.ParseOptions(
        explicit_schema=schema,
        unexpected_field_behavior="infer" if schema is None else "ignore",
    )
    read = pajson.ReadOptions(use_threads=False, block_size=len(block) + 1)
    with _block_errors(limit):
        return pajson.read_json(pa.BufferReader(block), read_options=read, parse_options=parse)


def _guarded(
    stream: pacsv.CSVStreamingReader, block: int, reader: VerifiedReader
) -> Iterator[pa.RecordBatch]:
    """The stream's batches, its failures translated as they surface (pyarrow reads lazily)."""
    with stream, _block_errors(block, reader):
        yield from stream


@contextlib.contextmanager
def _block_errors(block: int, reader: VerifiedReader | None = None) -> Iterator[None]:
    """Say which bound a too-long row hit, and where a later value's type came from.

    A failure of the verified reader that pyarrow wrapped is raised as itself.
    """
    try:
        yield
    except pa.ArrowInvalid as exc:
        if reader is not None and reader.failure is not None:
            raise reader.failure from exc
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "invalid"
        if _STRADDLES in message:
            raise _too_long(block) from exc
        raise TableUnreadable(
            f"the table cannot be read: {message} (column types are inferred from the first "
            f"{block} bytes)"
        ) from exc


def _too_long(block: int) -> TableTooLarge:
    return TableTooLarge(
        f"a line, row or quoted value is longer than the {block}-byte block read at a time "
        "(or a quote is never closed)",
        limit=block,
    )
