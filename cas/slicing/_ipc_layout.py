"""Arrow IPC file layout: what a record batch declares it decodes to, read before pyarrow does.

An IPC file's footer lists its dictionary and record-batch blocks; each block is a message, a
flatbuffer header and then a body of buffers. In a compressed body each buffer starts with its
decompressed length, which pyarrow allocates before decompressing: a 49 KB file can claim
1.6 GB. `IpcLayout` reads the footer and the message headers itself, with a minimal flatbuffer
reader that checks every offset against the bytes, and sums the declared decoded sizes of the
buffers a read needs, so a batch over the bound is refused before pyarrow decodes it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import msgspec
import pyarrow as pa

from cards.errors import TableTooLarge, TableUnreadable
from cas.slicing._reader import VerifiedReader

_CONTINUATION = b"\xff\xff\xff\xff"
_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3
_BLOCK = struct.Struct("<qi4xq")  # offset, metadata length, body length
_PAIR = struct.Struct("<qq")  # FieldNode (length, nulls) and Buffer (offset, length)


class Block(msgspec.Struct, frozen=True):
    """Where one message lies: its offset, its header's length, and its body's length."""

    offset: int
    metadata: int
    body: int


class _Flat:
    """A flatbuffer table in `data` at `pos`; every read is checked against the bytes."""

    def __init__(self, data: memoryview, pos: int) -> None:
        self.data = data
        self.pos = pos
        self.vtable = pos - _unpack("<i", data, pos)
        self.vtable_bytes = _unpack("<H", data, self.vtable)

    @classmethod
    def root(cls, data: memoryview) -> _Flat:
        return cls(data, _unpack("<I", data, 0))

    def _field(self, index: int) -> int:
        slot = 4 + 2 * index
        if slot + 2 > self.vtable_bytes:
            return 0
        relative = _unpack("<H", self.data, self.vtable + slot)
        return self.pos + relative if relative else 0

    def scalar(self, index: int, fmt: str) -> int:
        at = self._field(index)
        return _unpack(fmt, self.data, at) if at else 0

    def table(self, index: int) -> _Flat | None:
        at = self._field(index)
        return _Flat(self.data, at + _unpack("<I", self.data, at)) if at else None

    def structs(self, index: int, layout: struct.Struct) -> list[tuple[int, ...]]:
        at = self._field(index)
        if not at:
            return []
        start = at + _unpack("<I", self.data, at)
        count = _unpack("<I", self.data, start)
        if start + 4 + count * layout.size > len(self.data):
            raise _malformed()
        return [layout.unpack_from(self.data, start + 4 + i * layout.size) for i in range(count)]


def _unpack(fmt: str, data: memoryview, at: int) -> int:
    size = struct.calcsize(fmt)
    if at < 0 or at + size > len(data):
        raise _malformed()
    value: int = struct.unpack_from(fmt, data, at)[0]
    return value


def _malformed() -> TableUnreadable:
    return TableUnreadable("the Arrow file's metadata is malformed (an offset is out of range)")


class IpcLayout:
    """The blocks of an Arrow IPC file, and the declared decoded size of what a read needs."""

    def __init__(self, reader: VerifiedReader, schema: pa.Schema, *, max_decoded: int) -> None:
        """Read the footer: the file ends with the footer, its int32 length and `ARROW1`.

        Raises:
            TableUnreadable: the footer is malformed.
            IntegrityError: a chunk read differs from its manifest digest.
        """
        self._reader = reader
        self._bound = max_decoded
        length = int.from_bytes(reader.peek(reader.size - 10, 4), "little", signed=True)
        footer = _Flat.root(reader.peek(reader.size - 10 - length, length))
        self.dictionaries = [Block(*b) for b in footer.structs(2, _BLOCK)]
        self.batches = [Block(*b) for b in footer.structs(3, _BLOCK)]
        self._spans = _field_buffers(schema)

    def check_dictionaries(self) -> None:
        """Refuse a file whose dictionaries together declare more decoded bytes than the bound.

        pyarrow reads every dictionary before the first record batch.

        Raises:
            TableTooLarge: they do.
            TableUnreadable: a message header is malformed.
        """
        total = sum(self._decoded(block, _DICTIONARY_BATCH, None) for block in self.dictionaries)
        self._refuse_over(total, "the dictionaries of the Arrow file declare")

    def check_batch(self, index: int, fields: Iterable[int]) -> None:
        """Refuse record batch `index` if the buffers of `fields` declare more than the bound.

        Raises:
            TableTooLarge: they do.
            TableUnreadable: the message header is malformed.
        """
        self._refuse_over(
            self.declared(index, fields), f"record batch {index} of the Arrow file declares"
        )

    def declared(self, index: int, fields: Iterable[int]) -> int:
        """The decoded bytes the buffers of `fields` in record batch `index` declare.

        All the batch's buffers count when its layout does not match the schema's.

        Raises:
            TableUnreadable: there is no such batch, or its message header is malformed.
        """
        if not 0 <= index < len(self.batches):
            raise TableUnreadable(f"the Arrow file has no record batch {index}")
        return self._decoded(self.batches[index], _RECORD_BATCH, frozenset(fields))

    def rows(self, index: int) -> int:
        """The row count record batch `index` declares in its message header.

        Raises:
            TableUnreadable: there is no such batch, or its header is malformed or negative.
        """
        if not 0 <= index < len(self.batches):
            raise TableUnreadable(f"the Arrow file has no record batch {index}")
        rows = self._batch_header(self.batches[index], _RECORD_BATCH).scalar(0, "<q")
        if rows < 0:
            raise TableUnreadable(f"record batch {index} of the Arrow file declares {rows} rows")
        return rows

    def _refuse_over(self, total: int, what: str) -> None:
        if total > self._bound:
            raise TableTooLarge(
                f"{what} {total} decoded bytes, more than the {self._bound}-byte bound on one "
                "decode",
                limit=self._bound,
            )

    def _decoded(self, block: Block, kind: int, fields: frozenset[int] | None) -> int:
        batch = self._batch_header(block, kind)
        buffers = batch.structs(2, _PAIR)
        wanted: Iterable[int] = range(len(buffers))
        spans = self._spans
        if fields is not None and spans is not None and spans[-1][1] == len(buffers):
            wanted = {i for f in fields if 0 <= f < len(spans) for i in range(*spans[f])}
        body = block.offset + block.metadata
        compressed = batch.table(3) is not None
        return sum(self._buffer_size(body, *buffers[i], compressed=compressed) for i in wanted)

    def _batch_header(self, block: Block, kind: int) -> _Flat:
        if block.offset < 0 or not 8 <= block.metadata <= self._reader.size:
            raise _malformed()
        raw = self._reader.peek(block.offset, block.metadata)
        start = 8 if bytes(raw[:4]) == _CONTINUATION else 4
        message = _Flat.root(raw[start:])
        header_type, header = message.scalar(1, "<B"), message.table(2)
        if header is not None and kind == _DICTIONARY_BATCH and header_type == kind:
            header = header.table(1)
        if header is None or header_type != kind:
            raise TableUnreadable("an Arrow message is not the kind its footer block says")
        return header

    def _buffer_size(self, body: int, offset: int, length: int, *, compressed: bool) -> int:
        if not compressed or length < 8:
            return max(0, length)
        declared = int.from_bytes(self._reader.peek(body + offset, 8), "little", signed=True)
        if declared == -1:  # this buffer was left uncompressed
            return length - 8
        return declared if declared >= 0 else length


def _field_buffers(schema: pa.Schema) -> list[tuple[int, int]] | None:
    """Each top-level field's range of body buffers, or None for a layout not known here."""
    spans: list[tuple[int, int]] = []
    start = 0
    for field in schema:
        count = _buffer_count(field.type)
        if count is None:
            return None
        spans.append((start, start + count))
        start += count
    return spans or None


