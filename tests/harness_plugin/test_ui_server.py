"""`artmem ui` without a browser: token, host, methods, headers, escaping, every page's status."""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request

import pytest
from ui_helpers import HOSTILE, running_ui


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    yield from running_ui(tmp_path_factory)


def _get(url: str, **headers: str) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def test_a_request_without_the_right_token_is_refused(ui):
    process, catalog = ui
    assert _get(f"{process.base}/")[0] == 403
    assert _get(f"{process.base}/?token=wrong")[0] == 403
    exp = catalog.ids["dose.parquet"]
    status, _, body = _get(f"{process.base}/e/{exp}?token=x{process.token}")
    assert status == 403 and "Dose" not in body
    assert _get(f"{process.base}/static/app.js")[0] == 403


def test_a_foreign_host_and_writes_are_refused(ui):
    process, _ = ui
    assert _get(process.url, Host="attacker.example:80")[0] == 403
    host, port = process.base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        connection.request(method, process.page("/"))
        response = connection.getresponse()
        response.read()
        assert response.status == 405, method
    connection.close()


def test_every_page_is_served_with_a_strict_policy(ui):
    process, catalog = ui
    for path in ("/", "/?q=dose", "/?sort=title&order=asc&tag=cohort",
                 f"/e/{catalog.ids['summary.parquet']}?v=v2",
                 f"/compare?a={catalog.ids['dose.parquet']}&b={catalog.ids['visits.parquet']}",
                 "/static/app.css", "/static/app.js"):  # fmt: skip
        status, headers, body = _get(process.page(path))
        assert status == 200, (path, body[:500])
        csp = headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        if path.startswith("/static"):
            continue
        assert "<script>" not in body and " on" + "error=" not in body.replace(
            "&lt;img src=x onerror=alert(1)&gt;", ""
        )
    status, _, body = _get(process.page(f"/e/{catalog.ids['hostile.txt']}"))
    assert status == 200 and HOSTILE not in body and "&lt;img src=x onerror=alert(1)&gt;" in body
    assert _get(process.page("/e/exp_" + "a" * 52))[0] == 404
    assert _get(process.page("/nowhere"))[0] == 404


def test_the_experiment_page_carries_freshness_down_the_lineage(ui):
    process, catalog = ui
    summary = catalog.ids["summary.parquet"]
    _, _, body = _get(process.page(f"/e/{summary}?v=v2"))
    assert 'id="freshness">stale<' in body
    assert catalog.ids["dose.parquet"][:16] in body  # a parent in the lineage graph
    _, _, body = _get(process.page(f"/e/{summary}?v=v1"))
    assert 'id="freshness">fresh<' in body


def test_the_list_filters_as_artmem_list_does(ui):
    process, catalog = ui
    status, _, body = _get(process.page("/?tag=COHORT"))  # tags by casefold, as list and search
    assert status == 200 and f"{len(catalog.ids)} experiments" in body
    status, _, body = _get(process.page("/?since=2999-01-01"))
    assert status == 200 and "0 experiments" in body
    status, _, body = _get(process.page("/?since=yesterday"))
    assert status == 400 and "since must be a date YYYY-MM-DD" in body
