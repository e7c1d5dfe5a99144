"""JSON Lines read by Python's JSON scanner, where pyarrow cannot read what is needed.

pyarrow reads no number as text, counts objects rather than lines, and given a schema drops
what it does not name. Here, for `_json_lines` and `_json_fields`:

- `objects`: each object of a block with where each member's name and value start and end, so
  a value's JSON text is taken as written (Python's scanner, a value at a time).
- `text_columns`: fields' values as their JSON text as written (a string as itself).
- `scan_names`: the top-level names of a block not seen yet, each with the line it first
  appears on (orjson, a line at a time; the block walked by `objects` where a line does not
  hold one object), the column bound checked as they are counted, before pyarrow builds a
  column for each; and whether a needed object field holds a key its type lacks.
- `check_json_integers`: an integer beyond int64 in a needed field, which a double would round.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator

import pyarrow as pa

from cards import excerpt
from cards.errors import TableUnreadable
from cas.slicing._limits import TableBounds
from cas.slicing._tables import check_width
from cas.slicing._text_checks import beyond_int64

_BOM = b"\xef\xbb\xbf"
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace: pyarrow reads a CR as a space too
# An integer token that may pass int64 (19 digits from 9, or 20 and more), or such text in a string
_JSON_LONG_INTEGER = re.compile(rb"[:\[,]\s*-?(?:9[0-9]{18}|[0-9]{20,})\s*[,\]}]")


class LongInteger(str):
    """A JSON integer beyond int64, kept as its text (`json_integer`)."""


def json_integer(text: str) -> int | LongInteger:
    """A JSON integer as Python's scanner reads it here: one beyond int64 stays text.

    Never `int()` of a long one: Python refuses to convert more than 4,300 digits (a ValueError
    that would hide the line), and pyarrow reads such a number as infinity.
    """
    return LongInteger(text) if beyond_int64(text) else int(text)


_DECODER = json.JSONDecoder(parse_int=json_integer)
_SCAN: Callable[[str, int], tuple[object, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_STRING: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
Member = tuple[str, int, int, int, object]
"""A member of an object: its name, where its name starts, where its value starts and ends, and
the value as Python's scanner reads it."""


def objects(text: str) -> Iterator[tuple[int, list[Member]]]:
    """Each object of `text` (one or more a line, or one over lines, as pyarrow reads them).

    Raises:
        json.JSONDecodeError: `text` is not a sequence of JSON objects.
        RecursionError: a value nests too deep for Python's scanner.
    """
    at = _skip(text, 0)
    while at < len(text):
        start, members = at, []
        if text[at] != "{":
            raise json.JSONDecodeError("Expecting an object", text, at)
        at = _skip(text, at + 1)
        while text[at : at + 1] != "}":
            if text[at : at + 1] != '"':
                raise json.JSONDecodeError("Expecting a field name", text, at)
            name, value = _STRING(text, at + 1)
            value = _skip(text, value)
            if text[value : value + 1] != ":":
                raise json.JSONDecodeError("Expecting ':'", text, value)
            value = _skip(text, value + 1)
            try:
                parsed, end = _SCAN(text, value)
            except StopIteration:
                raise json.JSONDecodeError("Expecting a value", text, value) from None
            members.append((name, at, value, end, parsed))
            at = _skip(text, end)
            if text[at : at + 1] == ",":
                at = _skip(text, at + 1)
                if text[at : at + 1] == "}":
                    raise json.JSONDecodeError("Expecting a field name", text, at)
            elif text[at : at + 1] != "}":
                raise json.JSONDecodeError("Expecting ',' or '}'", text, at)
        yield start, members
        at = _skip(text, at + 1)


def _skip(text: str, at: int) -> int:
    """Where the JSON whitespace from `at` ends."""
    found = _SPACE.match(text, at)
    assert found is not None  # the pattern matches nothing, too
    return found.end()


def decoded(block: bytes, line: int) -> str:
    """The block as text, without the BOM a file may start with (pyarrow skips it).

    Refused where it is not UTF-8, naming the line.
    """
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = line + block.count(b"\n", 0, exc.start)
        raise TableUnreadable(f"line {where} holds text that is not UTF-8") from exc
    return text.removeprefix("\ufeff") if line == 1 else text


def _walk_error(exc: ValueError | RecursionError, text: str, line: int) -> TableUnreadable:
    if isinstance(exc, json.JSONDecodeError):
        where = line + text.count("\n", 0, exc.pos)
        return TableUnreadable(
            f"the table cannot be read: JSON parse error on line {where}: {exc.msg}"
        )
    return TableUnreadable(f"the table cannot be read: a value nests too deep ({exc})")


def object_at(text: str, row: int) -> tuple[int, list[str]]:
    """The line (from 0) the object `row` (from 0) of `text` starts on, and its names."""
    for number, (start, members) in enumerate(objects(text)):
        if number == row:
            return text.count("\n", 0, start), [name for name, *_ in members]
    return 0, []


