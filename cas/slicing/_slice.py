"""Bounded, verified slices of recorded tables, and what their footers say.

A slice projects columns, filters rows with the language of `_expr`, skips `offset` matching
rows, and keeps at most `limit` rows and `max_bytes` materialised bytes, in file order, so pages
are reproducible. Reaching a bound stops reading at once and the result says which bound it was;
`truncated` then means "reading stopped early": when exactly `limit` rows remain it is set
although nothing follows, because finding that out could mean reading the rest of the file.

Every byte a slice reads is proven against the chunk manifest its card binds (`_reader`),
so a 1% slice hashes about 1% of the object; resolve, which hands out a path, keeps full SHA-256.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field, replace

import pyarrow as pa

from cards.errors import (
    ArtifactError,
    InvalidInput,
    LimitExceeded,
    TableUnreadable,
    UnknownColumn,
)
from cas.slicing._expr import Node, filter_columns, parse_filter
from cas.slicing._expr_check import compile_filter
from cas.slicing._limits import DEFAULT_SLICE_LIMITS, SliceLimits
from cas.slicing._reader import (
    ReadStats,
    SliceSource,
    VerifiedReader,
    load_manifest,
    verified_object,
)
from cas.slicing._table_info import TableInfo, table_info
from cas.slicing._tables import Scan, TableFile, check_media_type, open_table

ROW_LIMIT = "row_limit"
BYTE_BUDGET = "byte_budget"
_MAX_OFFSET = 2**63 - 1


@dataclass(frozen=True, slots=True)
class SliceRequest:
    """What to read; `limit` and `max_bytes` default to the operator's ceilings."""

    columns: tuple[str, ...] | None = None
    where: str | None = None
    limit: int | None = None
    offset: int = 0
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class SliceResult:
    """A bounded slice and what reading it cost."""

    table: pa.Table
    rows: int
    truncated: bool
    truncated_reason: str | None
    bytes: int
    columns: list[str]
    bytes_read: int
    chunks_verified: int
    batches_read: int


def read_slice(
    source: SliceSource, request: SliceRequest, *, limits: SliceLimits | None = None
) -> SliceResult:
    """Read a bounded slice of a recorded table, proving every chunk it reads.

    Raises:
        InvalidInput: the request is malformed (`FilterSyntaxError`, `FilterTypeError` and
            `UnknownColumn` say what and where; `UnsupportedMediaType` names what is supported).
        LimitExceeded: the request asks for more than the limits allow; `TableTooLarge` when
            the table's footer, width or a single read exceeds them.
        TableUnreadable: the bytes are intact but not a readable table.
        ObjectMissing: there is no object at `source.path`.
        IntegrityError: the manifest, the object's size or a chunk read differs from the card.
        StoreIOError: the object could not be read.
    """
    limits = limits or DEFAULT_SLICE_LIMITS
    limit, max_bytes = _check_request(request, limits)
    media_type = check_media_type(source.media_type)
    node = (
        None
        if request.where is None
        else parse_filter(request.where, max_chars=limits.max_filter_chars)
    )
    manifest = load_manifest(source)
    with verified_object(source, manifest, max_read_bytes=limits.max_read_bytes) as reader:
        with _table_errors(reader):
            table_file = open_table(media_type, reader, limits.table_bounds)
            scan = _plan(table_file.schema, request, node, limit)
            collected = _collect(table_file, scan, request.offset, limit, max_bytes)
        return _result(collected, reader.stats)


def describe(source: SliceSource, *, limits: SliceLimits | None = None) -> TableInfo:
    """Describe a recorded table from its footer alone, proving the chunks it reads.

    Raises:
        UnsupportedMediaType: the card's media type is not a supported table format.
        TableTooLarge: the footer or the column count exceeds the limits.
        TableUnreadable: the bytes are intact but not a readable table.
        ObjectMissing: there is no object at `source.path`.
        IntegrityError: the manifest, the object's size or a chunk read differs from the card.
        StoreIOError: the object could not be read.
    """
    limits = limits or DEFAULT_SLICE_LIMITS
    media_type = check_media_type(source.media_type)
    manifest = load_manifest(source)
    with verified_object(source, manifest, max_read_bytes=limits.max_read_bytes) as reader:
        with _table_errors(reader):
            info = table_info(open_table(media_type, reader, limits.table_bounds))
        stats = reader.stats
    return replace(info, bytes_read=stats.bytes_read, chunks_verified=stats.chunks_verified)


