"""The catalog page in a real browser: Debian's Chromium, headless, driven by Playwright.

Skipped when /usr/bin/chromium or the `playwright` package is absent (`.ci/run` installs both;
Playwright never downloads a browser here: it launches the system one). Screenshots of each
page are written under the test's temporary directory.
"""

from __future__ import annotations

import os
import shutil

import pytest
from ui_helpers import HOSTILE, running_ui

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed"
)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    yield from running_ui(tmp_path_factory)


@pytest.fixture
def page(tmp_path):
    profile = tmp_path / "profile"
    with sync_api.sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1200, "height": 900},
        )
        browser_page = context.new_page()
        problems: list[str] = []
        browser_page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
        browser_page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        browser_page.on(
            "console",
            lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None,
        )
        browser_page.problems = problems  # type: ignore[attr-defined]
        yield browser_page
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


def test_search_open_chart_lineage_and_compare(ui, page, tmp_path):
    process, catalog = ui
    page.goto(process.url)
    page.screenshot(path=str(tmp_path / "list.png"), full_page=True)
    page.fill("#q", "dose")
    page.click("header button[type=submit]")
    page.wait_for_selector("h1:has-text('found')")
    page.click("text=Mean dose by cohort")
    page.wait_for_selector("svg.lineage")
    assert page.locator("svg.chart").count() >= 2  # a distribution per column
    assert page.locator("svg.lineage g.node").count() == 2  # its two parents
    assert page.text_content("#freshness") == "not_checked"
    page.fill("#v", "v2")
    page.click("form.check button")
    page.wait_for_selector("#freshness:has-text('stale')")
    assert page.locator(".warnings a").count() >= 1  # names a stale ancestor
    page.screenshot(path=str(tmp_path / "experiment.png"), full_page=True)
    page.click("svg.lineage g.node >> nth=0")  # a parent's page, through the graph
    page.wait_for_selector("h1:has-text('by patient')")
    page.select_option("#b", catalog.ids["visits.parquet"])
    page.click("form.compare button")
    page.wait_for_selector("h1:has-text('Comparison')")
    assert "400 → 300" in page.text_content("main")
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    assert page.problems == []  # type: ignore[attr-defined]
    assert all((tmp_path / n).stat().st_size > 0 for n in ("list.png", "experiment.png"))


def test_a_hostile_title_runs_no_script(ui, page, tmp_path):
    process, catalog = ui
    for path in ("/", "/?q=img", f"/e/{catalog.ids['hostile.txt']}"):
        page.goto(process.page(path))
        page.wait_for_load_state("load")
        assert page.locator("img").count() == 0  # shown as text, never as an element
        assert HOSTILE in page.text_content("main")
    page.screenshot(path=str(tmp_path / "hostile.png"), full_page=True)
    assert page.problems == []  # type: ignore[attr-defined]


def test_a_request_without_the_token_is_refused(ui, page):
    process, catalog = ui
    response = page.goto(f"{process.base}/e/{catalog.ids['dose.parquet']}")
    assert response is not None and response.status == 403
    assert "Dose" not in page.content()