def without(block: bytes, line: int, names: Collection[str]) -> bytes:
    """The objects of `block` without the fields `names`, one a line, as written otherwise."""
    text = decoded(block, line)
    kept = []
    try:
        for _, members in objects(text):
            inner = ",".join(text[at:end] for name, at, _, end, _ in members if name not in names)
            kept.append("{" + inner + "}")
    except (ValueError, RecursionError) as exc:
        raise _walk_error(exc, text, line) from exc
    return "\n".join(kept).encode() + b"\n"


def text_columns(block: bytes, line: int, names: list[str]) -> dict[str, pa.Array]:
    """The fields `names` of each object in `block`, as their JSON text (a string as itself).

    Raises:
        TableUnreadable: the block is not JSON objects, or not UTF-8.
    """
    text = decoded(block, line)
    wanted = set(names)
    values: dict[str, list[str | None]] = {name: [] for name in names}
    try:
        for _, members in objects(text):
            row = {
                key: value if value is None or type(value) is str else text[at:end]
                for key, _, at, end, value in members
                if key in wanted
            }
            for name in names:
                values[name].append(row.get(name))
    except (ValueError, RecursionError) as exc:
        raise _walk_error(exc, text, line) from exc
    return {name: pa.array(column, pa.string()) for name, column in values.items()}


def scan_names(
    block: bytes,
    line: int,
    known: Collection[str] | None,
    bounds: TableBounds,
    nested: dict[str, pa.DataType] | None = None,
) -> tuple[dict[str, int], bool]:
    """New names, each with the line it first appears on; whether a nested key is new.

    The names of `block` not in `known` (None: not asked), and whether a field of `nested`
    holds a key its type lacks. Text that is not JSON objects ends the scan: pyarrow says
    what is wrong with it.

    Raises:
        TableTooLarge: the names known and found pass the column bound.
    """
    seen = set() if known is None else set(known)
    new: dict[str, int] = {}
    try:  # a line the fast way fails (two objects, or one over lines) walks the block again
        return _scan(_by_line(block, line), seen, known is not None, new, bounds, nested or {})
    except _NotOneALine:
        return _scan(_walked(block, line), seen, known is not None, new, bounds, nested or {})


class _NotOneALine(Exception):
    """A line that does not hold one JSON object: the block is walked by Python's scanner."""


def _by_line(block: bytes, line: int) -> Iterator[tuple[int, object]]:
    import orjson  # here: ~11 ms that a slice of another format need not pay (as `_encoders`)

    start = block.removeprefix(_BOM) if line == 1 else block
    for number, text in enumerate(start.split(b"\n")):
        try:
            row = orjson.loads(text)
        except orjson.JSONDecodeError:
            if text.strip(b" \t\r"):
                raise _NotOneALine from None
            continue
        if not isinstance(row, dict):
            raise _NotOneALine
        yield line + number, row


def _walked(block: bytes, line: int) -> Iterator[tuple[int, object]]:
    try:
        text = decoded(block, line)
        at, number = 0, line
        for start, members in objects(text):
            number += text.count("\n", at, start)
            at = start
            yield number, {name: value for name, _, _, _, value in members}
    except (ValueError, RecursionError):
        return  # pyarrow's parse of the block says what is wrong with it


def _scan(
    rows: Iterator[tuple[int, object]],
    seen: set[str],
    names: bool,
    new: dict[str, int],
    bounds: TableBounds,
    nested: dict[str, pa.DataType],
) -> tuple[dict[str, int], bool]:
    for number, row in rows:
        assert isinstance(row, dict)
        if names and not row.keys() <= seen:
            for name in row:
                if name not in seen:
                    seen.add(name)
                    new[name] = number
            check_width(len(seen), bounds)
        for name, dtype in nested.items():
            if _lacks_a_key(row.get(name), dtype):
                return new, True
    return new, False


def _lacks_a_key(value: object, dtype: pa.DataType) -> bool:
    """Whether an object in `value` holds a key its struct type in `dtype` lacks."""
    stack = [(value, dtype)]
    while stack:
        item, kind = stack.pop()
        if isinstance(item, dict) and pa.types.is_struct(kind):
            names = {f.name: f.type for f in kind}
            if not item.keys() <= names.keys():
                return True
            stack.extend((v, names[k]) for k, v in item.items())
        elif isinstance(item, list) and pa.types.is_list(kind):
            stack.extend((v, kind.value_type) for v in item)
    return False


def check_json_integers(block: bytes, names: list[str]) -> None:
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
            row = json.loads(line, parse_int=json_integer)
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


def _long_integer(value: object) -> str | None:
    """The first integer beyond int64 anywhere in a parsed JSON value, walked without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, LongInteger):
            return item
    return None