def _check_request(request: SliceRequest, limits: SliceLimits) -> tuple[int, int]:
    limit = limits.max_rows if request.limit is None else request.limit
    max_bytes = limits.max_bytes if request.max_bytes is None else request.max_bytes
    _check_int("limit", limit, 0, limits.max_rows)
    _check_int("offset", request.offset, 0, _MAX_OFFSET)
    _check_int("max_bytes", max_bytes, 1, limits.max_bytes)
    if request.where is not None and not isinstance(request.where, str):
        raise InvalidInput("where must be a string")
    columns = request.columns
    if columns is not None:
        if len(columns) > limits.max_columns:
            raise LimitExceeded(
                f"more than {limits.max_columns} columns requested", limit=limits.max_columns
            )
        if not all(isinstance(name, str) and name for name in columns):
            raise InvalidInput("column names must be non-empty strings")
        if len(set(columns)) != len(columns):
            raise InvalidInput("a column is requested more than once")
    return limit, max_bytes


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidInput(f"{name} must be an integer of at least {low}")
    if value > high:
        raise LimitExceeded(f"{name} {value} is above the configured maximum of {high}", limit=high)


def _plan(schema: pa.Schema, request: SliceRequest, node: Node | None, limit: int) -> Scan:
    columns = list(schema.names) if request.columns is None else list(request.columns)
    for name in columns:
        if schema.get_field_index(name) < 0:
            raise UnknownColumn(name, schema.names)
    expression = None if node is None else compile_filter(node, schema)
    needed = frozenset(columns) | (frozenset() if node is None else filter_columns(node))
    skip = request.offset if node is None else 0
    return Scan(columns, expression, needed, skip, limit)


@dataclass(slots=True)
class _Collected:
    schema: pa.Schema
    batches: list[pa.RecordBatch] = field(default_factory=list)
    rows: int = 0
    nbytes: int = 0
    seen: int = 0
    reason: str | None = None


def _collect(table: TableFile, scan: Scan, offset: int, limit: int, max_bytes: int) -> _Collected:
    out = _Collected(pa.schema([table.schema.field(name) for name in scan.columns]))
    if limit == 0:
        out.reason = ROW_LIMIT
        return out
    skipped, batches = table.batches(scan)
    offset -= skipped
    with contextlib.closing(_generator(batches)) as stream:
        for batch in stream:
            out.seen += 1
            if offset >= batch.num_rows:
                offset -= batch.num_rows
                continue
            _take(out, batch.slice(offset), limit, max_bytes)
            offset = 0
            if out.reason is not None:
                break
    return out


def _take(out: _Collected, batch: pa.RecordBatch, limit: int, max_bytes: int) -> None:
    """Keep the prefix of `batch` that fits both bounds; note the bound that was reached."""
    rows = min(batch.num_rows, limit - out.rows)
    fits = _rows_within(batch, rows, max_bytes - out.nbytes)
    if fits < rows:
        out.reason = BYTE_BUDGET
    elif out.rows + rows == limit:
        out.reason = ROW_LIMIT
    if fits:
        kept = batch.slice(0, fits)
        out.schema = kept.schema
        out.batches.append(kept)
        out.rows += fits
        out.nbytes += kept.nbytes


def _rows_within(batch: pa.RecordBatch, rows: int, budget: int) -> int:
    """The most leading rows of `batch` (at most `rows`) whose materialised size fits `budget`."""
    if batch.slice(0, rows).nbytes <= budget:
        return rows
    low, high = 0, rows  # the first `low` rows fit; the first `high` do not
    while high - low > 1:
        middle = (low + high) // 2
        if batch.slice(0, middle).nbytes <= budget:
            low = middle
        else:
            high = middle
    return low


def _generator(batches: Iterator[pa.RecordBatch]) -> Generator[pa.RecordBatch, None, None]:
    """Wrap `batches` so that closing the wrapper closes it (and cancels read-ahead) at once."""
    try:
        yield from batches
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def _result(collected: _Collected, stats: ReadStats) -> SliceResult:
    table = pa.Table.from_batches(collected.batches, schema=collected.schema)
    return SliceResult(
        table=table,
        rows=table.num_rows,
        truncated=collected.reason is not None,
        truncated_reason=collected.reason,
        bytes=table.nbytes,
        columns=table.column_names,
        bytes_read=stats.bytes_read,
        chunks_verified=stats.chunks_verified,
        batches_read=collected.seen,
    )


@contextlib.contextmanager
def _table_errors(reader: VerifiedReader) -> Iterator[None]:
    """Translate pyarrow's failures into `TableUnreadable`, or into what our reader raised."""
    try:
        yield
    except ArtifactError:
        raise
    except (pa.ArrowException, OSError, MemoryError, UnicodeError) as exc:
        if reader.failure is not None:  # pyarrow wrapped it: an integrity failure stays one
            raise reader.failure from exc
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise TableUnreadable(f"the table cannot be read: {message}") from exc
