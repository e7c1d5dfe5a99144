"""The text table formats: CSV (and TSV) and JSON Lines, streamed in bounded blocks.

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
row (even with no line end) is an empty table of text columns, as pandas reads it; a file with
no header (empty, or only line ends) is `TableUnreadable`. A JSON Lines value that does not
fit the first block's type, or a CSV row with more fields, is `TableUnreadable` and says that
the types came from the first block. Invalid UTF-8 is refused, not inferred as
binary, and so is a header with NUL bytes (ASCII written as UTF-16 decodes as UTF-8 with NULs).

A card's declared read options (`cards.table_read`) type their columns as declared, never
inferred nor widened (a value that does not fit is `TableUnreadable` naming the column, the row
(pyarrow's: a record, the header row 1) and the type), and add their null tokens to pyarrow's.

Nothing reads the whole file. CSV goes through pyarrow's streaming reader over the verified
reader; that reader keeps up to 32 blocks read ahead on its I/O thread (not configurable from
Python, ARROW-12090), so a block is sized for 33 of them to fit one decode's share of the
memory bound, and a slice of ten rows reads at most 33 blocks whatever the file's size. The
first block is typed from an in-memory copy, so no read-ahead runs before the scan. pyarrow has
no streaming JSON reader, so JSON Lines is cut here into blocks that end at a newline, each
parsed on its own with the first block's schema (only the needed fields are converted); an
error pyarrow places in a row of the block names the file's line instead, or no line where the
lines before it do not hold one object each (pyarrow counts objects, not lines). Lines that
end with CR only are read within one block (pyarrow takes a CR for a space), and past it are
`TableUnreadable`, saying to convert them to LF: a block is cut at a LF only, and an error's
line is counted in LFs. A line, a CSV row or a quoted value longer than a block is
`TableTooLarge`. A quote never closed in a CSV of at most `WHOLE_FILE_BYTES` is
`TableUnreadable` (pyarrow reads the rest of the file as one value) when the file's quotes do
not pair up, the usual case of one quote left open; in a larger one it is caught only when the
rest is longer than a block.

Runs in the bounded child of `_isolated`, like the footed readers of `_tables`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from cards import excerpt
from cards.errors import InvalidInput, TableTooLarge, TableUnreadable
from cards.table_read import TableRead
from cas.slicing._limits import TableBounds
from cas.slicing._reader import VerifiedReader
from cas.slicing._tables import Scan, check_width, filtered

MAX_BLOCK_BYTES = 4 << 20
MIN_BLOCK_BYTES = 64 << 10
READ_AHEAD_BLOCKS = 33  # pyarrow's CSV read-ahead queue (32), and the block being parsed
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
# An integer token that may pass int64 (19 digits from 9, or 20 and more), or such text in a string
_JSON_LONG_INTEGER = re.compile(rb"[:\[,]\s*-?(?:9[0-9]{18}|[0-9]{20,})\s*[,\]}]")
_INT64 = range(-(2**63), 2**63)
_JSON_ROW = re.compile(r" in row (\d+)")  # pyarrow's row in the block parsed, from 0


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
        self._parse = pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
        # Two blocks in memory: pyarrow types the first, and takes its last row for the whole
        # of it only when it is the final block, so a row cut at its end must not look final.
        head = bytes(reader.peek(0, 2 * self.block))
        header, rowless = _check_header(head[: self.block], reader.size, self.block)
        if rowless:  # pyarrow reads a lone header only once its line ends, as pandas reads it
            head += b"\n"
        self._rowless = head if rowless else None
        """The whole file, a header with no row, its line ended: read in place of the file."""
        if reader.size <= WHOLE_FILE_BYTES:
            _check_quotes(reader, self.block, delimiter.encode())
        if header.count(delimiter.encode()) >= bounds.max_columns:
            check_width(bounds.max_columns + 1, bounds)  # before pyarrow builds every column
        options = pacsv.ReadOptions(use_threads=False, block_size=self.block)
        self._nulls = [*pacsv.ConvertOptions().null_values, *(() if read is None else read.nulls)]
        nulls = pacsv.ConvertOptions(strings_can_be_null=True, null_values=self._nulls)
        with _block_errors(self.block):
            inferred = pacsv.open_csv(pa.BufferReader(head), options, self._parse, nulls).schema
        binary = [f.name for f in inferred if pa.types.is_binary(f.type)]
        if binary:
            raise TableUnreadable(f"column {excerpt(binary[0])} holds text that is not UTF-8")
        self.declared: dict[str, str] = {} if read is None else dict(read.types)
        """The declared type of each column the card (or the read) declares one for."""
        _check_declared(self.declared, inferred.names)
        self.schema = pa.schema([_typed(f, self.declared) for f in inferred])
        self.notes: list[str] = []
        """One line per column read wider than inferred: what it was inferred as, and why."""
        self._keep_long_integers(head, options)
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
        with _block_errors(self.block):  # the first block alone, as pyarrow typed it
            text = pacsv.open_csv(pa.BufferReader(head), options, self._parse, convert)
            first = text.read_next_batch()
        for name in doubles:
            values = first.column(name).drop_null()
            if (
                len(values)
                and pc.all(pc.match_substring_regex(values, _INTEGER)).as_py()
                and any(
                    _beyond_int64(v)
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
        if pa.types.is_integer(field.type) and re.fullmatch(r"[+-]?0*[0-9]{19,}", drift.value):
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
        )
        self.reader.seek(0)
        read = pacsv.ReadOptions(use_threads=False, block_size=self.block)
        source: pa.NativeFile = (
            pa.PythonFile(self.reader, mode="r")
            if self._rowless is None
            else pa.BufferReader(self._rowless)
        )
        with _block_errors(self.block, self.reader):
            stream = pacsv.open_csv(source, read, self._parse, convert)
        return _guarded(stream, self.block, self.reader)


def _check_header(head: bytes, size: int, block: int) -> tuple[bytes, bool]:
    """The header row, and whether it ends the file with no line end (so the table has no row).

    Refuse a header that is not UTF-8 (pyarrow would replace bad bytes). The header is the
    first line that is not empty, after a BOM, as pyarrow and pandas read it; a line ends at a
    LF, a CR or both (a file may end lines with CR only).

    Raises:
        TableUnreadable: the file has no header row, or the header is not UTF-8.
        TableTooLarge: the header row is longer than a block.
    """
    body = head.removeprefix(_BOM).lstrip(b"\r\n")
    if not body and len(head) == size:
        raise TableUnreadable(
            "the file holds no header row (it is empty or only line ends): a CSV or TSV "
            "needs a first line naming its columns; record the table with its header"
        )
    end = min((i for i in (body.find(b"\n"), body.find(b"\r")) if i >= 0), default=-1)
    if end < 0 and len(head) < size:
        raise _too_long(block)
    header = body if end < 0 else body[:end]
    try:
        header.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TableUnreadable(f"the header row is not UTF-8 text{_looks_like(head)}") from exc
    if b"\0" in header:  # valid UTF-8, but UTF-16 text or binary read as it would be garbage
        raise TableUnreadable(f"the header row holds NUL bytes{_looks_like(head)}")
    return header, end < 0


_BOM = b"\xef\xbb\xbf"
_MAGIC = {
    b"\x1f\x8b": "gzip-compressed: record it uncompressed",
    b"PK\x03\x04": "a ZIP archive (a spreadsheet?): save it as CSV",
    b"\xff\xfe": "UTF-16 text: save it as UTF-8",
    b"\xfe\xff": "UTF-16 text: save it as UTF-8",
}


def _looks_like(head: bytes) -> str:
    """What a file that is not UTF-8 text seems to be, and what to do, for an error message."""
    found = next((what for magic, what in _MAGIC.items() if head.startswith(magic)), None)
    if found is None and b"\0" in head[:2]:  # ASCII as UTF-16, without a BOM
        found = _MAGIC[b"\xff\xfe"]
    return f" (it seems to be {found})" if found else " (save it as UTF-8 text)"


def _check_quotes(reader: VerifiedReader, block: int, delimiter: bytes) -> None:
    """Refuse a quoted value that is never closed, which pyarrow reads as the rest of the file.

    A file with an even number of quote characters is passed at once; an odd one (a quote left
    open, or one inside an unquoted value, which is text) is read as pyarrow parses quotes.

    Raises:
        TableUnreadable: a quote that opens a value is never closed.
    """
    quotes = sum(bytes(reader.peek(at, block)).count(b'"') for at in range(0, reader.size, block))
    if quotes % 2 == 0:
        return
    data = bytes(reader.peek(0, reader.size))
    opened = _open_quote(data, delimiter)
    if opened is not None:
        line = data.count(b"\n", 0, opened) + 1
        raise TableUnreadable(
            f"a quote that opens a value on line {line} is never closed, so the rest of the "
            'file would be one value: close it, or double a quote inside a quoted value ("")'
        )


def _open_quote(data: bytes, delimiter: bytes) -> int | None:
    """Where the value still open at the end of `data` was opened, if one is.

    A quote opens a value only at its start (after a delimiter or a line end); inside one, a
    doubled quote is a quote and a single one closes it; elsewhere a quote is text.
    """
    start = len(_BOM) if data.startswith(_BOM) else 0
    bounds = (delimiter, b"\n", b"\r")
    opened: int | None = None
    at = data.find(b'"', start)
    while at >= 0:
        if opened is None:
            if at == start or data[at - 1 : at] in bounds:
                opened = at
            at = data.find(b'"', at + 1)
        elif data[at + 1 : at + 2] == b'"':
            at = data.find(b'"', at + 2)
        else:
            opened = None
            at = data.find(b'"', at + 1)
    return opened


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


class JsonLinesTable:
    """A JSON Lines file (one object a line), typed from its first block."""

    def __init__(self, reader: VerifiedReader, bounds: TableBounds) -> None:
        self.reader = reader
        self.block = block_bytes(bounds)
        _, first = next(self._blocks(), (1, b""))
        if not first or first.isspace():
            raise TableUnreadable("the JSON Lines file holds no object in its first block")
        self.schema = _parse_json(first, None, self.block, 1).schema

    def batches(self, scan: Scan) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Nothing is skipped unread; each block parsed with the needed fields of the schema."""
        wanted = pa.schema([f for f in self.schema if f.name in scan.needed])
        return 0, filtered(self._parsed(wanted), scan, validate=True)

    def _parsed(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        for line, block in self._blocks():
            if not block.isspace():
                _check_json_integers(block, schema.names)
                yield from _parse_json(block, schema, self.block, line).to_batches()

    def _blocks(self) -> Iterator[tuple[int, bytes]]:
        """The file in blocks of at most `self.block` bytes, each ending at a newline or EOF.

        Each with the file's line (1-based) it starts on.
        """
        position, size, line = 0, self.reader.size, 1
        while position < size:
            data = bytes(self.reader.peek(position, self.block))
            end = len(data) if position + len(data) >= size else data.rfind(b"\n") + 1
            if end == 0 and b"\r" in data:  # pyarrow reads CR as a space: the lines are one
                raise TableUnreadable(
                    f"the JSON Lines file has no LF in {len(data)} bytes from byte {position}, "
                    "but CRs: if its lines end with CR only, convert them to LF (JSON Lines "
                    "ends a line with LF or CRLF), e.g. tr '\\r' '\\n'"
                )
            if end == 0:
                raise _too_long(self.block)
            yield line, data[:end]
            line += data.count(b"\n", 0, end)
            position += end


def _parse_json(block: bytes, schema: pa.Schema | None, limit: int, line: int) -> pa.Table:
    """One block of JSON Lines as a table: inferred, or converted to `schema`'s fields only.

    `line` is the file's line the block starts on: an error names the file's line, not
    pyarrow's row in the block.
    """
    parse = pajson.ParseOptions(
        explicit_schema=schema,
        unexpected_field_behavior="infer" if schema is None else "ignore",
    )
    read = pajson.ReadOptions(use_threads=False, block_size=len(block) + 1)
    with _block_errors(limit):
        try:
            return pajson.read_json(pa.BufferReader(block), read_options=read, parse_options=parse)
        except pa.ArrowInvalid as exc:
            message = str(exc)
            row = _JSON_ROW.search(message)
            if row is None:
                raise
            found = _row_line(block, int(row.group(1)))
            where = "" if found is None else f" on line {line + found}"
            raise pa.ArrowInvalid(message[: row.start()] + where + message[row.end() :]) from exc


def _row_line(block: bytes, row: int) -> int | None:
    """The line of `block` (from 0) that starts pyarrow's row `row` (from 0), where that is sure.

    pyarrow counts JSON values, not lines, and skips blank lines; a line is named only when each
    line before it that is not blank holds one whole value, as JSON Lines has it.
    """
    seen = 0
    for number, text in enumerate(block.split(b"\n")):
        if not text.strip(b" \t\r"):  # JSON's whitespace: pyarrow skips such a line
            continue
        if seen == row:
            return number
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            return None  # two values on a line, or one over several: the count is not of lines
        seen += 1
    return None


def _check_json_integers(block: bytes, names: list[str]) -> None:
    """Refuse an integer beyond int64 in the fields `names`: pyarrow would round it to a double.

    Only a line whose text holds such a number is parsed again, by Python, which keeps it exact.

    Raises:
        TableUnreadable: a needed field holds an integer beyond int64.
    """
    if _JSON_LONG_INTEGER.search(block) is None:
        return
    for line in block.splitlines():
        if _JSON_LONG_INTEGER.search(line) is None:
            continue
        try:
            row = json.loads(line, parse_int=_json_integer)
        except (ValueError, RecursionError):
            continue  # pyarrow says what is wrong with the line
        if not isinstance(row, dict):
            continue
        for name in names:
            found = _long_integer(row.get(name))
            if found is not None:
                raise TableUnreadable(
                    f"field {excerpt(name)} holds the integer {excerpt(found)}, beyond "
                    "int64, which a double would round; write such values as JSON strings, or "
                    "slice the other fields"
                )


class _LongInteger(str):
    """A JSON integer beyond int64, kept as its text (`_json_integer`)."""


def _json_integer(text: str) -> int | _LongInteger:
    """A JSON integer as `json.loads` reads it here: one beyond int64 stays text.

    Never `int()` of a long one: Python refuses to convert more than 4,300 digits (a ValueError
    that would hide the line from this check, and pyarrow reads such a number as infinity).
    """
    return _LongInteger(text) if _beyond_int64(text) else int(text)


def _beyond_int64(text: str) -> bool:
    """Whether the integer literal `text` (an optional sign, then digits) lies outside int64."""
    digits = len(text.lstrip("+-").lstrip("0"))
    return digits > 19 or (digits == 19 and int(text) not in _INT64)


def _long_integer(value: object) -> str | None:
    """The first integer beyond int64 anywhere in a parsed JSON value, walked without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, _LongInteger):
            return item
    return None


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
        drift = _DRIFT.match(message) if reader is not None else None
        if drift is not None:
            column, row, dtype, value = drift.groups()  # pyarrow's row: a record, not a line
            where = f"in row {row} (the header is row 1)" if row else "after the first block"
            found = f"holds {excerpt(value)} {where}"
            raise TypeDrift(
                f"column #{column} {found}, which does not fit {dtype}", int(column), found, value
            ) from exc
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
