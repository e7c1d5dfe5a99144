"""The CSV (and TSV) table format, streamed in bounded blocks; JSON Lines is `_json_lines`.

Text has no footer, so the schema is inferred from a bounded first block. A CSV column's type
must then hold for the whole file: a column whose later values do not fit is widened (int64 to
float64 to text, any other type to text; int64 to text for an integer beyond int64, which a
double would round), never read with two types in one slice. A column of integers that pyarrow
infers as double because some overflow int64 is read as text for the same reason. A CSV of at
most `WHOLE_FILE_BYTES` is typed over the whole file before any row is read (`CsvTable.settle`,
a streaming pass over the needed columns that restarts with the widened type), so every slice
and `show` agree. A larger one is sliced with the first block's types, and a value that does
not fit restarts the slice with that column widened before any row leaves the child (a slice's
rows cross only when it is done; an export, whose rows go to a file as they are read, settles
its columns first); the result notes each widening. Blank cells and pyarrow's null tokens
(`NA`, `null`, `NaN`, ...) are null in every column, as pandas reads them. A CSV column empty
throughout the first block is read as text, not as pyarrow's `null` type, so a header with no
row (even with no line end) is an empty table of text columns, as pandas reads it. A row with
more fields than the first block's is `TableUnreadable` and says that the types came from the
first block. What is refused before pyarrow reads a byte (no header, a header that is not UTF-8
or holds NUL bytes, a quote never closed) is `_text_checks`'.

A card's declared read options (`cards.table_read`) read numbers with their decimal mark, type
their columns as declared, never inferred nor widened (a value that does not fit is
`TableUnreadable` naming the column, the row (pyarrow's: a record, the header row 1) and the
type), and add their null tokens to pyarrow's.

Nothing reads the whole file. CSV goes through pyarrow's streaming reader over the verified
reader; that reader keeps up to 32 blocks read ahead on its I/O thread (not configurable from
Python, ARROW-12090), so a block is sized for 33 of them to fit one decode's share of the
memory bound, and a slice of ten rows reads at most 33 blocks whatever the file's size. The
first block is typed from an in-memory copy, so no read-ahead runs before the scan. A row or
a quoted value longer than a block is `TableTooLarge`.

Runs in the bounded child of `_isolated`, like the footed readers of `_tables`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from cards import excerpt
from cards.errors import InvalidInput, TableUnreadable
from cards.table_read import TableRead
from cas.slicing._limits import TableBounds
from cas.slicing._reader import VerifiedReader
from cas.slicing._tables import Scan, check_width, filtered
from cas.slicing._text_checks import (
    WINDOWS_TEXT,
    beyond_int64,
    check_header,
    check_quotes,
    maybe_marked,
    number_marks,
    sniff_delimiter,
    too_long,
)

MAX_BLOCK_BYTES = 4 << 20
MIN_BLOCK_BYTES = 64 << 10
READ_AHEAD_BLOCKS = 33  # pyarrow's CSV read-ahead queue (32), and the block being parsed
_RAGGED = " columns, got "  # pyarrow's "Expected 3 columns, got 2"
_STRADDLES = "straddl"  # pyarrow's word for a row or value that does not fit in one block
WHOLE_FILE_BYTES = 8 << 20
"""A CSV this small is typed over the whole file before a slice (a pass of about 0.1 s)."""
_DRIFT = re.compile(  # a timestamp's zone is a value that does not fit, too
    r"In CSV column #(\d+): (?:Row #(\d+): )?CSV conversion error to ([^:]+): "
    r"(?:invalid value|expected (?:a|no) zone offset in) '(.*)'"
)
_WIDER = {pa.int64(): pa.float64(), pa.float64(): pa.string()}
_INTEGER = r"^[+-]?[0-9]+$"
_LONG_DIGITS = re.compile(rb"[0-9]{19}")  # int64 holds every integer of 18 digits


class TypeDrift(TableUnreadable):
    """A CSV value that does not fit its column's type: the column is widened and read again."""

    def __init__(self, message: str, column: int, found: str, value: str = "") -> None:
        super().__init__(message)
        self.column = column
        self.found = found
        self.value = value


