"""`artmem show`: the card with its freshness and, for a table, what its footer says.

Loaded only when `show` or `slice` runs (pyarrow is imported by the slicing reader it calls).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from cards import (
    ExperimentCardV1,
    Freshness,
    ObjectMissing,
    UnsupportedMediaType,
    freshness_verdict,
)
from cards.results import ArtifactView, CardView
from cards.table_read import read_lines
from cas import Located, Store
from cas.slicing import SliceLimits, TableInfo, describe
from harness_plugin import _views

ARROW_FILE = "application/vnd.apache.arrow.file"


def card_header(located: Located) -> dict[str, object]:
    """The card's display fields with its freshness, as resolve reports them."""
    return _header(located.card, located.freshness, located.warnings)


def _header(
    card: ExperimentCardV1, freshness: Freshness, warnings: Sequence[str]
) -> dict[str, object]:
    view: dict[str, object] = {
        "experiment_id": card.experiment_id,
        "card": _views.card_view(card),
        "artifact": _views.artifact_view(card),
        "freshness": str(freshness),
        "warnings": list(warnings),
        "available_locally": True,
    }
    if card.query is not None:  # local only: never in a tool's result, never sent to Honcho
        view["query"] = card.query
    return view


def show(
    store: Store, experiment_id: str, current: str | None, limits: SliceLimits
) -> dict[str, object]:
    """The card, and for a table its footer: schema, rows, row groups, sizes, statistics.

    A card whose bytes are gone (quarantined by `fsck --repair`) is still shown, marked
    `available_locally: false`, with how to restore it.
    """
    try:
        located = store.locate(experiment_id, current)  # the card is read once, here
    except ObjectMissing:
        card = store.load_card(experiment_id)
        view = _header(card, *freshness_verdict(card.source_version, current))
        view |= {"available_locally": False, "table": None, "note": _views.UNAVAILABLE_HINT}
        return view
    view = card_header(located)
    try:
        info = describe(located.source, limits=limits)
    except UnsupportedMediaType as exc:
        view["table"] = None
        view["note"] = exc.message
        return view
    view["table"] = _info_view(info)
    return view


def _query_lines(query: object) -> list[str]:
    """The card's query text, each line indented under the first (a person reads it whole)."""
    if not isinstance(query, str):
        return []
    first, *rest = query.splitlines() or [""]
    return [f"  query       {first}", *(f"              {line}" for line in rest)]


def _info_view(info: TableInfo) -> dict[str, object]:
    shown = msgspec.structs.replace(info, row_groups=info.row_groups[:100])  # the count stays
    document: dict[str, object] = msgspec.to_builtins(shown)  # bounded for a person
    return document


def show_lines(view: dict[str, object]) -> list[str]:
    """`show` for a person; column names, types and statistics escaped as cells are."""
    return [_views.printable(line) for line in _show_lines(view)]


def _show_lines(view: dict[str, object]) -> list[str]:
    card, artifact, table = view["card"], view["artifact"], view["table"]
    assert isinstance(card, CardView) and isinstance(artifact, ArtifactView)
    lines = [
        f"{card.title}",
        f"  experiment  {view['experiment_id']}",
        f"  summary     {card.summary}",
        f"  source      {card.source} @ {card.source_version}",
        *_query_lines(view.get("query")),
        f"  freshness   {view['freshness']}",
        f"  artifact    {artifact.media_type}, {_views.human_size(artifact.bytes)}",
        *(f"  {line}" for line in read_lines(card.table_read)),
    ]
    lines += [f"  warning: {w}" for w in view["warnings"]]  # type: ignore[attr-defined]
    if not view.get("available_locally", True):
        return lines + [f"  not available locally: {view['note']}"]
    if not isinstance(table, dict):
        return lines + [f"  {view.get('note', 'not a table')}"]
    rows = "unknown" if table["num_rows"] is None else f"{table['num_rows']:,}"
    groups = table["num_row_groups"]
    if groups:
        unit = "record batch" if table["media_type"] == ARROW_FILE else "row group"
        rows += f" in {groups:,} {unit}{'' if groups == 1 else 'es' if unit[-1] == 'h' else 's'}"
    lines.append(f"  rows        {rows}")
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
    return lines + [f"  note: {note}" for note in table["notes"]]
