"""Server mode: `FakeHoncho` over a real ``ThreadingHTTPServer`` on a local port."""

from __future__ import annotations

import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from indexer.testing._model import _Reply

if TYPE_CHECKING:
    from indexer.testing._transports import _Transports

# --------------------------------------------------------------------------------------------
# Server mode
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    thread: threading.Thread | None = None

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up first (a search past its deadline) is not an error here."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def _handler_for(fake: _Transports) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "FakeHoncho"
        sys_version = ""

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: without this, Nagle's algorithm and the
            # client's delayed ACK add ~40 ms to every answer.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            fake._track(self.connection, add=True)

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                fake._track(self.connection, add=False)

        def log_message(self, format: str, *args: object) -> None:
            """Keep test output quiet."""

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw_body = self.rfile.read(length) if length > 0 else b""
            raw_path, _, raw_query = self.path.partition("?")
            if fake.latency_s > 0:
                time.sleep(fake.latency_s)
            result = fake._dispatch(
                method, raw_path, raw_query, self.headers.get("Authorization"), raw_body
            )
            if isinstance(result, _Reply):
                payload = result.encoded()
                self.send_response(result.status)
                for name, value in result.headers.items():
                    self.send_header(name, value)
                if result.status != 204:
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if result.status != 204:
                    self.wfile.write(payload)
                return
            # No answer at all: hold the line (timeout) or just hang up.
            self.close_connection = True
            if result == "timeout":
                fake._hold(self.connection)

    return Handler
