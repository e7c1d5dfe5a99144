"""`artmem show` and `artmem slice`: a result's shape at a glance, then exactly what matters.

Both check the card and scope as resolve does and report freshness; neither hashes the whole
object: `show` reads the footer, `slice` the chunks it needs, each proven against the chunk
manifest the card binds.
"""

from __future__ import annotations

import argparse
import io
from dataclasses import asdict
from typing import TextIO

import orjson

from cards import InvalidInput, UnsupportedMediaType
from cas import Located, ProjectStore, write_new
from cas.slicing import SliceLimits, SliceRequest, SliceResult, TableInfo, describe, read_slice
from harness_plugin import _views

MAX_CELL_CHARS = 40


def card_header(located: Located) -> dict[str, object]:
    """The card's display fields with its freshness, as resolve reports them."""
    card = located.card
    return {
        "experiment_id": card.experiment_id,
        "card": _views.card_view(card).model_dump(mode="json"),
        "artifact": _views.artifact_view(card).model_dump(mode="json"),
        "freshness": str(located.freshness),
        "warnings": list(located.warnings),
    }


def show(
    store: ProjectStore, experiment_id: str, current: str | None, limits: SliceLimits
) -> dict[str, object]:
    """The card, and for a table its footer: schema, rows, row groups, sizes, statistics."""
    located = store.locate(experiment_id, current)  # the card is read once, here
    view = card_header(located)
    try:
        info = describe(located.source, limits=limits)
    except UnsupportedMediaType as exc:
        view["table"] = None
        view["note"] = exc.message
        return view
    view["table"] = _info_view(info)
    return view


def _info_view(info: TableInfo) -> dict[str, object]:
    document = asdict(info)
    document["row_groups"] = document["row_groups"][:100]  # bounded for a person; count stays
    return document


def show_lines(view: dict[str, object]) -> list[str]:
    """`show` for a person."""
    card, artifact, table = view["card"], view["artifact"], view["table"]
    assert isinstance(card, dict) and isinstance(artifact, dict)
    lines = [
        f"{card['title']}",
        f"  experiment  {view['experiment_id']}",
        f"  summary     {card['summary']}",
        f"  source      {card['source']} @ {card['source_version']}",
        f"  freshness   {view['freshness']}",
        f"  artifact    {artifact['media_type']}, {_views.human_size(int(artifact['bytes']))}",
    ]
    lines += [f"  warning: {w}" for w in view["warnings"]]  # type: ignore[attr-defined]
    if not isinstance(table, dict):
        return lines + [f"  {view.get('note', 'not a table')}"]
    rows = "unknown" if table["num_rows"] is None else f"{table['num_rows']:,}"
    lines.append(f"  rows        {rows} in {table['num_row_groups']} row group(s)")
    if table["compressed_bytes"] is not None:
        compressed = _views.human_size(table["compressed_bytes"])
        uncompressed = _views.human_size(table["uncompressed_bytes"])
        lines.append(f"  size        {compressed} compressed, {uncompressed} uncompressed")
    lines.append("  schema")
    lines += [f"    {f['name']}: {f['type']}" for f in table["fields"]]
    stats = [c for c in table["columns"] if c["min"] is not None or c["null_count"] is not None]
    if stats:
        lines.append("  statistics (min .. max, nulls)")
        lines += [
            f"    {c['path']}: {c['min']} .. {c['max']}, {c['null_count']} null" for c in stats
        ]
    return lines


def slice_view(
    store: ProjectStore, args: argparse.Namespace, limits: SliceLimits, out: TextIO
) -> tuple[dict[str, object], list[str]]:
    """Run `artmem slice`: check, slice, write the data, and describe what was read."""
    if args.format == "parquet" and not args.out:
        raise InvalidInput("--format parquet needs --out FILE (binary data is not printed)")
    request = SliceRequest(
        columns=_columns(args.columns),
        where=args.where,
        limit=args.limit,
        offset=args.offset,
    )
    located = store.locate(args.experiment_id, args.current_source_version)  # one card read
    header = card_header(located)
    result = read_slice(located.source, request, limits=limits)
    if args.out:
        _write_atomically(args.out, _encode(result, args.format))
    elif not args.json:
        text = _render_table(result) if args.format == "table" else _encode(result, args.format)
        out.write(text if isinstance(text, str) else text.decode("utf-8"))
    meta = {
        **header,
        "rows": result.rows,
        "truncated": result.truncated,
        "truncated_reason": result.truncated_reason,
        "bytes": result.bytes,
        "columns": result.columns,
        "bytes_read": result.bytes_read,
        "chunks_verified": result.chunks_verified,
        "out": args.out,
    }
    lines = [] if not args.out else [f"wrote {result.rows} rows to {args.out}"]
    if result.truncated:
        lines.append(f"(stopped at the {result.truncated_reason}: more rows may match)")
    lines += [f"warning: {w}" for w in header["warnings"]]  # type: ignore[attr-defined]
    return meta, lines


def _columns(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise InvalidInput("--columns takes comma-separated, non-empty column names")
    return names


def _encode(result: SliceResult, fmt: str) -> bytes:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    if fmt == "parquet":
        pq.write_table(result.table, sink)
    elif fmt == "csv":
        pacsv.write_csv(result.table, sink)
    elif fmt == "jsonl":
        for row in result.table.to_pylist():
            sink.write(orjson.dumps(row, default=str) + b"\n")
    else:
        return _render_table(result).encode("utf-8")
    return sink.getvalue()


def _render_table(result: SliceResult) -> str:
    """An aligned text table for a person (cells bounded, control characters escaped)."""
    names = list(result.columns)
    rows = [[_cell(value) for value in row.values()] for row in result.table.to_pylist()]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append(f"({result.rows} rows{', truncated' if result.truncated else ''})")
    return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    text = "null" if value is None else str(value)
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _write_atomically(path: str, data: bytes) -> None:
    """Write `data` to a new file at `path` atomically; never over an existing file."""
    try:
        write_new(path, [data])
    except FileExistsError as exc:
        raise InvalidInput("--out names an existing file; choose a new path") from exc
