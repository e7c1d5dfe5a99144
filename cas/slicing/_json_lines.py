"""The JSON Lines table format (one object a line), parsed in bounded blocks.

Text has no footer, so the fields and their types come from the blocks read, as a CSV's types
do (`_text_tables`): a file of at most `WHOLE_FILE_BYTES` is surveyed block by block before any
read (every field, wherever it first appears, and each field's type over the whole file). A
larger one starts from its first block; a slice that reads every field restarts with a field
that first appears later, a slice restarts with a needed field widened when a later value does
not fit it (a slice's rows cross only when it is done), and an export (its rows go to a file as
they are read) surveys its fields over the whole file first. A field named by a slice but not
in the first block is looked for. Each such field is noted, never dropped: what `_json_fields`
does with a block (its names, types, and values as text).

A field's type widens as a CSV column's does: int64 to double, a time to text (one with a UTC
offset is `timestamp[s, tz=UTC]`, as in a CSV), and a field whose values change kind (a number,
then a string) is read as its JSON text, a string as itself. A field nested in an object gains a
key a later line adds. The column bound is checked as names are counted, before pyarrow builds
a column for each.

pyarrow has no streaming JSON reader, so the file is cut here into blocks that end at a newline,
each parsed on its own with the needed fields of the schema; an error pyarrow places in a row of
the block names the file's line instead, or no line where the lines before it do not hold one
object each (pyarrow counts objects, not lines). Lines that end with CR only are read within one
block (pyarrow takes a CR for a space), and past it are `TableUnreadable`, saying to convert
them to LF: a block is cut at a LF only, and an error's line is counted in LFs. A line longer
than a block is `TableTooLarge`. pyarrow cannot read a number as text, so an integer beyond
int64 in a needed field that is not text is `TableUnreadable` (a double would round it): only a
line whose text may hold one is parsed again, by Python.

Runs in the bounded child of `_isolated`, like the other readers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from cards import excerpt
from cards.errors import TableUnreadable
from cas.slicing._json_fields import has_struct, infer_block, merged, misfit, parse_block
from cas.slicing._json_text import check_json_integers, scan_names, text_columns
from cas.slicing._limits import TableBounds
from cas.slicing._reader import VerifiedReader
from cas.slicing._tables import Scan, check_width, filtered
from cas.slicing._text_checks import too_long
from cas.slicing._text_tables import WHOLE_FILE_BYTES, TypeDrift, block_bytes

_JSON_ROW = re.compile(r" in row (\d+)")  # pyarrow's row in the block parsed, from 0
_STRADDLES = "straddl"
_LISTED_NOTES = 20


class JsonDrift(TypeDrift):
    """A block holds a field or a value the types so far do not: they are widened; read again."""

    def __init__(self, line: int) -> None:
        super().__init__(
            f"the JSON Lines block from line {line} holds a field or a value the fields read so "
            "far do not: read again",
            -1,
            "",
        )


class JsonLinesTable:
    """A JSON Lines file (one object a line), typed over the whole file, or from its first block."""

    def __init__(self, reader: VerifiedReader, bounds: TableBounds) -> None:
        self.reader = reader
        self.block = block_bytes(bounds)
        self._bounds = bounds
        self.schema = pa.schema([])
        self._text: set[str] = set()
        """The fields read as their JSON text: their values change kind."""
        self._first: dict[str, pa.DataType] = {}
        self._appears: dict[str, str] = {}
        self._widened: dict[str, str] = {}
        blocks = self._blocks()
        line, first = next(blocks, (1, b""))
        if not first or first.isspace():
            raise TableUnreadable("the JSON Lines file holds no object in its first block")
        self._absorb(line, first)
        self.whole_file = reader.size <= WHOLE_FILE_BYTES
        """Whether the fields and their types are surveyed over the whole file when opened."""
        for line, block in blocks if self.whole_file else ():
            if not block.isspace():
                self._absorb(line, block)
        self._settled = self.whole_file

    @property
    def typed_whole_file(self) -> bool:
        """Whether every field, and its type, is known to hold for the whole file."""
        return self._settled

    @property
    def notes(self) -> list[str]:
        """A line per field that first appears past the first block, or is read wider.

        At most `_LISTED_NOTES` of each kind, then how many more (a file may add many fields).
        """
        notes = []
        for kind, more in (
            (self._appears, "first appear past the first block"),
            (self._widened, "are read wider than pyarrow infers them"),
        ):
            found = [kind[name] for name in self.schema.names if name in kind]
            notes += found[:_LISTED_NOTES]
            if len(found) > _LISTED_NOTES:
                notes.append(f"and {len(found) - _LISTED_NOTES} more fields {more}")
        return notes

    def settle(self, names: Iterable[str], *, always: bool = False) -> None:
        """Find the fields `names` past the first block; if `always`, type them over the file.

        A slice looks for a named field the first block lacks until it is found; an export
        (`always`) reads the named fields over the whole file, each block again while a value
        widens a field, and every field the file holds if it names every field.
        """
        wanted = set(names)
        every = wanted >= set(self.schema.names)
        for line, block in () if self._settled else self._blocks():
            missing = not wanted <= set(self.schema.names)
            if not (always or missing):
                return
            if block.isspace():
                continue
            if not always:
                if scan_names(block, line, self.schema.names, self._bounds)[0]:
                    self._absorb(line, block)
                continue
            while True:
                needed = [f.name for f in self.schema if every or f.name in wanted]
                try:
                    self._read(line, block, needed, every or missing)
                except JsonDrift:
                    continue
                break
        self._settled = self._settled or (always and every)

    def widen(self, drift: TypeDrift) -> None:
        """Nothing left to do: the fields were widened as the drift was found (`JsonDrift`)."""
        assert isinstance(drift, JsonDrift)

    def batches(self, scan: Scan) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Nothing is skipped unread; each block parsed with the needed fields of the schema.

        Raises:
            JsonDrift: a block holds a value a needed field's type does not, or a field that
                first appears there when the scan reads every field (they are widened).
        """
        every = set(scan.columns) >= set(self.schema.names)
        names = [f.name for f in self.schema if f.name in scan.needed]
        return 0, filtered(self._parsed(names, every), scan, validate=True)

    def _parsed(self, names: list[str], every: bool) -> Iterator[pa.RecordBatch]:
        for line, block in self._blocks():
            if not block.isspace():
                yield from self._read(line, block, names, every).to_batches()

    def _read(self, line: int, block: bytes, names: list[str], every: bool) -> pa.Table:
        """The fields `names` of one block, in their types so far.

        Raises:
            JsonDrift: the block holds a field (if `every`) or a value those types do not.
        """
        if not self._settled:
            nested = {f.name: f.type for f in self.schema if f.name in names and has_struct(f.type)}
            if every or nested:
                known = self.schema.names if every else None
                new, lacks = scan_names(block, line, known, self._bounds, nested)
                if (new or lacks) and self._absorb(line, block):
                    raise JsonDrift(line)
        try:
            return self._converted(line, block, names)
        except pa.ArrowInvalid as exc:
            if not self._settled and self._absorb(line, block):
                raise JsonDrift(line) from exc
            raise _unreadable(exc, block, line, self.block) from exc

    def _converted(self, line: int, block: bytes, names: list[str]) -> pa.Table:
        """Text fields by Python's scanner, the others by pyarrow (a time from its text)."""
        fields = [self.schema.field(name) for name in names]
        read = [f for f in fields if f.name not in self._text]
        check_json_integers(block, [f.name for f in read])
        texts = [f.with_type(pa.string()) if pa.types.is_timestamp(f.type) else f for f in read]
        table = parse_block(block, pa.schema(texts))
        for index, f in enumerate(read):
            if pa.types.is_timestamp(f.type):
                table = table.set_column(index, f, pc.cast(table.column(index), f.type))
        text = [f for f in fields if f.name in self._text]
        if text:
            columns = text_columns(block, line, [f.name for f in text])
            for f in text:
                if len(columns[f.name]) != table.num_rows:
                    raise TableUnreadable(
                        f"the JSON Lines block from line {line} holds {table.num_rows} objects "
                        f"for pyarrow and {len(columns[f.name])} for Python's JSON scanner"
                    )
                table = table.append_column(f, columns[f.name])
        return table.select(names)

    def _absorb(self, line: int, block: bytes) -> bool:
        """Add the block's new fields, and widen a field whose values it does not fit.

        Returns whether a field was added or widened.
        """
        new, _ = scan_names(block, line, self.schema.names, self._bounds)
        try:
            inferred = infer_block(block, line)
        except pa.ArrowInvalid as exc:
            raise _unreadable(exc, block, line, self.block) from exc
        fields = {f.name: f for f in self.schema}
        order = [*new, *(n for n in [*inferred.types, *inferred.text] if n not in new)]
        changed = False
        for name in order:
            dtype = None if name in inferred.text else inferred.types.get(name)
            if name not in inferred.text and name not in inferred.types:
                continue
            shown = f"field {excerpt(name)}"
            if name not in fields:
                fields[name] = pa.field(name, pa.string() if dtype is None else dtype)
                self._first[name] = fields[name].type
                if line > 1:
                    self._appears[name] = f"{shown} first appears on line {new.get(name, line)}"
                if name in inferred.text:
                    self._text.add(name)
                    self._widened[name] = f"{shown} {inferred.text[name]}: read as its JSON text"
                elif name in inferred.why:
                    self._widened[name] = f"{shown} {inferred.why[name]}: read as string"
                changed = True
                continue
            old = fields[name].type
            if name in self._text:
                continue
            wider = None if dtype is None else merged(old, dtype)
            if wider == old:
                continue
            if wider is None:
                why = inferred.text.get(name) or misfit(block, line, name, old)
                self._text.add(name)
                fields[name] = fields[name].with_type(pa.string())
                self._widened[name] = f"{shown} {why}: read as its JSON text"
            elif pa.types.is_null(old):  # no value seen yet: the first type is this one
                fields[name] = fields[name].with_type(wider)
                self._first[name] = wider
            else:
                fields[name] = fields[name].with_type(wider)
                why = inferred.why.get(name) or misfit(block, line, name, old)
                self._widened[name] = f"{shown} {why}: read as {wider}, not {self._first[name]}"
            changed = True
        check_width(len(fields), self._bounds)
        self.schema = pa.schema(fields.values())
        return changed

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


def _unreadable(exc: pa.ArrowInvalid, block: bytes, line: int, limit: int) -> Exception:
    """The error pyarrow raised, naming the file's line rather than pyarrow's row in the block."""
    message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "invalid"
    if _STRADDLES in message:
        return too_long(limit)
    row = _JSON_ROW.search(message)
    if row is not None:
        found = _row_line(block, int(row.group(1)))
        where = "" if found is None else f" on line {line + found}"
        message = message[: row.start()] + where + message[row.end() :]
    return TableUnreadable(f"the table cannot be read: {message}")


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
