"""An operator's slice streamed into a new file: bounded by a batch, not by the result.

A slice in memory is capped (`SliceLimits.max_rows`, `max_bytes`) because all of it is held at
once, then handed to a model, a kernel or a terminal. An export holds one batch at a time, so
it is bounded by `ExportLimits` instead: no row bound by default, a generous byte ceiling and a
longer time budget. Everything else is as for a slice: the request and filter are checked
here, every chunk read is proven against the manifest, and all parsing, decoding and now
encoding runs in the bounded child of `_isolated` (its address-space bound, and its clock).

The file appears complete or not at all. The caller stages it beside the destination (same
filesystem: `_fs.staged`, locked, unlinked on every way out), and the child inherits the
staged descriptor and writes the encoded batches itself, then answers what it wrote. Only
after the child exits with success does the caller check the staged size against the answer,
fsync, and hard-link it to the destination, which never replaces an existing file. A timeout
(the child is killed), an error or a bad answer leaves no file and no staged leftover; a
caller killed outright can leave only a locked-while-live `stage-out-*.tmp` beside it, never a
partial file under the destination's name.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence

import msgspec

import fsedge as _fs
from cards.errors import InvalidInput, StoreIOError, TableUnreadable
from cas.slicing._answer import Answer, Bounds
from cas.slicing._collect import BYTE_BUDGET, ROW_LIMIT, collect, output_schema
from cas.slicing._encoders import EXPORT_FORMATS, FileOutput, open_sink
from cas.slicing._expr import Node, parse_filter
from cas.slicing._formats import open_table, settle_types, type_notes
from cas.slicing._isolated import run_bounded
from cas.slicing._limits import DEFAULT_SLICE_LIMITS, SliceLimits
from cas.slicing._media import check_media_type
from cas.slicing._reader import (
    ReadStats,
    SliceSource,
    VerifiedReader,
    load_manifest,
    verified_object,
)
from cas.slicing._slice import (
    SliceRequest,
    check_request,
    needed_columns,
    plan_scan,
    refuse_as_planned,
    table_errors,
    with_card_read,
)
from cas.slicing._tables import prepare_child
from cas.slicing._threads import Passed

UNBOUNDED_ROWS = 2**63 - 1


class ExportResult(msgspec.Struct, frozen=True):
    """What an export wrote, and what reading it cost.

    `bytes` counts the rows' materialised (Arrow) bytes, the measure of every slice's byte
    bound; `file_bytes` is the size of the file written.
    """

    path: str
    format: str
    rows: int
    truncated: bool
    truncated_reason: str | None
    bytes: int
    file_bytes: int
    columns: list[str]
    bytes_read: int
    chunks_verified: int
    batches_read: int
    notes: tuple[str, ...] = ()
    """What reading changed in the inferred types: a CSV column widened, and why."""


def export_slice(
    source: SliceSource,
    request: SliceRequest,
    path: str,
    fmt: str,
    *,
    limits: SliceLimits | None = None,
    outside: Sequence[str] = (),
    watch: Callable[[int], None] | None = None,
) -> ExportResult:
    """Stream a slice of a recorded table into the new file `path`, encoded as `fmt`.

    `request.limit` and `request.max_bytes` default to the export's ceilings (`limits.export`);
    reaching one ends the file there, and the result says `truncated` and which bound.

    `path`'s directory must lie outside every directory in `outside` (the store's roots).
    `watch`, if given, is called with the bytes written so far about every half second while
    the export runs, and once with the file's size at the end (a caller's progress, or its
    warning that a tiny file is growing into a huge one).

    Raises:
        FileExistsError: `path` exists (or appeared meanwhile); nothing was written.
        IsADirectoryError: `path` names a directory; nothing was written.
        PathRejected: `path`'s directory is inside one of `outside`.
        InvalidInput: the request or `fmt` is malformed, or `fmt` cannot hold a column
            (`FilterSyntaxError`, `FilterTypeError`, `UnknownColumn` and
            `UnsupportedMediaType` as for `read_slice`).
        LimitExceeded: the request asks for more than the export's ceilings; `TableTooLarge`
            when the table's footer, width, a single read or a decode exceeds the limits;
            `SliceTimeout` past `limits.export.max_seconds`.
        TableUnreadable: the bytes are intact but not a readable table.
        ObjectMissing: there is no object at `source.path`.
        IntegrityError: the manifest, the object's size or a chunk read differs from the card.
        StoreIOError: the object could not be read, or the file could not be written.
    """
    limits = limits or DEFAULT_SLICE_LIMITS
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput(f"cannot export as {fmt!r}; the formats are {', '.join(EXPORT_FORMATS)}")
    export = limits.export
    limit, max_bytes = check_request(
        request,
        max_rows=UNBOUNDED_ROWS if export.max_rows is None else export.max_rows,
        max_bytes=export.max_bytes,
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
    bounds = Bounds(
        seconds=export.max_seconds,
        memory_bytes=limits.max_memory_bytes,
        answer_bytes=4 * limits.max_footer_bytes,  # a schema, when the request does not fit it
    )
    with (
        _fs.staged_beside(path, outside=outside, mode=_fs.SHARED_FILE_MODE) as output,
        verified_object(source, manifest, max_read_bytes=limits.max_read_bytes) as reader,
    ):
        work = functools.partial(
            _export_in_child, reader, media_type, limits, request, node, limit, max_bytes,
            fmt, Passed(output.stage.fd),
        )  # fmt: skip
        tick = None if watch is None else functools.partial(_report_size, output.stage.fd, watch)
        answer = run_bounded(work, reader, bounds, tick=tick)
        result = _result(answer, reader.stats, request, node, limit, path, fmt)
        try:
            written = os.fstat(output.stage.fd).st_size
        except OSError as exc:
            raise StoreIOError(f"cannot write the output file: {exc.strerror}") from exc
        if watch is not None:
            watch(written)
        if written != result.file_bytes:
            raise TableUnreadable("the table's reader answered another size than it wrote")
        output.publish()
    return result


def _report_size(fd: int, watch: Callable[[int], None]) -> None:
    with contextlib.suppress(OSError):
        watch(os.fstat(fd).st_size)


def _export_in_child(
    reader: VerifiedReader,
    media_type: str,
    limits: SliceLimits,
    request: SliceRequest,
    node: Node | None,
    limit: int,
    max_bytes: int,
    fmt: str,
    fd: int,
) -> Answer:
    """In the child: open the table, plan, and write what `collect` keeps into `fd`."""
    prepare_child()
    output = FileOutput(fd)
    with table_errors(reader, limits), _write_errors(output):
        table_file = open_table(media_type, reader, limits.table_bounds, request.table_read)
        # Rows go to the file as they are read: a CSV's columns are typed over the whole file.
        settle_types(table_file, needed_columns(table_file.schema, request, node), always=True)
        try:
            scan = plan_scan(table_file.schema, request, node, limit)
        except InvalidInput:  # the caller plans again against the schema, and raises there
            notes = type_notes(table_file)
            return Answer({"schema_only": True, "notes": notes}, table_file.schema.serialize())
        schema = output_schema(table_file.schema, scan)
        sink = open_sink(fmt, output, schema, limits.table_bounds, table_file.schema)
        collected = collect(table_file, scan, request.offset, limit, max_bytes, sink)
        collected.finish()
        output.close()
        return Answer(
            {
                "reason": collected.reason,
                "batches": collected.seen,
                "rows": collected.rows,
                "bytes": collected.nbytes,
                "file_bytes": output.written,
                "columns": collected.schema.names,
                "notes": type_notes(table_file),
            }
        )


@contextlib.contextmanager
def _write_errors(output: FileOutput) -> Iterator[None]:
    """A failed write stays a `StoreIOError`, whatever pyarrow's writer wrapped it in."""
    try:
        yield
    except Exception:
        if output.failure is not None:
            raise output.failure from None
        raise


