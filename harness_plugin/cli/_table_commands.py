"""`artmem show` and `artmem slice`: a result's shape at a glance, then exactly what matters.

Both check the card and scope as resolve does and report freshness; neither hashes the whole
object: `show` reads the footer, `slice` the chunks it needs, each proven against the chunk
manifest the card binds.

A slice to `--out` as Parquet, CSV or JSON Lines is streamed into the file batch by batch
(`export_slice`), within the operator's export bounds (`[slice] export_max_*`); everything
else (rows on stdout, and the aligned text table, which needs every row to align them) is
materialised within the slice bounds (`[slice] max_*`).
"""

from __future__ import annotations

import argparse
import io
import os
from collections.abc import Iterator, Sequence
from typing import TextIO

import msgspec

from cards import (
    InvalidFilter,
    InvalidInput,
    UnknownColumn,
    excerpt,
)
from cards.errors import LimitExceeded
from cas import Store
from cas.slicing import (
    ExportResult,
    SliceLimits,
    SliceRequest,
    SliceResult,
    SliceSource,
    export_slice,
    read_slice,
    refused_columns,
)
from fsedge import SHARED_FILE_MODE, write_new
from harness_plugin.cli._filter_hints import filter_hints
from harness_plugin.cli._growth import Growth
from harness_plugin.cli._record_fields import call_read
from harness_plugin.cli._show import card_header

MAX_CELL_CHARS = 40
_WRITE_BYTES = 1 << 20
_ROW_LIMIT = "row_limit"  # a slice's truncated_reason when it kept its row limit
_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl"}
_EXTENSIONS |= {".ndjson": "jsonl", ".txt": "table"}


def output_format(fmt: str | None, out: str | None) -> str:
    """The format of a slice's rows: `--format`, else the `--out` file's extension, else a table.

    Raises:
        InvalidInput: `--format` contradicts the extension of `--out`, or asks for binary
            Parquet on stdout.
    """
    implied = None if out is None else _EXTENSIONS.get(os.path.splitext(out)[1].lower())
    if fmt is not None and implied is not None and fmt != implied:
        raise InvalidInput(
            f"--format {fmt} contradicts --out {os.path.basename(out or '')!r}, whose extension "
            f"means {implied}; drop one of them or make them agree"
        )
    chosen = fmt or implied or "table"
    if chosen == "parquet" and not out:
        raise InvalidInput("--format parquet needs --out FILE (binary data is not printed)")
    return chosen


def slice_view(
    store: Store,
    args: argparse.Namespace,
    limits: SliceLimits,
    out: TextIO,
    err: TextIO,
    *,
    outside: Sequence[str] = (),
) -> tuple[dict[str, object], list[str]]:
    """Run `artmem slice`: check, slice, write the data, and describe what was read.

    Rows go to `out` (or the `--out` file, whose directory must lie outside every directory in
    `outside`); notices go to `err` whenever rows are on `out`, so piped CSV or JSON Lines stay
    clean.
    """
    fmt = output_format(args.format, args.out)
    request = SliceRequest(
        columns=_columns(args.columns),
        where=args.where,
        limit=args.limit,
        offset=args.offset,
        table_read=call_read(args.csv_types, args.csv_nulls, args.csv_decimal, args.csv_encoding),
    )
    located = store.locate(args.experiment_id, args.current_source_version)  # one card read
    header = card_header(located)
    notice: str | None = None  # an export many times the recorded file's size
    try:
        if args.out and fmt != "table":
            growth = Growth(located.card.artifact.bytes, err)
            result = _export(located.source, request, args.out, fmt, limits, outside, growth)
            facts = _export_facts(result)
            facts["amplification"] = growth.ratio(result.file_bytes)
            notice = growth.notice(result.file_bytes)
        else:
            facts = _slice(located.source, request, fmt, limits, args, out, outside)
    except (InvalidFilter, UnknownColumn) as exc:
        hints = filter_hints(args.where or "")
        if hints:
            exc.message += "; hint: " + "; ".join(hints)
        raise
    meta = {**header, **facts, "out": args.out, "format": fmt}
    notices = [f"warning: {w}" for w in header["warnings"]]  # type: ignore[attr-defined]
    notices += [f"note: {n}" for n in facts["notes"]]  # type: ignore[attr-defined]
    if notice is not None:
        notices.append(notice)
    capped = facts.pop("capped", None)
    if capped is not None:
        notices.append(
            f"(printing at most {capped} rows, the [slice] max_rows for rows on stdout; "
            "write csv, jsonl or parquet to --out FILE to stream every row)"
        )
    if facts["truncated"] and not _as_asked(facts["truncated_reason"], facts["rows"], request):
        more = "; csv, jsonl or parquet stream all of them" if fmt == "table" and args.out else ""
        notices.insert(
            0, f"(stopped at the {facts['truncated_reason']}: more rows may match{more})"
        )
    if not args.out:
        if not args.json:
            err.write("".join(f"artmem: {line}\n" for line in notices))
        return meta, []
    return meta, [f"wrote {facts['rows']} rows to {args.out}", *notices]


