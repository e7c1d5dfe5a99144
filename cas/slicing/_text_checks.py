"""Checks of a text table's bytes before pyarrow reads them, and the bound a block sets.

pyarrow reads what it is given: a header that is not UTF-8 with its bad bytes replaced, UTF-16
text as columns full of NUL bytes, and the rest of the file as one value after a quote left
open. These checks refuse such files first, saying what the file seems to be and what to do.
`beyond_int64` tells an integer literal a double would round, without converting it (Python
refuses to convert more than 4,300 digits). `sniff_delimiter` reads a `.csv` separated by
semicolons, tabs or `|` as its header says, and `number_marks` names such a file's columns of
numbers a locale may mark otherwise (1,5 and 1.000).
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from cards.errors import TableTooLarge, TableUnreadable, excerpt
from cas.slicing._media import SEPARATED
from cas.slicing._reader import VerifiedReader

_INT64 = range(-(2**63), 2**63)
_BOM = b"\xef\xbb\xbf"
_OTHER_DELIMITERS = {b";": "';'", b"\t": "tabs", b"|": "'|'"}
_QUOTED = re.compile(rb'"(?:[^"]|"")*"')
_MARKED = re.compile(rb"[0-9],[0-9]|[0-9]\.[0-9]{3}(?![0-9])")
_COMMA_NUMBER = r"^[+-]?([0-9]*,)?[0-9]+$"
_GROUPED_NUMBER = r"^[+-]?[1-9][0-9]{0,2}(\.[0-9]{3})+$"  # 0.125 groups nothing
_FIRST_LINES = re.compile(rb"([^\r\n]*)(?:[\r\n]+([^\r\n]*))?")


def check_header(head: bytes, size: int, block: int, encoding: str = "utf-8") -> tuple[bytes, bool]:
    """The header row, and whether it ends the file with no line end (so the table has no row).

    Refuse a header that is not text in `encoding` (pyarrow would replace bad bytes). The
    header is the first line that is not empty, after a BOM, as pyarrow and pandas read it; a
    line ends at a LF, a CR or both (a file may end lines with CR only).

    Raises:
        TableUnreadable: the file has no header row, or the header is not text in `encoding`.
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
        raise too_long(block)
    header = body if end < 0 else body[:end]
    try:
        header.decode(encoding)
    except UnicodeDecodeError as exc:
        shown = "UTF-8" if encoding == "utf-8" else encoding
        raise TableUnreadable(f"the header row is not {shown} text{_looks_like(head)}") from exc
    if b"\0" in header:  # valid UTF-8, but UTF-16 text or binary read as it would be garbage
        raise TableUnreadable(f"the header row holds NUL bytes{_looks_like(head)}")
    return header, end < 0


def sniff_delimiter(head: bytes) -> tuple[bytes, str | None]:
    """The delimiter of a CSV, and a note when it is not a comma.

    Spreadsheets in many languages save "CSV" with semicolons (their decimal mark is a comma),
    and a tab-separated file is often named `.csv`. A header with no comma outside its quoted
    names, and exactly one of `;`, a tab or `|`, is read with that one, when the first row
    (if any, and unless a quoted value spans lines) holds as many of it as the header does.
    Otherwise the delimiter is a comma: a header of one name stays one column.
    """
    found = _FIRST_LINES.match(head.removeprefix(_BOM).lstrip(b"\r\n"))
    assert found is not None  # the pattern matches any bytes
    header, row = (_QUOTED.sub(b"", line) if line else line for line in found.groups())
    if b"," in header:
        return b",", None
    present = [d for d in _OTHER_DELIMITERS if d in header]
    if len(present) != 1:
        return b",", None
    delimiter = present[0]
    if row and b'"' not in row and row.count(delimiter) != header.count(delimiter):
        return b",", None
    name = _OTHER_DELIMITERS[delimiter]
    return delimiter, f"{SEPARATED}{name}, not commas (the header has no comma)"


def maybe_marked(head: bytes) -> bool:
    """Whether `head` holds a decimal comma (1,5) or a point before three digits (1.000)."""
    return _MARKED.search(head) is not None


def number_marks(batch: pa.RecordBatch, floats: set[str]) -> str:
    """What a note says of numbers a locale that separates values by `;` marks otherwise.

    `batch` holds a first block's text of columns inferred as text or (those in `floats`) as
    floating point. A text column of numbers with a decimal comma (1,5) stays text: a comma
    may as well part two integers, and a number read from text must be exact. A floating
    column of numbers such as 1.000 or 12.500 is read with a decimal point, which such a
    locale uses to group thousands: the note says so, and how to keep them as text.
    """
    commas, grouped = [], []
    for name in batch.schema.names:
        values = batch.column(name).drop_null()
        if not len(values):
            continue
        if name in floats:
            if pc.all(pc.match_substring_regex(values, _GROUPED_NUMBER)).as_py():
                grouped.append(name)
        elif (
            pc.all(pc.match_substring_regex(values, _COMMA_NUMBER)).as_py()
            and pc.any(pc.match_substring(values, ",")).as_py()
        ):
            commas.append(name)
    said = ""
    if commas:
        said += (
            f"; {_columns(commas)} numbers with a decimal comma (such as 1,5), read as text: "
            "declare the decimal comma (--csv-decimal ,) to read them as numbers"
        )
    if grouped:
        said += (
            f"; {_columns(grouped)} numbers such as 1.000, read with a decimal point (1.0): "
            "if the point groups thousands, declare the column as text (--csv-type NAME=string)"
        )
    return said


def _columns(names: list[str]) -> str:
    """'column 'a' holds' or 'columns 'a', 'b' and more hold', for a note."""
    named = ", ".join(excerpt(name, 40) for name in names[:3])
    more = " and more" if len(names) > 3 else ""
    return f"columns {named}{more} hold" if len(names) > 1 else f"column {named} holds"


WINDOWS_TEXT = (
    "a spreadsheet on Windows saves CSV as cp1252: declare it (--csv-encoding cp1252), or "
    "save the file as UTF-8"
)


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
    if found:
        return f" (it seems to be {found})"
    return f" ({WINDOWS_TEXT})"


def check_quotes(reader: VerifiedReader, block: int, delimiter: bytes) -> None:
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


def beyond_int64(text: str) -> bool:
    """Whether the integer literal `text` (an optional sign, then digits) lies outside int64."""
    digits = len(text.lstrip("+-").lstrip("0"))
    return digits > 19 or (digits == 19 and int(text) not in _INT64)


def too_long(block: int) -> TableTooLarge:
    """The error of a line, row or quoted value longer than the block read at a time."""
    return TableTooLarge(
        f"a line, row or quoted value is longer than the {block}-byte block read at a time "
        "(or a quote is never closed)",
        limit=block,
    )
