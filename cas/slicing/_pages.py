"""Parquet page headers: each page's declared size, checked before pyarrow decompresses it.

A Parquet column chunk is a run of pages, each a Thrift `PageHeader` (compact protocol) and then
`compressed_page_size` bytes; pyarrow allocates `uncompressed_page_size` bytes and decompresses
into them, so a 50 KB file can claim gigabytes. A `PageWatch` follows the headers of the column
chunks a scan reads, as the verified reader serves their bytes to pyarrow (which reads a chunk
front to back): each header is parsed here from checked bytes, and a page that declares more
than the bound is refused before pyarrow sees its header.

Following is lenient: a header this module cannot parse ends the watch of its column chunk
(pyarrow then reports the malformed page itself; the child's address-space limit remains).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import msgspec

from cards.errors import TableTooLarge
from cas.slicing._reader import VerifiedReader

MAX_DEPTH = 16
_FIRST_READS = (1 << 10, 1 << 16)  # most headers are tens of bytes; statistics make them longer
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE = 1, 2, 3, 4, 5, 6, 7
_BINARY, _LIST, _SET, _MAP, _STRUCT = 8, 9, 10, 11, 12


class Incomplete(Exception):
    """The bytes end inside the header."""


class Malformed(Exception):
    """The bytes are not a compact-protocol page header."""


class PageHeader(msgspec.Struct, frozen=True):
    """What a page header declares, and its own length in bytes."""

    header_bytes: int
    page_type: int
    uncompressed: int
    compressed: int


def parse_page_header(data: memoryview | bytes) -> PageHeader:
    """Parse the `PageHeader` at the start of `data`.

    Raises:
        Incomplete: `data` ends before the header does.
        Malformed: the bytes are not a page header with its three required sizes.
    """
    cursor = _Cursor(memoryview(data))
    fields = cursor.struct(MAX_DEPTH)
    sizes = [fields.get(field) for field in (1, 2, 3)]
    if not all(isinstance(size, int) and not isinstance(size, bool) for size in sizes):
        raise Malformed("a page header lacks its type or sizes")
    page_type, uncompressed, compressed = (int(size) for size in sizes)  # type: ignore[arg-type]
    if uncompressed < 0 or compressed < 0:
        raise Malformed("a page header declares a negative size")
    return PageHeader(cursor.pos, page_type, uncompressed, compressed)


class _Cursor:
    """Reads Thrift compact-protocol values, keeping the integers of a struct's own fields."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise Incomplete
        value = int(self.data[self.pos])
        self.pos += 1
        return value

    def skip(self, count: int) -> None:
        if count < 0:
            raise Malformed("a negative length")
        self.pos += count
        if self.pos > len(self.data):
            raise Incomplete

    def varint(self) -> int:
        shift = value = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise Malformed("a varint longer than ten bytes")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def struct(self, depth: int) -> dict[int, int | bool]:
        if depth <= 0:
            raise Malformed("structs nested too deeply")
        fields: dict[int, int | bool] = {}
        last = 0
        while (head := self.byte()) != 0:
            kind, delta = head & 0x0F, head >> 4
            last = last + delta if delta else self.zigzag()
            if kind in (_BOOL_TRUE, _BOOL_FALSE):  # a struct field's boolean is in its type
                fields[last] = kind == _BOOL_TRUE
            elif (value := self.value(kind, depth)) is not None:
                fields[last] = value
        return fields

    def value(self, kind: int, depth: int) -> int | None:
        if kind in (_I16, _I32, _I64):
            return self.zigzag()
        if kind in (_BOOL_TRUE, _BOOL_FALSE, _BYTE):  # inside a list or map: one byte
            self.skip(1)
        elif kind == _DOUBLE:
            self.skip(8)
        elif kind == _BINARY:
            self.skip(self.varint())
        elif kind in (_LIST, _SET):
            head = self.byte()
            count = head >> 4 if head >> 4 != 15 else self.varint()
            self.elements(head & 0x0F, count, depth)
        elif kind == _MAP:
            count = self.varint()
            if count:
                types = self.byte()
                self.elements(types, count, depth, pairs=True)
        elif kind == _STRUCT:
            self.struct(depth - 1)
        else:
            raise Malformed(f"unknown compact type {kind}")
        return None

    def elements(self, kinds: int, count: int, depth: int, *, pairs: bool = False) -> None:
        # Every element takes at least one byte, so a forged count ends at the data's end.
        for _ in range(count):
            if pairs:
                self.value(kinds >> 4, depth)
            self.value(kinds & 0x0F, depth)


class PageWatch:
    """Follows the page headers of some column chunks as a `VerifiedReader` serves their bytes.

    Install it as the reader's `watch`; it raises `TableTooLarge` for a page that declares more
    than `max_page_bytes`.
    """

    def __init__(
        self,
        reader: VerifiedReader,
        spans: Iterable[tuple[int, int]],
        *,
        max_page_bytes: int,
        max_header_bytes: int,
    ) -> None:
        ordered = sorted({(start, end) for start, end in spans if 0 <= start < end})
        self._reader = reader
        self._starts = [start for start, _ in ordered]
        self._ends = [end for _, end in ordered]
        self._next = list(self._starts)  # per column chunk, the next header not yet checked
        self._bound = max_page_bytes
        self._reads = (*(r for r in _FIRST_READS if r < max_header_bytes), max_header_bytes)

    def __call__(self, start: int, end: int) -> None:
        """Check every header in the watched column chunks that starts before `end`.

        Raises:
            TableTooLarge: a page declares more decoded bytes than the bound.
        """
        index = bisect.bisect_left(self._starts, end) - 1
        while index >= 0 and self._ends[index] > start:  # column chunks do not overlap
            self._follow(index, end)
            index -= 1

    def _follow(self, index: int, end: int) -> None:
        cursor, chunk_end = self._next[index], self._ends[index]
        while cursor < min(end, chunk_end):
            header = self._header(cursor, chunk_end)
            if header is None:
                cursor = chunk_end  # stop following; pyarrow meets the same bytes
                break
            if header.uncompressed > self._bound:
                raise TableTooLarge(
                    f"a Parquet page declares {header.uncompressed} decoded bytes, more than "
                    f"the {self._bound}-byte bound on one decode",
                    limit=self._bound,
                )
            cursor += header.header_bytes + header.compressed
        self._next[index] = cursor

    def _header(self, offset: int, chunk_end: int) -> PageHeader | None:
        for size in self._reads:
            wanted = min(size, chunk_end - offset)
            try:
                return parse_page_header(self._reader.peek(offset, wanted))
            except Incomplete:
                if wanted < size:
                    return None
            except Malformed:
                return None
        return None
