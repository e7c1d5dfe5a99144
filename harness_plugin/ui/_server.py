"""The catalog page's HTTP server: 127.0.0.1 only, a random token on every request, GET only.

The standard library's `http.server` serves it (no framework: four routes, and a wheel that
needs no new dependency). Every response carries a strict Content Security Policy (scripts and
styles from this server only; no inline script, no framing), `nosniff`, no referrer (the token
is in the URL) and no caching. A request without the token, with a foreign `Host` (DNS
rebinding), or with any method but GET and HEAD is refused before any card is read.
"""

from __future__ import annotations

import hmac
import re
import secrets
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from urllib.parse import parse_qsl, urlsplit

from cards import ArtifactError, InvalidInput
from cards.errors import ExperimentNotFound
from harness_plugin.ui import _pages
from harness_plugin.ui._html import h, href_for, page

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_STATIC = {
    "/static/app.css": "text/css",
    "/static/app.js": "text/javascript",
    "/static/favicon.svg": "image/svg+xml",
}
_EXPERIMENT = re.compile(r"/e/(exp_[a-z2-7]{52})")
MAX_QUERY_CHARS = 2_000


class CatalogServer(ThreadingHTTPServer):
    """The server: its site, its token, and one lock so page builds run one at a time."""

    daemon_threads = True

    def __init__(self, site: _pages.Site, port: int = 0, token: str | None = None) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.site = site
        self.token = token or secrets.token_urlsafe(32)
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        """The address to open: the page with its token."""
        return f"http://127.0.0.1:{self.server_address[1]}/?token={self.token}"


class _Handler(BaseHTTPRequestHandler):
    server: CatalogServer
    server_version = "artmem"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  # http.server's
        """Log nothing: a URL carries the token."""

    def do_HEAD(self) -> None:  # noqa: N802  # http.server's name
        """As GET, without the body."""
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        """Serve a page or a shipped asset."""
        self._answer(body=True)

    def _refuse_method(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, "text/plain", b"read-only\n", body=True)

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse_method  # noqa: N815

    def _answer(self, *, body: bool) -> None:
        parts = urlsplit(self.path)
        if len(parts.query) > MAX_QUERY_CHARS:
            self._send(HTTPStatus.REQUEST_URI_TOO_LONG, "text/plain", b"too long\n", body=body)
            return
        query = dict(parse_qsl(parts.query, max_num_fields=20))
        if not self._host_ok() or not hmac.compare_digest(
            query.get("token", "").encode(), self.server.token.encode()
        ):
            self._send(HTTPStatus.FORBIDDEN, "text/plain", b"forbidden: token\n", body=body)
            return
        if parts.path in _STATIC:
            data = files("harness_plugin.ui").joinpath("static", parts.path[8:]).read_bytes()
            self._send(HTTPStatus.OK, _STATIC[parts.path], data, body=body)
            return
        status, html = self._page(parts.path, query)
        self._send(status, "text/html; charset=utf-8", html.encode(), body=body)

    def _host_ok(self) -> bool:
        port = self.server.server_address[1]
        return self.headers.get("Host", "") in (f"127.0.0.1:{port}", f"localhost:{port}")

    def _page(self, path: str, query: dict[str, str]) -> tuple[HTTPStatus, str]:
        href = href_for(self.server.token)
        site = self.server.site
        try:
            with self.server.lock:
                if path == "/":
                    title, content = _pages.home(site, query, href)
                elif match := _EXPERIMENT.fullmatch(path):
                    title, content = _pages.experiment(site, match.group(1), query, href)
                elif path == "/compare":
                    title, content = _pages.compare(site, query, href)
                else:
                    return HTTPStatus.NOT_FOUND, page("Not found", "<h1>Not found</h1>", href=href)
        except ArtifactError as exc:
            status = HTTPStatus.CONFLICT
            if isinstance(exc, InvalidInput):
                status = HTTPStatus.BAD_REQUEST
            if isinstance(exc, ExperimentNotFound):
                status = HTTPStatus.NOT_FOUND
            message = f'<h1>{h(exc.code)}</h1><p class="error">{h(exc.to_dict()["message"])}</p>'
            return status, page("Error", message, href=href)
        return HTTPStatus.OK, page(title, content, href=href)

    def _send(self, status: HTTPStatus, media: str, data: bytes, *, body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.end_headers()
        if body:
            self.wfile.write(data)
