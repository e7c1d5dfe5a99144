"""The footed table formats: Parquet and Arrow IPC files, read through a verified reader.

Everything here runs in the bounded child of `_isolated`, with pyarrow on one thread per pool
and the system allocator (`prepare_child`). Both formats check the file's trailer (magic bytes
and footer length) against a bound before pyarrow parses any metadata, and cap the number of
columns. Parquet row groups are pruned by their statistics (`pyarrow.dataset`), then the
surviving ones are read lazily with `ParquetFile.iter_batches`, decoding only needed columns
through buffered streams: pages, not whole column chunks, are read at a time, so a huge row
group stays bounded, and nothing is read ahead of the batch being consumed (the dataset scanner
reads row groups ahead, far past a row limit, and hangs on some corrupt footers). Batches are
sized from the needed column chunks' declared sizes, and every page header is checked as it is
read (`_pages`), before pyarrow decompresses the page.

Arrow IPC files are not memory-mapped: a mapped page can change after it was verified, and a
file truncated under a mapping kills the process with SIGBUS. They are read through the same
verified reader, which proves each 4 MiB chunk it touches and hands pyarrow zero-copy views of
the proven bytes; only the record-batch buffers of needed columns are read, after their
declared decoded sizes are checked (`_ipc_layout`).

CSV and JSON Lines, which have no footer, are read by `_text_tables`; `_formats` opens any of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from cards.errors import TableTooLarge, TableUnreadable
from cas.slicing._ipc_layout import IpcLayout
from cas.slicing._limits import TableBounds
from cas.slicing._mask import Predicate
from cas.slicing._media import ARROW_FILE, PARQUET
from cas.slicing._pages import PageWatch
from cas.slicing._reader import VerifiedReader

MIN_BATCH_ROWS = 1 << 10
MAX_BATCH_ROWS = 1 << 17
TARGET_BATCH_BYTES = 8 << 20
STREAM_BUFFER_BYTES = 1 << 20
_MAGIC = {PARQUET: b"PAR1", ARROW_FILE: b"ARROW1"}


class Scan(msgspec.Struct, frozen=True):
    """What to read: output `columns`, an optional filter, every column needed, rows to skip.

    `skip_rows` may be skipped unread (never with a filter); at most `keep_rows` rows are kept.
    The filter's `expression` prunes Parquet row groups by their statistics; its `predicate`
    (the same filter, checked into compute calls) filters each batch by a mask computed by the
    kernels alone, without an Acero plan per batch. A scan has both or neither.
    """

    columns: list[str]
    expression: pc.Expression | None
    needed: frozenset[str]
    skip_rows: int
    keep_rows: int
    predicate: Predicate | None = None


class TableFile(Protocol):
    """An open table: its schema, and a way to stream batches of a scan."""

    schema: pa.Schema

    def batches(self, scan: Scan) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Rows skipped without reading them, and the filtered, projected batches."""
        ...


def prepare_child() -> None:
    """Set pyarrow up for a bounded child: one thread per pool, and the system allocator.

    Each extra thread maps a stack and an allocator arena that the child's address-space bound
    would count; the system allocator maps large buffers afresh, where the bound sees them
    (mimalloc and jemalloc would reuse address space the parent reserved).
    """
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    pa.set_memory_pool(pa.system_memory_pool())


def check_trailer(reader: VerifiedReader, media_type: str, bounds: TableBounds) -> None:
    """Check the magic bytes and footer length at the end of the file, before any parsing.

    Raises:
        TableUnreadable: the file is too short, lacks the magic, or claims an impossible footer.
        TableTooLarge: the footer is longer than `bounds.max_footer_bytes`.
    """
    magic = _MAGIC[media_type]
    tail = 4 + len(magic)
    if reader.size < tail + len(magic):
        raise TableUnreadable("the file is too short to be a table")
    reader.seek(reader.size - tail)
    raw = reader.read(tail)
    reader.seek(0)
    if raw[4:] != magic:
        raise TableUnreadable("the file does not end with its format's magic bytes")
    length = int.from_bytes(raw[:4], "little", signed=True)
    if length <= 0 or length > reader.size - tail:
        raise TableUnreadable(f"the footer claims an impossible length of {length} bytes")
    if length > bounds.max_footer_bytes:
        raise TableTooLarge(
            f"the {length}-byte footer exceeds the {bounds.max_footer_bytes}-byte bound",
            limit=bounds.max_footer_bytes,
        )


