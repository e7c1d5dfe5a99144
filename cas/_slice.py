"""Bounded, verified slices of recorded tables, and what their footers say.

A slice projects columns, filters rows with the language of `cas._expr`, skips `offset` matching
rows, and keeps at most `limit` rows and `max_bytes` materialised bytes, in file order, so pages
are reproducible. Reaching a bound stops reading at once and the result says which bound it was;
`truncated` then means "reading stopped early": when exactly `limit` rows remain it is set
although nothing follows, because finding that out could mean reading the rest of the file.

Every byte a slice reads is proven against the chunk manifest its card binds (`cas._verified`),
so a 1% slice hashes about 1% of the object; resolve, which hands out a path, keeps full SHA-256.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import pyarrow as pa

from cards import ExperimentCardV1
from cards.errors import (
    ArtifactError,
    InvalidInput,
    LimitExceeded,
    ObjectMissing,
    TableUnreadable,
    UnknownColumn,
)
from cas._expr import Node, filter_columns, parse_filter
from cas._expr_check import compile_filter
from cas._layout import ProjectLayout
from cas._slice_limits import DEFAULT_SLICE_LIMITS, SliceLimits
from cas._table_info import TableInfo, table_info
from cas._tables import Scan, TableFile, check_media_type, open_table
from cas._verified import (
    ReadStats,
    SliceTarget,
    VerifiedReader,
    load_manifest,
    verified_object,
)

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


@dataclass(frozen=True, slots=True)
class SliceSource:
    """Where an experiment's object and chunk manifest are, with the card that binds them."""

    card: ExperimentCardV1
    path: str
    manifest_path: str


class CardStore(Protocol):
    """The part of a project store that slicing needs: cards and where objects live."""

    layout: ProjectLayout

    def load_card(self, experiment_id: str) -> ExperimentCardV1:
        """Read and validate one card of the project."""
        ...

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute path of a layout path below the project's directory."""
        ...


def slice_source(store: CardStore, experiment_id: str) -> SliceSource:
    """Locate an experiment's object and prove its chunk manifest is the one its card binds.

    Raises:
        InvalidId: `experiment_id` is malformed.
        ExperimentNotFound: the project has no such card.
        CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
        ObjectMissing: the card's object is not in the store.
        IntegrityError: the chunk manifest is missing or not the card's.
        StoreIOError: the manifest could not be read.
    """
    card = store.load_card(experiment_id)
    path = store.local_path(store.layout.object_path(card.typed_artifact_id))
    manifest_path = store.local_path(store.layout.chunks_path(card.typed_artifact_id))
    if not os.path.lexists(path):
        raise ObjectMissing("the experiment's artifact is missing from the store")
    load_manifest(manifest_path, card)
    return SliceSource(card=card, path=path, manifest_path=manifest_path)


def read_slice(
    path: str,
    card: SliceTarget,
    manifest_path: str,
    request: SliceRequest,
    *,
    limits: SliceLimits | None = None,
) -> SliceResult:
    """Read a bounded slice of a recorded table, proving every chunk it reads.

    Raises:
        InvalidInput: the request is malformed (`FilterSyntaxError`, `FilterTypeError` and
            `UnknownColumn` say what and where; `UnsupportedMediaType` names what is supported).
        LimitExceeded: the request asks for more than the limits allow; `TableTooLarge` when
            the table's footer, width or a single read exceeds them.
        TableUnreadable: the bytes are intact but not a readable table.
        ObjectMissing: there is no object at `path`.
        IntegrityError: the manifest, the object's size or a chunk read differs from the card.
        StoreIOError: the object could not be read.
    """
    limits = limits or DEFAULT_SLICE_LIMITS
    limit, max_bytes = _check_request(request, limits)
    media_type = check_media_type(card.artifact.media_type)
    node = (
        None
        if request.where is None
        else parse_filter(request.where, max_chars=limits.max_filter_chars)
    )
    manifest = load_manifest(manifest_path, card)
    with verified_object(path, card, manifest, max_read_bytes=limits.max_read_bytes) as reader:
        with _table_errors(reader):
            table_file = open_table(media_type, reader, limits.table_bounds)
            scan = _plan(table_file.schema, request, node, limit)
            collected = _collect(table_file, scan, request.offset, limit, max_bytes)
        return _result(collected, reader.stats)


def describe(
    path: str, card: SliceTarget, manifest_path: str, *, limits: SliceLimits | None = None
) -> TableInfo:
    """Describe a recorded table from its footer alone, proving the chunks it reads.

    Raises:
        UnsupportedMediaType: the card's media type is not a supported table format.
        TableTooLarge: the footer or the column count exceeds the limits.
        TableUnreadable: the bytes are intact but not a readable table.
        ObjectMissing: there is no object at `path`.
        IntegrityError: the manifest, the object's size or a chunk read differs from the card.
        StoreIOError: the object could not be read.
    """
    limits = limits or DEFAULT_SLICE_LIMITS
    media_type = check_media_type(card.artifact.media_type)
    manifest = load_manifest(manifest_path, card)
    with verified_object(path, card, manifest, max_read_bytes=limits.max_read_bytes) as reader:
        with _table_errors(reader):
            info = table_info(open_table(media_type, reader, limits.table_bounds))
        stats = reader.stats
    return replace(info, bytes_read=stats.bytes_read, chunks_verified=stats.chunks_verified)


def slice_experiment(
    store: CardStore,
    experiment_id: str,
    request: SliceRequest,
    *,
    limits: SliceLimits | None = None,
) -> SliceResult:
    """`read_slice` of an experiment of `store` (raises what `slice_source` and it raise)."""
    source = slice_source(store, experiment_id)
    return read_slice(source.path, source.card, source.manifest_path, request, limits=limits)


def describe_experiment(
    store: CardStore, experiment_id: str, *, limits: SliceLimits | None = None
) -> TableInfo:
    """`describe` of an experiment of `store` (raises what `slice_source` and it raise)."""
    source = slice_source(store, experiment_id)
    return describe(source.path, source.card, source.manifest_path, limits=limits)


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
