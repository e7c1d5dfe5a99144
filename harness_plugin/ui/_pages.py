"""The catalog's pages: the list and search, an experiment, a comparison.

Each builds its body from the same views the CLI prints (`list`, `show`, `lineage`, `diff`) and
reads a table only through the slicing bounds (`cas.slicing`: footers, and a bounded preview).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence

from cards import ArtifactError, ExperimentCardV1, freshness_verdict
from cards.lineage import ancestry, derived_freshness
from cas import LocalCatalog, Store
from cas.slicing import SliceLimits, SliceRequest, TableInfo, describe, read_slice
from harness_plugin import _diff
from harness_plugin._views import ListFilter, parse_since
from harness_plugin.ui import _charts
from harness_plugin.ui._html import Href, card_fields, experiment_rows, h, preview_table, table

PREVIEW_ROWS = 20
_NUMERIC = re.compile(r"(u?int(8|16|32|64)|halffloat|float|double)$")
SAMPLE_ROWS = 2_000  # rows a chart's distribution is drawn from (bounded, and said so)
_SORTS: dict[str, Callable[[ExperimentCardV1], object]] = {
    "created": lambda c: c.created_at,
    "title": lambda c: c.title.casefold(),
    "source": lambda c: (c.source.casefold(), c.source_version),
}


class Site:
    """What the pages read: the project's store, its catalog and the slicing bounds."""

    def __init__(self, store: Store, catalog: LocalCatalog, limits: SliceLimits) -> None:
        self.store = store
        self.catalog = catalog
        self.limits = limits


