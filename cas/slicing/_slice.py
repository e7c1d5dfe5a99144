"""Bounded, verified slices of recorded tables, and what their footers say.

A slice projects columns, filters rows with the language of `_expr`, skips `offset` matching
rows, and keeps at most `limit` rows and `max_bytes` materialised bytes, in file order, so pages
are reproducible. Reaching a bound stops reading at once and the result says which bound it was;
`truncated` then means "reading stopped early": when exactly `limit` rows remain it is set
although nothing follows, because finding that out could mean reading the rest of the file.

Every byte a slice reads is proven against the chunk manifest its card binds (`_reader`),
so a 1% slice hashes about 1% of the object; resolve, which hands out a path, keeps full SHA-256.

The caller checks the request and the manifest; everything that parses or decodes the table
runs in a bounded child (`_isolated`): within `max_memory_bytes` of added address space and
`max_seconds` of wall clock, its crash or exhaustion a typed error. The kept rows cross back as
an Arrow IPC stream (`_collect`). A request the schema rejects (an unknown column, a filter of
the wrong type) is checked again here against the schema the child sends, so its error is
raised with all its facts.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import NoReturn

import msgspec
import pyarrow as pa

from cards.errors import (
    ArtifactError,
    FilterTypeError,
    InvalidInput,
    LimitExceeded,
    TableTooLarge,
    TableUnreadable,
    UnknownColumn,
)
from cards.table_read import TableRead, merged
from cas.slicing._answer import MAX_ANSWER_BYTES, Answer, Bounds
from cas.slicing._collect import (
    BYTE_BUDGET,
    ROW_LIMIT,
    IpcSink,
    collect,
    read_schema,
    read_stream,
)
from cas.slicing._expr import UNNAMED, Node, filter_columns, parse_filter
from cas.slicing._expr_check import compile_predicate
from cas.slicing._formats import open_table, settle_types, type_notes
from cas.slicing._isolated import run_bounded
from cas.slicing._json_lines import JsonLinesTable
from cas.slicing._limits import DEFAULT_SLICE_LIMITS, SliceLimits
from cas.slicing._media import check_media_type
from cas.slicing._reader import (
    ReadStats,
    SliceSource,
    VerifiedReader,
    load_manifest,
    verified_object,
)
from cas.slicing._table_info import TableInfo, info_as_answer, info_from_answer, table_info
from cas.slicing._tables import Scan, prepare_child
from cas.slicing._text_tables import CsvTable, TypeDrift

_MAX_OFFSET = 2**63 - 1


class SliceRequest(msgspec.Struct, frozen=True):
    """What to read; `limit` and `max_bytes` default to the operator's ceilings."""

    columns: tuple[str, ...] | None = None
    where: str | None = None
    limit: int | None = None
    offset: int = 0
    max_bytes: int | None = None
    table_read: TableRead | None = None
    """Read options of this read alone, over the card's (`cards.table_read.merged`)."""


class SliceResult(msgspec.Struct, frozen=True):
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
    notes: tuple[str, ...] = ()
    """What reading changed in the inferred types: a CSV column widened, and why."""


def read_slice(
    source: SliceSource, request: SliceRequest, *, limits: SliceLimits | None = None
) -> SliceResult:
    """Read a bounded slice of a recorded table, proving every chunk it reads.

    Raises:
        InvalidInput: the request is malformed (`FilterSyntaxError`, `FilterTypeError` and
            `UnknownColumn` say what and where; `UnsupportedMediaType` names what is supported).
        LimitExceeded: the request asks for more than the limits allow; `TableTooLarge` when
            the table's footer, width, a single read or its decoding exceeds them;
            `SliceTimeout` when reading takes longer than `max_seconds`.
        TableUnreadable: the bytes are intact but not a readable table.
        ObjectMissing: there is no object at `source.path`.
        IntegrityError: the manifest, the object's size or a chunk read differs from the card.
        StoreIOError: the object could not be read.
    """
    limits = limits or DEFAULT_SLICE_LIMITS
    limit, max_bytes = check_request(
        request,
        max_rows=limits.max_rows,
        max_bytes=limits.max_bytes,
        max_columns=limits.max_columns,
    )
    media_type = check_media_type(source.media_type)
    node = (
        None
        if request.where is None
        else parse_filter(request.where, max_chars=limits.max_filter_chars)
    )
    manifest = load_manifest(source)
    request = with_card_read(request, source)
    with verified_object(source, manifest, max_read_bytes=limits.max_read_bytes) as reader:
        work = functools.partial(
            _slice_in_child, reader, media_type, limits, request, node, limit, max_bytes
        )
        answer_bytes = max_bytes + 4 * limits.max_footer_bytes  # the rows, and their metadata
        answer = run_bounded(work, reader, _bounds(limits, answer_bytes))
        stats = reader.stats
    return _result(answer, stats, request, node, limit)