def _export(
    source: SliceSource,
    request: SliceRequest,
    path: str,
    fmt: str,
    limits: SliceLimits,
    outside: Sequence[str],
    growth: Growth,
) -> ExportResult:
    """Stream the slice into a new file at `path`; never over an existing file."""
    try:
        return export_slice(
            source, request, path, fmt, limits=limits, outside=outside, watch=growth
        )
    except IsADirectoryError as exc:
        raise InvalidInput(f"--out: {exc.strerror}") from None
    except FileExistsError as exc:
        raise InvalidInput("--out names an existing file; choose a new path") from exc


def _export_facts(result: ExportResult) -> dict[str, object]:
    return {
        "rows": result.rows,
        "truncated": result.truncated,
        "truncated_reason": result.truncated_reason,
        "bytes": result.bytes,
        "file_bytes": result.file_bytes,
        "columns": result.columns,
        "bytes_read": result.bytes_read,
        "chunks_verified": result.chunks_verified,
        "notes": list(result.notes),
    }


def _as_asked(reason: object, rows: object, request: SliceRequest) -> bool:
    """Whether a slice stopped at the very number of rows its `--limit` asked for."""
    return reason == _ROW_LIMIT and rows == request.limit


def _slice(
    source: SliceSource,
    request: SliceRequest,
    fmt: str,
    limits: SliceLimits,
    args: argparse.Namespace,
    out: TextIO,
    outside: Sequence[str],
) -> dict[str, object]:
    """A slice held in memory within the slice bounds: printed, or written as a text table."""
    if args.out and request.limit is not None and request.limit > limits.max_rows:
        raise LimitExceeded(
            f"--limit {request.limit} is above the configured maximum of {limits.max_rows} rows "
            "for an aligned text table, which is built in memory; write csv, jsonl or parquet "
            "to --out to stream any number of rows",
            limit=limits.max_rows,
        )
    capped = None
    if not args.out and request.limit is not None and request.limit > limits.max_rows:
        capped = limits.max_rows  # a person asking for many rows on stdout gets the most it may
        request = msgspec.structs.replace(request, limit=capped)
    result = read_slice(source, request, limits=limits)
    file_bytes = None
    asked = _as_asked(result.truncated_reason, result.rows, request)
    if args.out:
        data = render_table(result, asked).encode("utf-8")  # other formats are exports
        _write_atomically(args.out, data, outside)
        file_bytes = len(data)
    elif not args.json:
        text = render_table(result, asked) if fmt == "table" else _encode(result, fmt)
        _write_out(out, text.encode("utf-8") if isinstance(text, str) else text)
    facts: dict[str, object] = {
        "rows": result.rows,
        "truncated": result.truncated,
        "truncated_reason": result.truncated_reason,
        "bytes": result.bytes,
        "file_bytes": file_bytes,
        "columns": result.columns,
        "bytes_read": result.bytes_read,
        "chunks_verified": result.chunks_verified,
        "notes": list(result.notes),
    }
    if capped is not None:
        facts["capped"] = capped
    return facts