def _result(
    answer: Answer,
    stats: ReadStats,
    request: SliceRequest,
    node: Node | None,
    limit: int,
    path: str,
    fmt: str,
) -> ExportResult:
    """What the child wrote, or the error its request meets against the schema."""
    value = answer.value if isinstance(answer.value, dict) else {}
    if value.get("schema_only") is True:
        refuse_as_planned(value, answer.payload, request, node, limit)
    reason, columns = value.get("reason"), value.get("columns")
    if (
        reason not in (None, ROW_LIMIT, BYTE_BUDGET)
        or not isinstance(columns, list)
        or not all(isinstance(name, str) for name in columns)
    ):
        raise TableUnreadable("the table's reader answered nonsense")
    notes = value.get("notes", [])
    if not isinstance(notes, list):
        raise TableUnreadable("the table's reader answered nonsense")
    rows = _count(value, "rows")
    if rows > limit:
        raise TableUnreadable("the table's reader answered more rows than asked")
    return ExportResult(
        path=path,
        format=fmt,
        rows=rows,
        truncated=reason is not None,
        truncated_reason=reason,
        bytes=_count(value, "bytes"),
        file_bytes=_count(value, "file_bytes"),
        columns=columns,
        bytes_read=stats.bytes_read,
        chunks_verified=stats.chunks_verified,
        batches_read=_count(value, "batches"),
        notes=tuple(str(note) for note in notes),
    )


def _count(value: dict[str, object], key: str) -> int:
    count = value.get(key)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise TableUnreadable("the table's reader answered nonsense")
    return count