def check_width(columns: int, bounds: TableBounds) -> None:
    """Refuse a table with more columns than the bound.

    Raises:
        TableTooLarge: `columns` exceeds `bounds.max_columns`.
    """
    if columns > bounds.max_columns:
        raise TableTooLarge(
            f"the table has {columns} columns, more than the bound of {bounds.max_columns}",
            limit=bounds.max_columns,
        )


class ParquetTable:
    """A Parquet file: row groups pruned by statistics, then read lazily, page by page."""

    def __init__(self, reader: VerifiedReader, bounds: TableBounds) -> None:
        self.reader = reader
        self._file = pa.PythonFile(reader, mode="r")
        self._bounds = bounds
        self._parquet = pq.ParquetFile(
            self._file,
            buffer_size=STREAM_BUFFER_BYTES,
            pre_buffer=False,
            thrift_string_size_limit=bounds.max_footer_bytes,
            arrow_extensions_enabled=False,
        )
        self.metadata = self._parquet.metadata
        check_width(self.metadata.num_columns, bounds)
        self.schema = self._parquet.schema_arrow

    def batches(self, scan: Scan) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Rows skipped by whole row groups, and the scan's batches in file order.

        Raises:
            TableTooLarge: as the batches are read, a page declares more than the bound.
        """
        groups = self._pruned(scan)
        groups, skipped = _skip(groups, self.metadata, scan.skip_rows)
        if not groups:
            return skipped, iter(())
        leaves = _leaf_indices(self.schema, self.metadata.num_columns, scan.needed)
        row_bytes = max(self._row_bytes(group, leaves) for group in groups)
        target = min(TARGET_BATCH_BYTES, self._bounds.max_decoded_bytes // 2)
        rows = min(MAX_BATCH_ROWS, target / row_bytes)
        if scan.expression is None:  # every row read is kept: read no further than needed
            rows = min(rows, max(MIN_BATCH_ROWS, scan.skip_rows - skipped + scan.keep_rows))
        self.reader.watch = PageWatch(
            self.reader,
            (self._chunk_span(group, leaf) for group in groups for leaf in leaves),
            max_page_bytes=self._bounds.max_decoded_bytes,
            max_header_bytes=self._bounds.max_footer_bytes,
        )
        stream = self._parquet.iter_batches(
            batch_size=max(1, int(rows)),
            row_groups=groups,
            columns=[name for name in self.schema.names if name in scan.needed],
            use_threads=False,
        )
        return skipped, filtered(stream, scan)

    def _pruned(self, scan: Scan) -> list[int]:
        """The row groups whose statistics may match the scan's filter, in file order."""
        if scan.expression is None:
            return list(range(self.metadata.num_row_groups))
        options = ds.ParquetFragmentScanOptions(
            thrift_string_size_limit=self._bounds.max_footer_bytes,
            arrow_extensions_enabled=False,
        )
        file_format = ds.ParquetFileFormat(default_fragment_scan_options=options)
        fragment = file_format.make_fragment(pa.PythonFile(self.reader, mode="r"))
        chosen = {group.id for group in fragment.subset(filter=scan.expression).row_groups}
        return sorted(g for g in chosen if 0 <= g < self.metadata.num_row_groups)

    def _row_bytes(self, group: int, leaves: list[int]) -> float:
        """The declared decoded bytes per row of the needed columns of one row group."""
        meta = self.metadata.row_group(group)
        size: int = sum(max(0, meta.column(j).total_uncompressed_size) for j in leaves)
        rows: int = max(1, meta.num_rows)
        return max(1.0, size / rows)

    def _chunk_span(self, group: int, leaf: int) -> tuple[int, int]:
        """Where a column chunk's pages lie, as pyarrow finds them (its dictionary page first)."""
        column = self.metadata.row_group(group).column(leaf)
        start = column.data_page_offset
        dictionary = column.dictionary_page_offset if column.has_dictionary_page else None
        if dictionary is not None and 0 < dictionary < start:
            start = dictionary
        return start, start + max(0, column.total_compressed_size)


