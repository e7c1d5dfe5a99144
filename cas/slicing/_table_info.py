"""What a table's footer says, for `artmem show`: schema, rows, row groups, sizes, statistics.

Nothing here decodes data pages: Parquet's footer holds every figure. It runs in the bounded
child of `_isolated` (pyarrow aborts the process on some malformed footers' column-chunk
metadata), and the description crosses back as JSON (`info_from_answer`). An Arrow IPC footer
holds the schema and where each record batch lies; each batch's message header gives its rows
(read for up to `MAX_LISTED_ROW_GROUPS` batches). A text table (CSV, JSON Lines) has no footer
at all: its schema is inferred (`_text_tables`), and its row count would need the whole file,
so it is unknown.
"""

from __future__ import annotations

import datetime as dt
import decimal

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from cards.errors import TableUnreadable
from cas.slicing._json_lines import JsonLinesTable
from cas.slicing._media import ARROW_FILE, PARQUET
from cas.slicing._tables import IpcTable, ParquetTable, TableFile
from cas.slicing._text_tables import CsvTable

MAX_LISTED_ROW_GROUPS = 1_000
MAX_SHOWN_CHARS = 100
_NO_COUNT = "a text table holds no row count or statistics"
_NO_STATS = "an Arrow IPC file holds no column statistics"

Shown = str | int | float | bool


class FieldInfo(msgspec.Struct, frozen=True):
    """One top-level field of the table's Arrow schema."""

    name: str
    type: str
    nullable: bool


class ColumnStats(msgspec.Struct, frozen=True):
    """Totals over all row groups of one Parquet leaf column; None where a footer is silent."""

    path: str
    compressed_bytes: int
    uncompressed_bytes: int
    null_count: int | None
    min: Shown | None
    max: Shown | None


class RowGroupInfo(msgspec.Struct, frozen=True):
    """One row group (or record batch) and its sizes."""

    rows: int
    compressed_bytes: int
    uncompressed_bytes: int


class TableInfo(msgspec.Struct, frozen=True):
    """A table's shape from its footer, plus the cost of reading that footer."""

    media_type: str
    fields: tuple[FieldInfo, ...]
    num_rows: int | None
    num_row_groups: int
    row_groups: tuple[RowGroupInfo, ...]
    compressed_bytes: int | None
    uncompressed_bytes: int | None
    columns: tuple[ColumnStats, ...]
    created_by: str | None
    bytes_read: int = 0
    chunks_verified: int = 0
    notes: tuple[str, ...] = ()


def table_info(table: TableFile, media_type: str) -> TableInfo:
    """Describe an open table of `media_type` from its footer (or a text table's first block)."""
    fields = tuple(FieldInfo(f.name, str(f.type), f.nullable) for f in table.schema)
    if isinstance(table, ParquetTable):
        return _parquet_info(table, fields)
    declared = isinstance(table, CsvTable) and bool(table.declared)
    read_as = (
        (table.delimiter_note,) if isinstance(table, CsvTable) and table.delimiter_note else ()
    )
    if isinstance(table, CsvTable | JsonLinesTable) and table.typed_whole_file:
        inferred = "column types are inferred over the whole file"
        inferred += ", except the declared ones (csv types on the card)" if declared else ""
        return _unmeasured(media_type, fields, 0, *read_as, inferred, *table.notes, _NO_COUNT)
    if isinstance(table, CsvTable | JsonLinesTable):
        size = table.reader.size
        if size <= table.block:
            seen = "the whole file"
        else:
            seen = f"the first {table.block} bytes of {size}"
        note = f"column types are inferred from {seen}"
        note += ", except the declared ones (csv types on the card)" if declared else ""
        if isinstance(table, CsvTable):
            note += "; a slice widens a column whose later values do not fit, and says so"
            return _unmeasured(media_type, fields, 0, *read_as, note, _NO_COUNT)
        note += (
            "; a slice widens a field whose later values do not fit, and reads fields that "
            "first appear later, and says so"
        )
        return _unmeasured(media_type, fields, 0, note, *table.notes, _NO_COUNT)
    assert isinstance(table, IpcTable)
    return _ipc_info(table, fields)


def _unmeasured(
    media_type: str, fields: tuple[FieldInfo, ...], batches: int, *notes: str
) -> TableInfo:
    return TableInfo(
        media_type=media_type,
        fields=fields,
        num_rows=None,
        num_row_groups=batches,
        row_groups=(),
        compressed_bytes=None,
        uncompressed_bytes=None,
        columns=(),
        created_by=None,
        notes=notes,
    )