def _buffer_count(dtype: pa.DataType) -> int | None:
    """How many body buffers an array of `dtype` has, children included (format version 5)."""
    types = pa.types
    if types.is_dictionary(dtype):
        return 2  # the indices; the values are in their own dictionary batch
    if isinstance(dtype, pa.ExtensionType):
        return _buffer_count(dtype.storage_type)
    own: int | None = None
    if types.is_null(dtype) or types.is_run_end_encoded(dtype):
        own = 0
    elif types.is_binary(dtype) or types.is_string(dtype):
        own = 3
    elif types.is_large_binary(dtype) or types.is_large_string(dtype):
        own = 3
    elif types.is_list(dtype) or types.is_large_list(dtype) or types.is_map(dtype):
        own = 2
    elif types.is_list_view(dtype) or types.is_large_list_view(dtype):
        own = 3
    elif types.is_fixed_size_list(dtype) or types.is_struct(dtype):
        own = 1
    elif types.is_union(dtype):
        own = 1 if dtype.mode == "sparse" else 2
    elif dtype.num_fields == 0 and not (types.is_binary_view(dtype) or types.is_string_view(dtype)):
        own = 2  # validity and values: every fixed-width type
    if own is None:
        return None  # views carry a variable number of buffers
    children = [_buffer_count(dtype.field(i).type) for i in range(dtype.num_fields)]
    if any(child is None for child in children):
        return None
    return own + sum(child for child in children if child is not None)