def block_bytes(bounds: TableBounds) -> int:
    """The bytes read and parsed at a time: CSV's read-ahead fits one decode's share of memory."""
    share = bounds.max_decoded_bytes // READ_AHEAD_BLOCKS
    return max(MIN_BLOCK_BYTES, min(MAX_BLOCK_BYTES, share))


class CsvTable:
    """A CSV or TSV file with a header row, typed from its first block."""

    def __init__(
        self,
        reader: VerifiedReader,
        bounds: TableBounds,
        delimiter: str,
        read: TableRead | None = None,
    ) -> None:
        self.reader = reader
        self.block = block_bytes(bounds)
        # Two blocks in memory: pyarrow types the first, and takes its last row for the whole
        # of it only when it is the final block, so a row cut at its end must not look final.
        head = bytes(reader.peek(0, 2 * self.block))
        self._encoding = "utf-8" if read is None else read.text_encoding
        header, rowless = check_header(head[: self.block], reader.size, self.block, self._encoding)
        self.delimiter_note: str | None = None
        """How a CSV with no comma in its header is read (`sniff_delimiter`), if it is."""
        if delimiter == ",":
            sniffed, self.delimiter_note = sniff_delimiter(head[: self.block])
            delimiter = sniffed.decode()
        self._parse = pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
        if rowless:  # pyarrow reads a lone header only once its line ends, as pandas reads it
            head += b"\n"
        self._rowless = head if rowless else None
        """The whole file, a header with no row, its line ended: read in place of the file."""
        if reader.size <= WHOLE_FILE_BYTES:
            check_quotes(reader, self.block, delimiter.encode())
        if header.count(delimiter.encode()) >= bounds.max_columns:
            check_width(bounds.max_columns + 1, bounds)  # before pyarrow builds every column
        options = pacsv.ReadOptions(
            use_threads=False, block_size=self.block, encoding=self._encoding
        )
        self._nulls = [*pacsv.ConvertOptions().null_values, *(() if read is None else read.nulls)]
        self._decimal = "." if read is None else read.decimal_point
        nulls = pacsv.ConvertOptions(
            strings_can_be_null=True, null_values=self._nulls, decimal_point=self._decimal
        )
        with block_errors(self.block):
            inferred = pacsv.open_csv(pa.BufferReader(head), options, self._parse, nulls).schema
        binary = [f.name for f in inferred if pa.types.is_binary(f.type)]
        if binary:
            raise TableUnreadable(
                f"column {excerpt(binary[0])} holds text that is not UTF-8 ({WINDOWS_TEXT})"
            )
        self.declared: dict[str, str] = {} if read is None else dict(read.types)
        """The declared type of each column the card (or the read) declares one for."""
        _check_declared(self.declared, inferred.names)
        self.schema = pa.schema([_typed(f, self.declared) for f in inferred])
        self.notes: list[str] = []
        """One line per column read wider than inferred: what it was inferred as, and why."""
        self._keep_long_integers(head, options)
        if self.delimiter_note is not None and self._decimal == ".":
            self.delimiter_note += self._number_marks(head, options)
        self._inferred = self.schema
        self.whole_file = reader.size <= WHOLE_FILE_BYTES
        """Whether every column is typed over the whole file before it is read."""
        # Text cannot drift; nor can anything when the first block is the whole file (pyarrow
        # types the first block only: a value in the second block of `head` may not fit).
        self._settled = {f.name for f in self.schema if pa.types.is_string(f.type)}
        if reader.size <= self.block:  # a declared type was not inferred: it is checked
            self._settled.update(n for n in self.schema.names if n not in self.declared)

    def _keep_long_integers(self, head: bytes, options: pacsv.ReadOptions) -> None:
        """Read as text a column of integers that pyarrow inferred as double: int64 overflows.

        A double would round them (an identifier of 20 digits), where pandas keeps them exact.
        """
        names = self.schema.names
        doubles = [
            f.name
            for f in self.schema
            if pa.types.is_floating(f.type)
            and f.name not in self.declared
            and names.count(f.name) == 1  # a repeated name cannot be sliced, nor read alone
        ]
        if not doubles or _LONG_DIGITS.search(head) is None:
            return
        convert = pacsv.ConvertOptions(
            column_types=dict.fromkeys(doubles, pa.string()),
            include_columns=doubles,
            strings_can_be_null=True,
            null_values=self._nulls,
        )
        with block_errors(self.block):  # the first block alone, as pyarrow typed it
            text = pacsv.open_csv(pa.BufferReader(head), options, self._parse, convert)
            first = text.read_next_batch()
        for name in doubles:
            values = first.column(name).drop_null()
            if (
                len(values)
                and pc.all(pc.match_substring_regex(values, _INTEGER)).as_py()
                and any(
                    beyond_int64(v)
                    for v in values.filter(pc.greater_equal(pc.utf8_length(values), 19)).to_pylist()
                )
            ):  # pyarrow reads a column of "+5" as double too: that one stays double
                index = self.schema.get_field_index(name)
                self.schema = self.schema.set(
                    index, self.schema.field(index).with_type(pa.string())
                )
                self.notes.append(
                    f"column {name!r} holds integers beyond int64: read as string, not double"
                )

    def _number_marks(self, head: bytes, options: pacsv.ReadOptions) -> str:
        """What the delimiter's note adds: the columns whose numbers a locale may mark otherwise.

        A CSV not separated by commas is often a spreadsheet's that writes 1,5 for 1.5 and
        may write 1.000 for a thousand (`number_marks`).
        """
        names = [
            f.name
            for f in self.schema
            if (pa.types.is_string(f.type) or pa.types.is_floating(f.type))
            and f.name not in self.declared
        ]
        if not names or not maybe_marked(head):
            return ""
        convert = pacsv.ConvertOptions(
            include_columns=list(dict.fromkeys(names)),
            column_types=dict.fromkeys(names, pa.string()),
            strings_can_be_null=True,
            null_values=self._nulls,
        )
        with block_errors(self.block):  # the first block alone, as pyarrow typed it
            first = pacsv.open_csv(pa.BufferReader(head), options, self._parse, convert)
            batch = first.read_next_batch()
        return number_marks(batch, {f.name for f in self.schema if pa.types.is_floating(f.type)})

    @property
    def typed_whole_file(self) -> bool:
        """Whether every column's type is known to hold for the whole file."""
        return set(self.schema.names) <= self._settled

    def settle(self, names: Iterable[str]) -> None:
        """Type the columns `names` over the whole file, widening each until every value fits.

        A streaming pass over those columns alone; each value that does not fit widens its
        column one step and starts the pass again (at most twice per column).
        """
        pending = [n for n in self.schema.names if n in set(names) and n not in self._settled]
        while pending:
            try:
                for _ in self._stream(pending):
                    pass
            except TypeDrift as drift:
                self.widen(drift)
                pending = [n for n in pending if n not in self._settled]
                continue
            break
        self._settled.update(pending)

    def widen(self, drift: TypeDrift) -> None:
        """Widen the column a value did not fit, and note it (it is then typed anew).

        Raises:
            TypeDrift: the column cannot be widened (no step is left).
        """
        if not 0 <= drift.column < len(self.schema):
            raise drift
        field = self.schema.field(drift.column)
        if field.name in self.declared:
            name = excerpt(field.name)
            wider = "float64" if pa.types.is_integer(field.type) else "string"
            flag = f"{field.name if field.name.isidentifier() else name}={wider}"
            raise TableUnreadable(
                f"column {name} {drift.found}, which does not fit its declared type "
                f"{self.declared[field.name]} (a declared type is never widened: declare "
                f"another, e.g. --csv-type {flag}, or a null token with --csv-null)"
            ) from drift
        wider = _WIDER.get(field.type, pa.string())
        if (
            pa.types.is_integer(field.type)
            and re.fullmatch(_INTEGER, drift.value)
            and beyond_int64(drift.value)
        ):
            wider = pa.string()  # an integer beyond int64: a double would round it
        if field.type == wider:
            raise drift
        self.schema = self.schema.set(drift.column, field.with_type(wider))
        if pa.types.is_string(wider):
            self._settled.add(field.name)
        name = repr(field.name)
        self.notes = [n for n in self.notes if not n.startswith(f"column {name} ")]
        first = self._inferred.field(drift.column).type
        self.notes.append(f"column {name} {drift.found}: read as {wider}, not {first}")

    def batches(self, scan: Scan) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Nothing is skipped unread; the needed columns of each block, filtered and projected.

        Raises:
            TypeDrift: as the batches are read, a value does not fit its column's type.
        """
        # An empty list means "every column" to pyarrow: read one, to count rows.
        needed = [f.name for f in self.schema if f.name in scan.needed] or self.schema.names[:1]
        return 0, filtered(self._stream(needed), scan)

    def _stream(self, names: list[str]) -> Iterator[pa.RecordBatch]:
        """The columns `names` of the whole file, block by block, in the current types."""
        convert = pacsv.ConvertOptions(
            column_types={f.name: f.type for f in self.schema if f.name in names},
            include_columns=names,
            strings_can_be_null=True,
            null_values=self._nulls,
            decimal_point=self._decimal,
        )
        self.reader.seek(0)
        read = pacsv.ReadOptions(use_threads=False, block_size=self.block, encoding=self._encoding)
        source: pa.NativeFile = (
            pa.PythonFile(self.reader, mode="r")
            if self._rowless is None
            else pa.BufferReader(self._rowless)
        )
        with block_errors(self.block, self.reader):
            stream = pacsv.open_csv(source, read, self._parse, convert)
        return _guarded(stream, self.block, self.reader)


def _typed(field: pa.Field, declared: dict[str, str]) -> pa.Field:
    """A column's declared type, else its inferred one (text where pyarrow inferred `null`)."""
    if field.name in declared:
        return field.with_type(pa.type_for_alias(declared[field.name]))
    return field.with_type(pa.string()) if pa.types.is_null(field.type) else field


