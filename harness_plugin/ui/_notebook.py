"""HTML for Jupyter (`_repr_html_`): the page's own renderers, without links or a token.

A notebook shows HTML in the page of the notebook itself: everything here is escaped text,
inline SVG and a scoped class name, with no script and no event handler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness_plugin.ui import _charts
from harness_plugin.ui._html import card_fields, experiment_rows, h, preview_table, table

if TYPE_CHECKING:
    import pyarrow as pa

    from cards import ExperimentCardV1
    from cas import SearchHit
    from cas.slicing import TableInfo

PREVIEW_ROWS = 20


def card_html(
    card: ExperimentCardV1, *, freshness: str | None = None, info: TableInfo | None = None
) -> str:
    """A card, its freshness and, for a table, its columns from the footer."""
    parts = [f'<div class="artmem"><strong>{h(card.title)}</strong>', card_fields(card)]
    if freshness is not None:
        parts.append(f"<p>freshness: <b>{h(freshness)}</b></p>")
    if info is not None:
        stats = {c.path: c for c in info.columns}
        rows = []
        for field in info.fields:
            s = stats.get(field.name)
            nulls = s.null_count if s is not None else None
            bar = ""
            if nulls is not None and info.num_rows:
                bar = _charts.fraction_bar(nulls, info.num_rows, label="nulls")
            low, high = (None, None) if s is None else (s.min, s.max)
            rows.append([h(field.name), h(field.type), f"{h(nulls)} {bar}", h(low), h(high)])
        parts.append(f"<p>{h(info.num_rows)} rows</p>")
        parts.append(table(["column", "type", "nulls", "min", "max"], rows, raw=True))
    return "".join(parts) + "</div>"


def hits_html(hits: Sequence[SearchHit]) -> str:
    """Search hits as the page's experiment list, with their scores."""
    rows = experiment_rows([hit.card for hit in hits], None)
    for row, hit in zip(rows, hits, strict=True):
        row.append(f"{hit.score:.2f}")
    headers = ["title", "source", "version", "tags", "created", "id", "score"]
    return f'<div class="artmem">{table(headers, rows, raw=True)}</div>'


def rows_html(rows: pa.Table, *, charts: bool = True) -> str:
    """A slice: a chart per column (distribution of its rows) above its first rows."""
    names = list(rows.column_names)
    pylist: list[dict[str, object]] = rows.to_pylist()
    parts = ['<div class="artmem">']
    if charts:
        cells = []
        for name, column in zip(names, rows.columns, strict=True):
            values = column.to_pylist()
            chart = (
                _charts.histogram(values, label=name)
                if _numeric(column.type)
                else _charts.top_values(values, label=name)
            )
            cells.append(f"<td>{h(name)}<br>{chart}</td>")
        parts.append(f"<table><tr>{''.join(cells)}</tr></table>")
    parts.append(f"<p>{len(pylist):,} rows</p>")
    parts.append(preview_table(pylist[:PREVIEW_ROWS], names))
    return "".join(parts) + "</div>"


def _numeric(kind: object) -> bool:
    import pyarrow.types as types

    return bool(types.is_integer(kind) or types.is_floating(kind))


class SearchHits(list["SearchHit"]):
    """Search hits: a plain list, shown in Jupyter as the page's experiment table."""

    def _repr_html_(self) -> str:
        return hits_html(self)


class Preview:
    """A slice's rows (`table`, a pyarrow Table), shown in Jupyter with a chart per column."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __repr__(self) -> str:
        return f"Preview({self.table.num_rows} rows: {', '.join(self.table.column_names)})"

    def _repr_html_(self) -> str:
        return rows_html(self.table)