def _write_out(out: TextIO, data: bytes) -> None:
    """Write `data` to `out` whole, or raise `BrokenPipeError` when its reader has gone.

    A large write to a pipe whose reader closed (`| head -1`) returns a partial count, which
    Python's buffered stdout drops silently at exit (status 0); written here a piece at a time
    to the descriptor, the next piece fails with EPIPE, and the command ends with status 141.
    """
    try:
        fd = out.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):  # not a file: a test's capture
        out.write(data.decode("utf-8"))
        out.flush()
        return
    out.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:_WRITE_BYTES]) :]


def _columns(texts: list[str] | None) -> tuple[str, ...] | None:
    """The names of every `--columns` given, in order.

    Names are separated by commas; a name in double quotes (`"dose, mg"`, `""` for a quote)
    is taken as it is, spaces and commas included, as `--where` takes it; others are stripped.

    Raises:
        InvalidInput: a name is empty, or a quoted name is not closed where it ends.
    """
    if texts is None:
        return None
    return tuple(name for text in texts for name in _names(text))


def _names(text: str) -> Iterator[str]:
    at = 0
    while True:
        start = len(text) - len(text[at:].lstrip())
        if text.startswith('"', start):
            end, name = _quoted(text, start)
            comma = text.find(",", end)
            if text[end : None if comma < 0 else comma].strip():
                raise InvalidInput(
                    f"--columns {excerpt(text)}: a quoted name must end with its quote, before "
                    """a comma or the end: --columns 'id,"dose, mg"'"""
                )
        else:
            comma = text.find(",", start)
            name = text[start : None if comma < 0 else comma].strip()
        if not name:
            raise InvalidInput("--columns takes comma-separated, non-empty column names")
        yield name
        if comma < 0:
            return
        at = comma + 1


def _quoted(text: str, start: int) -> tuple[int, str]:
    """Where the quoted name opening at `start` ends, and the name (`""` is a quote)."""
    parts, at = [], start + 1
    while (close := text.find('"', at)) >= 0:
        parts.append(text[at:close])
        if not text.startswith('"', close + 1):
            return close + 1, "".join(parts)
        parts.append('"')
        at = close + 2
    raise InvalidInput(f"--columns {excerpt(text)}: a quote is never closed")


def _encode(result: SliceResult, fmt: str) -> bytes:
    """A slice held in memory as CSV or JSON Lines for stdout, as an export writes them.

    (Parquet needs `--out`, which streams it; the aligned table is `render_table`'s.)
    """
    sink = io.BytesIO()
    if fmt == "csv":
        import pyarrow.csv as pacsv

        with refused_columns(fmt):  # a list or struct column, as an export to a file says
            pacsv.write_csv(result.table, sink)
    else:
        from cas.slicing import json_lines  # what an export to a file writes

        for batch in result.table.to_batches():
            sink.write(json_lines(batch))
    return sink.getvalue()


def render_table(result: SliceResult, asked: bool = False) -> str:
    """An aligned text table for a person (cells bounded, control characters escaped)."""
    names = [_cell(name) for name in result.columns]  # a file's names, escaped like cells
    rows = [[_cell(value) for value in row.values()] for row in result.table.to_pylist()]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    count = f"{result.rows} row{'' if result.rows == 1 else 's'}"
    lines.append(f"({count}{', truncated' if result.truncated and not asked else ''})")
    return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    text = "null" if value is None else str(value)
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _write_atomically(path: str, data: bytes, outside: Sequence[str]) -> None:
    """Write `data` to a new file at `path` atomically; never over an existing file."""
    try:
        write_new(path, [data], outside=outside, mode=SHARED_FILE_MODE)
    except IsADirectoryError as exc:
        raise InvalidInput(f"--out: {exc.strerror}") from None
    except FileExistsError as exc:
        raise InvalidInput("--out names an existing file; choose a new path") from exc
