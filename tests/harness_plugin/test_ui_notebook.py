"""Jupyter's rich display: experiments, search hits and slices from the page's renderers."""

from __future__ import annotations

from html.parser import HTMLParser

import pyarrow as pa
import pytest
from ui_helpers import HOSTILE, recorded_project

from harness_plugin.notebook import open_store
from harness_plugin.ui import rows_html


class _Elements(HTMLParser):
    """The elements and attributes of an HTML fragment, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]


def _parsed(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    return parser


@pytest.fixture
def store(tmp_path, monkeypatch):
    catalog = recorded_project(tmp_path)
    monkeypatch.setenv("ARTMEM_CONFIG", catalog.env["ARTMEM_CONFIG"])
    monkeypatch.chdir(catalog.cwd)
    return open_store(), catalog


def test_an_experiment_a_search_and_a_slice_render_as_html(store):
    nb, catalog = store
    shown = nb.show(catalog.ids["dose.parquet"], "v1")
    html = shown._repr_html_()
    assert "Dose by patient" in html and "fresh" in html and "patient" in html
    hits = nb.search("dose")
    assert isinstance(hits, list) and hits
    assert "Mean dose by cohort" in hits._repr_html_()
    preview = nb.preview(catalog.ids["dose.parquet"])
    assert preview.table.num_rows == 400
    parsed = _parsed(preview._repr_html_())
    assert parsed.tags.count("svg") >= 3 and "script" not in parsed.tags


def test_hostile_text_is_escaped_in_every_renderer(store):
    nb, catalog = store
    for html in (
        nb.show(catalog.ids["hostile.txt"])._repr_html_(),
        nb.search("img")._repr_html_(),
        rows_html(pa.table({HOSTILE: [HOSTILE, None]})),
    ):
        parsed = _parsed(html)
        assert "img" not in parsed.tags and "script" not in parsed.tags
        assert not any(a.startswith("on") for a in parsed.attributes)
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