def describe(source: SliceSource, *, limits: SliceLimits | None = None) -> TableInfo:
    """Describe a recorded table from its footer alone, proving the chunks it reads.

    Raises:
        UnsupportedMediaType: the card's media type is not a supported table format.
        TableTooLarge: the footer, the column count or its parsing exceeds the limits.
        SliceTimeout: reading the footer takes longer than `max_seconds`.
        TableUnreadable: the bytes are intact but not a readable table.
        ObjectMissing: there is no object at `source.path`.
        IntegrityError: the manifest, the object's size or a chunk read differs from the card.
        StoreIOError: the object could not be read.
    """
    limits = limits or DEFAULT_SLICE_LIMITS
    media_type = check_media_type(source.media_type)
    manifest = load_manifest(source)
    with verified_object(source, manifest, max_read_bytes=limits.max_read_bytes) as reader:
        work = functools.partial(describe_work, reader, media_type, limits, source.table_read)
        info = info_from_answer(run_bounded(work, reader, _bounds(limits, MAX_ANSWER_BYTES)).value)
        stats = reader.stats
    return msgspec.structs.replace(
        info, bytes_read=stats.bytes_read, chunks_verified=stats.chunks_verified
    )


def _bounds(limits: SliceLimits, answer_bytes: int) -> Bounds:
    return Bounds(
        seconds=limits.max_seconds,
        memory_bytes=limits.max_memory_bytes,
        answer_bytes=answer_bytes,
    )


def _slice_in_child(
    reader: VerifiedReader,
    media_type: str,
    limits: SliceLimits,
    request: SliceRequest,
    node: Node | None,
    limit: int,
    max_bytes: int,
) -> Answer:
    """In the child: open the table, plan and collect; the kept rows are the payload."""
    prepare_child()
    with table_errors(reader, limits):
        table_file = open_table(media_type, reader, limits.table_bounds, request.table_read)
        settle_types(table_file, needed_columns(table_file.schema, request, node))
        while True:
            try:
                scan = plan_scan(table_file.schema, request, node, limit)
            except InvalidInput:  # the caller plans again against the schema, and raises there
                notes = type_notes(table_file)
                return Answer({"schema_only": True, "notes": notes}, table_file.schema.serialize())
            sink = IpcSink()
            try:
                collected = collect(table_file, scan, request.offset, limit, max_bytes, sink)
            except TypeDrift as drift:  # no row has left: read again with the column widened
                assert isinstance(table_file, CsvTable | JsonLinesTable)
                table_file.widen(drift)
                continue
            collected.finish()
            value = {"reason": collected.reason, "batches": collected.seen}
            return Answer({**value, "notes": type_notes(table_file)}, sink.getvalue())


def needed_columns(schema: pa.Schema, request: SliceRequest, node: Node | None) -> set[str]:
    """The columns of `schema` a request reads: its output columns and its filter's."""
    names = set(schema.names if request.columns is None else request.columns)
    return names | (set() if node is None else set(filter_columns(node)))


def with_card_read(request: SliceRequest, source: SliceSource) -> SliceRequest:
    """`request` reading with the card's options, the request's own over them."""
    options = merged(source.table_read, request.table_read)
    return msgspec.structs.replace(request, table_read=options)


def describe_work(
    reader: VerifiedReader, media_type: str, limits: SliceLimits, read: TableRead | None = None
) -> Answer:
    """In the child: the table's description, as JSON (`_footer` builds on it too)."""
    prepare_child()
    with table_errors(reader, limits):
        table = open_table(media_type, reader, limits.table_bounds, read)
        settle_types(table, table.schema.names)  # a small CSV: every column, over the whole file
        return Answer(info_as_answer(table_info(table, media_type)))


def _result(
    answer: Answer, stats: ReadStats, request: SliceRequest, node: Node | None, limit: int
) -> SliceResult:
    """The slice the child answered, or the error its request meets against the schema."""
    value = answer.value if isinstance(answer.value, dict) else {}
    if value.get("schema_only") is True:
        refuse_as_planned(value, answer.payload, request, node, limit)
    reason, seen = value.get("reason"), value.get("batches")
    if reason not in (None, ROW_LIMIT, BYTE_BUDGET) or not isinstance(seen, int):
        raise TableUnreadable("the table's reader answered nonsense")
    table = read_stream(answer.payload)
    if table.num_rows > limit:
        raise TableUnreadable("the table's reader answered more rows than asked")
    notes = value.get("notes", [])
    if not isinstance(notes, list):
        raise TableUnreadable("the table's reader answered nonsense")
    return SliceResult(
        table=table,
        rows=table.num_rows,
        truncated=reason is not None,
        truncated_reason=reason,
        bytes=table.nbytes,
        columns=table.column_names,
        bytes_read=stats.bytes_read,
        chunks_verified=stats.chunks_verified,
        batches_read=seen,
        notes=tuple(str(note) for note in notes),
    )