def _leaf_indices(schema: pa.Schema, num_leaves: int, names: frozenset[str]) -> list[int]:
    """The Parquet leaf columns of the top-level fields `names` (all, if the shapes disagree)."""
    indices: list[int] = []
    start = 0
    for field in schema:
        count = _leaves(field.type)
        if field.name in names:
            indices.extend(range(start, start + count))
        start += count
    return indices if start == num_leaves else list(range(num_leaves))


def _leaves(dtype: pa.DataType) -> int:
    return sum(_leaves(dtype.field(i).type) for i in range(dtype.num_fields)) or 1


def _skip(groups: list[int], metadata: pq.FileMetaData, skip_rows: int) -> tuple[list[int], int]:
    """Drop leading row groups that lie wholly within the first `skip_rows` rows."""
    skipped = 0
    for position, group in enumerate(groups):
        rows = metadata.row_group(group).num_rows
        if skipped + rows > skip_rows:
            return groups[position:], skipped
        skipped += rows
    return [], skipped


class IpcTable:
    """An Arrow IPC file, read batch by batch with only the needed columns' buffers."""

    def __init__(self, reader: VerifiedReader, bounds: TableBounds) -> None:
        self.reader = reader
        self._bounds = bounds
        self._file = pa.PythonFile(reader, mode="r")
        opened = ipc.open_file(self._file, options=ipc.IpcReadOptions(use_threads=False))
        self.schema = opened.schema
        self.num_batches: int = opened.num_record_batches

    def batches(self, scan: Scan) -> tuple[int, Iterator[pa.RecordBatch]]:
        """Nothing is skipped unread; the batches are filtered and projected in file order.

        Raises:
            TableTooLarge: as the batches are read, the dictionaries or a batch's needed
                columns declare more decoded bytes than the bound.
        """
        wanted = scan.needed or frozenset(self.schema.names[:1])
        fields = sorted(self.schema.get_field_index(name) for name in wanted)
        layout = self.layout()
        options = ipc.IpcReadOptions(
            ensure_alignment=ipc.Alignment.DataTypeSpecific,
            included_fields=fields,
            use_threads=False,
        )
        reader = ipc.open_file(self._file, options=options)
        # IPC buffers are taken as written: without full validation, corrupt offsets make
        # compute kernels read out of bounds (observed as segfaults when fuzzing pyarrow 26).
        return 0, filtered(_checked_batches(reader, layout, fields), scan, validate=True)

    def layout(self) -> IpcLayout:
        """The file's blocks, read from its footer by `IpcLayout`.

        Raises:
            TableUnreadable: the footer is malformed, or lists another number of batches.
        """
        layout = IpcLayout(self.reader, self.schema, max_decoded=self._bounds.max_decoded_bytes)
        if len(layout.batches) != self.num_batches:
            raise TableUnreadable("the Arrow file's footer lists its batches inconsistently")
        return layout


def _checked_batches(
    reader: ipc.RecordBatchFileReader, layout: IpcLayout, fields: list[int]
) -> Iterator[pa.RecordBatch]:
    """Each record batch, once its declared decoded size (and the dictionaries') is checked."""
    for index in range(reader.num_record_batches):
        if index == 0:
            layout.check_dictionaries()  # pyarrow reads them all with the first batch
        layout.check_batch(index, fields)
        yield reader.get_batch(index)


def filtered(
    batches: Iterator[pa.RecordBatch], scan: Scan, *, validate: bool = False
) -> Iterator[pa.RecordBatch]:
    """Apply the scan's filter and projection to each batch, lazily."""
    for batch in batches:
        if validate:
            batch.validate(full=True)
        if scan.predicate is not None:
            batch = scan.predicate.filter(batch)
        yield batch.select(scan.columns)