def _ipc_info(table: IpcTable, fields: tuple[FieldInfo, ...]) -> TableInfo:
    """Rows and sizes from each record batch's message header (no buffer is decoded).

    Past `MAX_LISTED_ROW_GROUPS` batches the headers are not read (each may lie in another
    chunk, which must be verified): the row count is then unknown.
    """
    count = table.num_batches
    if count > MAX_LISTED_ROW_GROUPS:
        note = f"the row count is not read from more than {MAX_LISTED_ROW_GROUPS} record batches"
        return _unmeasured(ARROW_FILE, fields, count, note, _NO_STATS)
    layout = table.layout()
    every = range(len(table.schema))
    groups = tuple(
        RowGroupInfo(layout.rows(i), layout.batches[i].body, layout.declared(i, every))
        for i in range(count)
    )
    return TableInfo(
        media_type=ARROW_FILE,
        fields=fields,
        num_rows=sum(g.rows for g in groups),
        num_row_groups=count,
        row_groups=groups,
        compressed_bytes=sum(g.compressed_bytes for g in groups),
        uncompressed_bytes=sum(g.uncompressed_bytes for g in groups),
        columns=(),
        created_by=None,
        notes=(_NO_STATS,),
    )


def _parquet_info(table: ParquetTable, fields: tuple[FieldInfo, ...]) -> TableInfo:
    meta = table.metadata
    totals = [_Totals(meta.schema.column(j)) for j in range(meta.num_columns)]
    groups: list[RowGroupInfo] = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        compressed = uncompressed = 0
        for j, total in enumerate(totals):
            column = group.column(j)
            total.add(column)
            compressed += column.total_compressed_size
            uncompressed += column.total_uncompressed_size
        if g < MAX_LISTED_ROW_GROUPS:
            groups.append(RowGroupInfo(group.num_rows, compressed, uncompressed))
    columns = tuple(total.stats() for total in totals)
    notes: tuple[str, ...] = ()
    if meta.num_row_groups > MAX_LISTED_ROW_GROUPS:
        notes = (f"only the first {MAX_LISTED_ROW_GROUPS} row groups are listed",)
    return TableInfo(
        media_type=PARQUET,
        fields=fields,
        num_rows=meta.num_rows,
        num_row_groups=meta.num_row_groups,
        row_groups=tuple(groups),
        compressed_bytes=sum(c.compressed_bytes for c in columns),
        uncompressed_bytes=sum(c.uncompressed_bytes for c in columns),
        columns=columns,
        created_by=_shown_text(meta.created_by) if meta.created_by else None,
        notes=notes,
    )


def info_as_answer(info: TableInfo) -> dict[str, object]:
    """A `TableInfo` as the JSON-ready value a child answers."""
    return msgspec.to_builtins(info)  # type: ignore[no-any-return]  # a struct: a dict


def info_from_answer(answer: object) -> TableInfo:
    """Rebuild a `TableInfo` from the JSON a child answered, refusing any other shape.

    Raises:
        TableUnreadable: the answer has another shape.
    """
    try:
        if not isinstance(answer, dict):
            raise TypeError("not an object")
        doc = dict(answer)
        doc["fields"] = tuple(FieldInfo(**f) for f in doc["fields"])
        doc["row_groups"] = tuple(RowGroupInfo(**g) for g in doc["row_groups"])
        doc["columns"] = tuple(ColumnStats(**c) for c in doc["columns"])
        doc["notes"] = tuple(str(n) for n in doc["notes"])
        return TableInfo(**doc)
    except (KeyError, TypeError) as exc:
        raise TableUnreadable("the table's metadata check answered nonsense") from exc


class _Totals:
    """Running totals of one leaf column across row groups."""

    def __init__(self, column: pq.ColumnSchema) -> None:
        self.path = column.path
        self.compressed = self.uncompressed = 0
        # A leaf inside a list counts an empty list (and a null list) as a null: not the nulls
        # a person means, so none is shown.
        self.nulls: int | None = 0 if column.max_repetition_level == 0 else None
        self.low: object = None
        self.high: object = None
        self.ranged = True

    def add(self, column: pq.ColumnChunkMetaData) -> None:
        self.compressed += column.total_compressed_size
        self.uncompressed += column.total_uncompressed_size
        stats = column.statistics if column.is_stats_set else None
        if stats is None or not stats.has_null_count or self.nulls is None:
            self.nulls = None
        else:
            self.nulls += stats.null_count
        self.ranged = self.ranged and stats is not None and stats.has_min_max
        if self.ranged and stats is not None:
            self._widen(stats)

    def _widen(self, stats: pq.Statistics) -> None:
        try:
            low, high = stats.min, stats.max
            self.low = low if self.low is None or low < self.low else self.low
            self.high = high if self.high is None or high > self.high else self.high
        except (pa.ArrowException, TypeError, ValueError):
            self.ranged = False  # a logical type pyarrow cannot convert, or values that don't order

    def stats(self) -> ColumnStats:
        return ColumnStats(
            path=_shown_text(self.path),
            compressed_bytes=self.compressed,
            uncompressed_bytes=self.uncompressed,
            null_count=self.nulls,
            min=_shown(self.low) if self.ranged else None,
            max=_shown(self.high) if self.ranged else None,
        )


def _shown(value: object) -> Shown | None:
    """A statistic as a short JSON-ready value."""
    if isinstance(value, float):
        return value + 0.0  # a writer stores a zero minimum as -0.0 (the Parquet spec says so)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, bytes):
        return _shown_text(value.hex())
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return _shown_text(str(value))


def _shown_text(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"
