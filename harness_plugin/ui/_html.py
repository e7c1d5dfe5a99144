"""HTML pieces shared by the catalog page and the notebook's `_repr_html_`.

Every text that comes from a card, a table or a caller goes through `escape` (`h` here): card
text is untrusted data. Nothing here emits a script or an inline event handler; the page's only
script is the shipped `static/app.js`, which the Content Security Policy alone admits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from html import escape
from urllib.parse import urlencode

from cards import ExperimentCardV1

Href = Callable[..., str]  # path, **query -> a URL carrying the page token


def h(value: object) -> str:
    """`value` as escaped HTML text (quotes included: safe in an attribute too)."""
    return escape("" if value is None else str(value), quote=True)


def href_for(token: str | None) -> Href:
    """A link builder: `href("/e/ID", v="2")` with the token added (none in a notebook)."""

    def href(path: str, **query: str) -> str:
        params = {k: v for k, v in query.items() if v}
        if token is not None:
            params["token"] = token
        return path + ("?" + urlencode(params) if params else "")

    return href


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "", raw: bool = False
) -> str:
    """A table; cells are escaped unless `raw` (cells built here from escaped parts)."""
    head = "".join(f"<th>{h(x)}</th>" for x in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if raw else h(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f'<table class="{h(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def card_fields(card: ExperimentCardV1) -> str:
    """A card's descriptive and identity fields as a definition list."""
    pairs = [
        ("title", card.title),
        ("summary", card.summary),
        ("source", f"{card.source} @ {card.source_version}"),
        ("tags", ", ".join(card.tags) or "—"),
        ("media type", card.artifact.media_type),
        ("bytes", f"{card.artifact.bytes:,}"),
        ("shape", "—" if card.shape is None else " × ".join(map(str, card.shape))),
        ("created", card.created_at.isoformat(timespec="seconds")),
        ("experiment", card.experiment_id),
        ("sha256", card.artifact.sha256),
    ]
    items = "".join(f"<dt>{h(k)}</dt><dd>{h(v)}</dd>" for k, v in pairs)
    return f'<dl class="card">{items}</dl>'


def experiment_rows(cards: Sequence[ExperimentCardV1], href: Href | None) -> list[list[str]]:
    """Rows of the experiment list (escaped cells; the title links when `href` is given)."""
    rows = []
    for card in cards:
        title = h(card.title)
        if href is not None:
            title = f'<a href="{h(href("/e/" + card.experiment_id))}">{title}</a>'
        rows.append(
            [
                title,
                h(card.source),
                h(card.source_version),
                h(", ".join(card.tags)),
                h(card.created_at.date().isoformat()),
                f"<code>{h(card.experiment_id[:16])}…</code>",
            ]
        )
    return rows


def preview_table(rows: Sequence[dict[str, object]], columns: Sequence[str]) -> str:
    """The first rows of a table, every value escaped and clipped."""
    return table(columns, ([_cell(r.get(c)) for c in columns] for r in rows), cls="rows")


def _cell(value: object) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= 80 else text[:79] + "…"


def page(title: str, body: str, *, href: Href) -> str:
    """A whole page: the shipped stylesheet and script only (the CSP forbids anything else)."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{h(title)} · artmem</title>"
        f'<link rel="icon" href="{h(href("/static/favicon.svg"))}">'
        f'<link rel="stylesheet" href="{h(href("/static/app.css"))}">'
        f'<script src="{h(href("/static/app.js"))}" defer></script></head><body>'
        f'<header><a class="home" href="{h(href("/"))}">artmem</a>'
        f'<form method="get" action="/" class="search">'
        f'<input type="hidden" name="token" value="{h(_token(href))}">'
        '<input type="search" name="q" id="q" placeholder="search cards" aria-label="search">'
        '<button type="submit">Search</button></form></header>'
        f"<main>{body}</main></body></html>"
    )


def _token(href: Href) -> str:
    url = href("/")
    return url.partition("token=")[2]