def home(site: Site, query: dict[str, str], href: Href) -> tuple[str, str]:
    """The experiment list (filtered, sorted) or, with `q`, the search hits."""
    if query.get("q", "").strip():
        site.catalog.refresh()
        hits = site.catalog.search(query["q"], site.store.limits.search_results)
        cards = [hit.card for hit in hits]
        heading = f"{len(cards)} found for “{h(query['q'])}”"
    else:
        cards = _filtered(site.store.scan_cards().cards, query)
        heading = f"{len(cards)} experiments"
    headers_html = [
        _sort_link("title", query, href),
        _sort_link("source", query, href),
        "version",
        "tags",
        _sort_link("created", query, href),
        "id",
    ]
    head = "".join(f"<th>{x}</th>" for x in headers_html)
    rows = "".join(
        "<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in experiment_rows(cards, href)
    )
    body = (
        f"<h1>{heading}</h1>{_filter_form(query, href)}"
        f'<table class="experiments"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    )
    return "Experiments", body


def _filtered(cards: Sequence[ExperimentCardV1], query: dict[str, str]) -> list[ExperimentCardV1]:
    tag, source, since = query.get("tag"), query.get("source"), query.get("since")
    wanted = ListFilter(
        tags=(tag,) if tag else (),
        source=source or None,
        since=parse_since(since) if since else None,
    )
    chosen = [c for c in cards if wanted.admits(c)]
    sort = query.get("sort", "created")
    key = _SORTS.get(sort, _SORTS["created"])
    descending = query.get("order", "desc" if sort == "created" else "asc") == "desc"
    return sorted(chosen, key=key, reverse=descending)  # type: ignore[arg-type]


def _sort_link(name: str, query: dict[str, str], href: Href) -> str:
    current = query.get("sort", "created")
    order = "asc" if current == name and query.get("order") == "desc" else "desc"
    if current != name:
        order = "desc" if name == "created" else "asc"
    keep = {k: query[k] for k in ("tag", "source", "since") if query.get(k)}
    return f'<a href="{h(href("/", sort=name, order=order, **keep))}">{h(name)}</a>'


def _filter_form(query: dict[str, str], href: Href) -> str:
    token = href("/").partition("token=")[2]
    fields = "".join(
        f'<label>{label} <input name="{name}" id="f-{name}" value="{h(query.get(name, ""))}"'
        f"{' placeholder=YYYY-MM-DD' if name == 'since' else ''}></label>"
        for name, label in (("tag", "tag"), ("source", "source"), ("since", "since"))
    )
    return (
        f'<form method="get" action="/" class="filters">'
        f'<input type="hidden" name="token" value="{h(token)}">{fields}'
        '<button type="submit">Filter</button></form>'
    )


def experiment(
    site: Site, experiment_id: str, query: dict[str, str], href: Href
) -> tuple[str, str]:
    """An experiment: card, freshness, lineage, schema, statistics with charts, first rows."""
    store = site.store
    card = store.load_card(experiment_id)
    current = query.get("v") or None
    parents = [c for c in store.load_cards(card.derived_from) if c is not None]
    every = store.scan_cards().cards  # once: children, and the choices to compare with
    children = [c for c in every if card.experiment_id in c.derived_from]
    sections = [
        f"<h1>{h(card.title)}</h1>",
        card_fields(card),
        _freshness(store, card, current, href),
        "<h2>Lineage</h2>",
        _charts.lineage_graph(
            [(p.experiment_id, p.title) for p in parents],
            (card.experiment_id, card.title),
            [(c.experiment_id, c.title) for c in children],
            href("/e/{}"),
        ),
        _table_sections(site, card),
        _how_to(card),
        _compare_form(every, card, href),
    ]
    return card.title, "".join(sections)


def _freshness(store: Store, card: ExperimentCardV1, current: str | None, href: Href) -> str:
    state, warnings = freshness_verdict(card.source_version, current)
    culprits: tuple[str, ...] = ()
    if card.derived_from and current is not None:
        verdict = derived_freshness(card, ancestry(card, store.load_cards), current)
        state, culprits = verdict.freshness, verdict.culprits
        warnings = (*warnings, *verdict.warnings)
    token = href("/").partition("token=")[2]
    form = (
        f'<form method="get" action="/e/{h(card.experiment_id)}" class="check">'
        f'<input type="hidden" name="token" value="{h(token)}">'
        f"<label>current version of {h(card.source)} "
        f'<input name="v" id="v" value="{h(current or "")}"></label>'
        '<button type="submit">Check</button></form>'
    )
    stale = "".join(f'<li><a href="{h(href("/e/" + c))}">{h(c[:16])}…</a></li>' for c in culprits)
    notes = "".join(f"<li>{h(w)}</li>" for w in warnings)
    return (
        f'<h2>Freshness</h2><p class="verdict {h(state)}" id="freshness">{h(state)}</p>'
        f'{form}<ul class="warnings">{notes}{stale}</ul>'
    )


def _table_sections(site: Site, card: ExperimentCardV1) -> str:
    try:
        located = site.store.locate(card.experiment_id)
        info = describe(located.source, limits=site.limits)
    except ArtifactError as exc:
        return f'<h2>Contents</h2><p class="note">{h(exc.to_dict()["message"])}</p>'
    names = [f.name for f in info.fields]
    try:
        request = SliceRequest(limit=min(SAMPLE_ROWS, site.limits.max_rows))
        sample = read_slice(located.source, request, limits=site.limits)
        rows: list[dict[str, object]] = sample.table.to_pylist()
    except ArtifactError as exc:
        rows = []
        names_note = f'<p class="note">{h(exc.to_dict()["message"])}</p>'
    else:
        names_note = ""
    return (
        "<h2>Columns</h2>"
        + _columns(info, rows)
        + f"<h2>First rows</h2>{names_note}"
        + preview_table(rows[:PREVIEW_ROWS], names)
    )


def _columns(info: TableInfo, rows: list[dict[str, object]]) -> str:
    stats = {c.path: c for c in info.columns}
    body = []
    for field in info.fields:
        values = [r.get(field.name) for r in rows]
        numeric = _NUMERIC.match(field.type) is not None
        chart = (
            _charts.histogram(values, label=field.name)  # type: ignore[arg-type]
            if numeric
            else _charts.top_values(values, label=field.name)
        )
        s = stats.get(field.name)
        nulls = "—" if s is None or s.null_count is None else f"{s.null_count:,}"
        bar = ""
        if s is not None and s.null_count is not None and info.num_rows:
            bar = _charts.fraction_bar(s.null_count, info.num_rows, label="nulls")
        low = "—" if s is None else h(s.min)
        high = "—" if s is None else h(s.max)
        body.append([h(field.name), h(field.type), f"{nulls} {bar}", low, high, chart])
    total = "?" if info.num_rows is None else f"{info.num_rows:,}"
    caption = (
        f'<p class="note">{total} rows; min, max and nulls from the footer; each chart is the '
        f"distribution of the first {len(rows):,} rows read through the slicing bounds</p>"
    )
    headers = ["column", "type", "nulls", "min", "max", "distribution"]
    return caption + table(headers, body, cls="columns", raw=True)


def _how_to(card: ExperimentCardV1) -> str:
    exp = card.experiment_id
    commands = [
        f"artmem resolve {exp} --current-source-version {shlex.quote(card.source_version)}",
        f"artmem slice {exp} --limit 100",
        f"artmem export {exp} result{_suffix(card)}",
        f'store.read_slice("{exp}", limit=100)  # notebook: open_store()',
    ]
    items = "".join(
        f'<li><code>{h(c)}</code> <button type="button" class="copy" data-copy="{h(c)}">'
        "copy</button></li>"
        for c in commands
    )
    return f'<h2>Use it</h2><ul class="howto">{items}</ul>'


def _suffix(card: ExperimentCardV1) -> str:
    media = card.artifact.media_type
    return {"application/vnd.apache.parquet": ".parquet", "text/csv": ".csv"}.get(media, "")


def _compare_form(every: Sequence[ExperimentCardV1], card: ExperimentCardV1, href: Href) -> str:
    others = [c for c in every if c.experiment_id != card.experiment_id]
    options = "".join(
        f'<option value="{h(c.experiment_id)}">{h(c.title)} ({h(c.experiment_id[:12])}…)</option>'
        for c in others[:500]
    )
    token = href("/").partition("token=")[2]
    return (
        '<h2>Compare</h2><form method="get" action="/compare" class="compare">'
        f'<input type="hidden" name="token" value="{h(token)}">'
        f'<input type="hidden" name="a" value="{h(card.experiment_id)}">'
        f'<select name="b" id="b" aria-label="compare with">{options}</select>'
        '<button type="submit">Compare</button></form>'
    )


def compare(site: Site, query: dict[str, str], href: Href) -> tuple[str, str]:
    """Two experiments side by side: card fields, files, schema and statistics."""
    view = _diff.diff_view(site.store, query.get("a", ""), query.get("b", ""), site.limits)
    a, b = str(view["a"]), str(view["b"])
    links = (
        f'<p>A <a href="{h(href("/e/" + a))}">{h(a[:16])}…</a> · '
        f'B <a href="{h(href("/e/" + b))}">{h(b[:16])}…</a></p>'
    )
    card = table(
        ["field", "A", "B"],
        ([str(d["field"]), str(d["a"]), str(d["b"])] for d in view["card"]),  # type: ignore[attr-defined]
        cls="diff",
    )
    files = view["files"]
    assert isinstance(files, dict)
    same = "same bytes" if files["same_bytes"] else "different bytes"
    parts = [f"<h1>Comparison</h1>{links}<h2>Card</h2>{card}<h2>Files</h2><p>{same}: "
             f"{files['a']['bytes']:,} vs {files['b']['bytes']:,} bytes</p>"]  # fmt: skip
    tab = view["table"]
    if isinstance(tab, dict):
        parts.append(_compare_table(tab))
    return "Comparison", "".join(parts)


def _compare_table(tab: dict[str, object]) -> str:
    rows = tab["num_rows"]
    schema = tab["schema"]
    assert isinstance(rows, dict) and isinstance(schema, dict)
    changes = [["added", c["name"], c["type"]] for c in schema["added"]]
    changes += [["removed", c["name"], c["type"]] for c in schema["removed"]]
    changes += [["retyped", c["name"], f"{c['a']} → {c['b']}"] for c in schema["retyped"]]
    stats = []
    for column in tab["columns"]:  # type: ignore[attr-defined]
        a, b = column["a"] or {}, column["b"] or {}
        keys = ("min", "max", "null_count")
        stats.append([column["path"], *(str(x.get(k, "—")) for k in keys for x in (a, b))])
    return (
        f"<h2>Table</h2><p>rows: {h(rows['a'])} → {h(rows['b'])}</p>"
        + table(["change", "column", "type"], changes, cls="schema")
        + table(
            ["column", "min A", "min B", "max A", "max B", "nulls A", "nulls B"], stats, cls="stats"
        )  # fmt: skip
    )