def _check_declared(declared: dict[str, str], names: list[str]) -> None:
    """Refuse declared types for columns the header does not name.

    Raises:
        InvalidInput: a declared column is not in the header.
    """
    missing = [name for name in declared if name not in names]
    if missing:
        shown = ", ".join(excerpt(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
        raise InvalidInput(
            f"a type is declared for column {excerpt(missing[0])}, which the table does not "
            f"have (its columns: {shown}); declare types only for the header's columns"
        )


def _guarded(
    stream: pacsv.CSVStreamingReader, block: int, reader: VerifiedReader
) -> Iterator[pa.RecordBatch]:
    """The stream's batches, its failures translated as they surface (pyarrow reads lazily)."""
    with stream, block_errors(block, reader):
        yield from stream


@contextlib.contextmanager
def block_errors(block: int, reader: VerifiedReader | None = None) -> Iterator[None]:
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
            raise too_long(block) from exc
        drift = _DRIFT.match(message) if reader is not None else None
        if drift is not None:
            column, row, dtype, value = drift.groups()  # pyarrow's row: a record, not a line
            where = f"in row {row} (the header is row 1)" if row else "after the first block"
            found = f"holds {excerpt(value)} {where}"
            raise TypeDrift(
                f"column #{column} {found}, which does not fit {dtype}", int(column), found, value
            ) from exc
        hint = f"column types are inferred from the first {block} bytes"
        if _RAGGED in message:  # pyarrow counts rows from the header's, as row 1
            hint = "every row must hold as many values as the header names; quote a delimiter"
        raise TableUnreadable(f"the table cannot be read: {message} ({hint})") from exc
