"""Small charts as inline SVG, drawn on the server: no script, no chart library, no network.

Every label is escaped; numbers are formatted here, so a chart holds no caller text unescaped.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 220, 64
BINS = 16
TOP_VALUES = 6


def histogram(values: Sequence[float], *, label: str) -> str:
    """A histogram of numeric `values` (NaN and None left out) in `BINS` equal bins."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:
        return _empty(label)
    low, high = min(finite), max(finite)
    width = (high - low) / BINS or 1.0
    counts = [0] * BINS
    for v in finite:
        counts[min(int((v - low) / width), BINS - 1)] += 1
    peak = max(counts)
    bar = WIDTH / BINS
    bars = "".join(
        f'<rect x="{i * bar + 0.5:.1f}" y="{HEIGHT - 14 - h:.1f}" width="{bar - 1:.1f}" '
        f'height="{h:.1f}"><title>{_num(low + i * width)} to {_num(low + (i + 1) * width)}: '
        f"{c}</title></rect>"
        for i, c in enumerate(counts)
        for h in [(HEIGHT - 16) * c / peak]
    )
    axis = (
        f'<text x="0" y="{HEIGHT - 2}">{_num(low)}</text>'
        f'<text x="{WIDTH}" y="{HEIGHT - 2}" text-anchor="end">{_num(high)}</text>'
    )
    return _svg(label, bars + axis)


def top_values(values: Sequence[object], *, label: str) -> str:
    """Horizontal bars of the most frequent values (None shown as null)."""
    counts = Counter("null" if v is None else str(v) for v in values).most_common(TOP_VALUES)
    if not counts:
        return _empty(label)
    peak = counts[0][1]
    row = HEIGHT / TOP_VALUES
    parts = []
    for i, (value, count) in enumerate(counts):
        shown = escape(value if len(value) <= 18 else value[:17] + "…")
        length = (WIDTH - 110) * count / peak
        y = i * row
        parts.append(
            f'<text x="0" y="{y + row - 2:.1f}">{shown}</text>'
            f'<rect x="104" y="{y + 1:.1f}" width="{length:.1f}" height="{row - 2:.1f}">'
            f"<title>{shown}: {count}</title></rect>"
        )
    return _svg(label, "".join(parts))


def fraction_bar(part: int, whole: int, *, label: str) -> str:
    """A thin bar: the share `part` of `whole` (nulls of a column's rows)."""
    share = part / whole if whole else 0.0
    return (
        f'<svg class="frac" role="img" aria-label="{escape(label)}" viewBox="0 0 100 6" '
        f'width="100" height="6"><rect class="bg" width="100" height="6"></rect>'
        f'<rect width="{100 * share:.1f}" height="6"></rect></svg>'
    )


def lineage_graph(
    parents: Sequence[tuple[str, str]],
    me: tuple[str, str],
    children: Sequence[tuple[str, str]],
    link: str,
) -> str:
    """Three rows of boxes (parents, the experiment, children) joined by lines.

    Each node is (experiment id, title); `link` is a format string taking the id (already
    carrying the page token) so a box opens its experiment.
    """
    rows = [r for r in (list(parents)[:8], [me], list(children)[:8]) if r]
    mine = 1 if parents else 0  # the experiment's row
    box_w, box_h, gap, row_h = 150, 34, 12, 64
    width = max(len(r) for r in rows) * (box_w + gap)
    centres: list[list[float]] = []
    for r in rows:
        total = len(r) * (box_w + gap) - gap
        start = (width - total) / 2
        centres.append([start + i * (box_w + gap) + box_w / 2 for i in range(len(r))])
    me_x = centres[mine][0]
    lines = [
        f'<line x1="{x}" y1="{level * row_h + box_h}" x2="{x2}" y2="{(level + 1) * row_h}"></line>'
        for level in range(len(rows) - 1)
        for x, x2 in (
            [(x, me_x) for x in centres[level]]
            if level < mine
            else [(me_x, x) for x in centres[level + 1]]
        )  # fmt: skip
    ]
    boxes = []
    for level, (r, xs) in enumerate(zip(rows, centres, strict=True)):
        for (exp_id, title), x in zip(r, xs, strict=True):
            name = escape(title if len(title) <= 22 else title[:21] + "…")
            cls = "me" if level == mine else "node"
            boxes.append(
                f'<a href="{escape(link.format(exp_id))}"><g class="{cls}">'
                f'<rect x="{x - box_w / 2}" y="{level * row_h}" width="{box_w}" '
                f'height="{box_h}" rx="4"></rect>'
                f'<text x="{x}" y="{level * row_h + 14}" text-anchor="middle">{name}</text>'
                f'<text class="id" x="{x}" y="{level * row_h + 28}" text-anchor="middle">'
                f"{escape(exp_id[:16])}…</text><title>{escape(title)}</title></g></a>"
            )
    height = (len(rows) - 1) * row_h + box_h + 2
    return (
        f'<svg class="lineage" role="img" aria-label="lineage" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}">{"".join(lines)}{"".join(boxes)}</svg>'
    )


def _svg(label: str, body: str) -> str:
    return (
        f'<svg class="chart" role="img" aria-label="{escape(label)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">{body}</svg>'
    )


def _empty(label: str) -> str:
    return _svg(label, f'<text x="0" y="{HEIGHT / 2}">no values</text>')


def _num(value: float) -> str:
    return f"{value:.4g}"