def check_request(
    request: SliceRequest, *, max_rows: int, max_bytes: int, max_columns: int
) -> tuple[int, int]:
    """The request's row limit and byte budget, once it is checked against the ceilings.

    `max_rows` and `max_bytes` are the ceilings in force: a slice's, or an export's.

    Raises:
        InvalidInput: a value is malformed.
        LimitExceeded: a value is above its ceiling.
    """
    limit = max_rows if request.limit is None else request.limit
    budget = max_bytes if request.max_bytes is None else request.max_bytes
    _check_int("limit", limit, 0, max_rows)
    _check_int("offset", request.offset, 0, _MAX_OFFSET)
    _check_int("max_bytes", budget, 1, max_bytes)
    if request.where is not None and not isinstance(request.where, str):
        raise InvalidInput("where must be a string")
    columns = request.columns
    if columns is not None:
        if len(columns) > max_columns:
            raise LimitExceeded(f"more than {max_columns} columns requested", limit=max_columns)
        if not all(isinstance(name, str) and name for name in columns):
            raise InvalidInput(f"column names must be non-empty strings: {UNNAMED}")
        if len(set(columns)) != len(columns):
            raise InvalidInput("a column is requested more than once")
    return limit, budget


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidInput(f"{name} must be an integer of at least {low}")
    if value > high:
        raise LimitExceeded(f"{name} {value} is above the configured maximum of {high}", limit=high)


def refuse_as_planned(
    value: dict[str, object],
    schema: bytes | memoryview,
    request: SliceRequest,
    node: Node | None,
    limit: int,
) -> NoReturn:
    """Raise the error `request` meets against the schema a child answered with.

    A filter that no longer types against a CSV column the child widened while reading (a
    later value did not fit: `--where "x > 95"` once `x` holds "unknown") says how the column
    was widened, from the child's notes, and how to keep its type.

    Raises:
        InvalidInput: what `plan_scan` raises against `schema`.
        TableUnreadable: the request plans against `schema` (the child contradicted itself).
    """
    notes = value.get("notes")
    try:
        plan_scan(read_schema(schema), request, node, limit)
    except FilterTypeError as exc:
        if isinstance(notes, list) and notes and all(isinstance(n, str) for n in notes):
            said = "; ".join(note[:200] for note in notes[:3])  # each names its column
            more = f"; and {len(notes) - 3} more" if len(notes) > 3 else ""
            exc.message += (
                f"; the table was read with wider types than its first block said "
                f"({said}{more}): compare as that type, or declare the column's type "
                "and its null tokens (--csv-type, --csv-null)"
            )
        raise
    raise TableUnreadable("the table's reader rejected a request its schema accepts")


def plan_scan(schema: pa.Schema, request: SliceRequest, node: Node | None, limit: int) -> Scan:
    """The scan that reads `request` from a table of `schema`.

    Raises:
        UnknownColumn: a requested column is not in `schema`.
        FilterTypeError: the filter does not type against `schema`.
    """
    columns = list(schema.names) if request.columns is None else list(request.columns)
    for name in columns:
        if schema.get_field_index(name) < 0:
            raise UnknownColumn(name, schema.names)
    predicate = None if node is None else compile_predicate(node, schema)
    expression = None if predicate is None else predicate.expression
    needed = frozenset(columns) | (frozenset() if node is None else filter_columns(node))
    skip = request.offset if node is None else 0
    return Scan(columns, expression, needed, skip, limit, predicate)


@contextlib.contextmanager
def table_errors(reader: VerifiedReader, limits: SliceLimits) -> Iterator[None]:
    """Translate pyarrow's failures into `TableUnreadable`, or into what our reader raised.

    Running out of memory (the child's address-space bound) or of what one Arrow array can
    hold is `TableTooLarge`.
    """
    try:
        yield
    except ArtifactError:
        raise
    except (pa.ArrowException, OSError, MemoryError, UnicodeError) as exc:
        if reader.failure is not None:  # pyarrow wrapped it: an integrity failure stays one
            raise reader.failure from exc
        if isinstance(exc, MemoryError | pa.ArrowCapacityError):
            bound = limits.max_memory_bytes
            raise TableTooLarge(
                f"decoding the table needs more than the {bound}-byte memory bound", limit=bound
            ) from exc
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise TableUnreadable(f"the table cannot be read: {message}") from exc
