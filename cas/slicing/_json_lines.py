"""The JSON Lines table format (one object a line), parsed in bounded blocks.

Text has no footer, so the schema is inferred from a bounded first block: a value that does
not fit it later is `TableUnreadable` and says that the types came from the first block. pyarrow
has no streaming JSON reader, so the file is cut here into blocks that end at a newline, each
parsed on its own with the first block's schema (only the needed fields are converted); an
error pyarrow places in a row of the block names the file's line instead, or no line where the
lines before it do not hold one object each (pyarrow counts objects, not lines). Lines that
end with CR only are read within one block (pyarrow takes a CR for a space), and past it are
`TableUnreadable`, saying to convert them to LF: a block is cut at a LF only, and an error's
line is counted in LFs. A line longer than a block is `TableTooLarge`. pyarrow cannot read a
number as text, so an integer beyond int64 in a needed field is `TableUnreadable` (a double
would round it): only a line whose text may hold one is parsed again, by Python.

Runs in the bounded child of `_isolated`, like the other readers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.json as pajson

from cards import excerpt
from cards.errors import TableUnreadable
from cas.slicing._limits import TableBounds
from cas.slicing._reader import VerifiedReader
from cas.slicing._tables import Scan, filtered
from cas.slicing._text_checks import beyond_int64, too_long
from cas.slicing._text_tables import block_bytes, block_errors

# An integer token that may pass int64 (19 digits from 9, or 20 and more), or such text in a string
_JSON_LONG_INTEGER = re.compile(rb"[:\[,]\s*-?(?:9[0-9]{18}|[0-9]{20,})\s*[,\]}]")
_JSON_ROW = re.compile(r" in row (\d+)")  # pyarrow's row in the block parsed, from 0


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
                raise too_long(self.block)
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
    with block_errors(limit):
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
    return _LongInteger(text) if beyond_int64(text) else int(text)


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
