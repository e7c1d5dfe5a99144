"""How requests reach `FakeHoncho`: an ``httpx.MockTransport``, or real HTTP on a local port.

A mixin over the fake's state: the server's lifecycle (start, stop, ``down``), the connections
it tracks so a stop or an outage cuts them, and a held connection that never answers (a
timeout in server mode). Every request goes to the fake's `_dispatch`.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx

from indexer.testing._model import _Reply, _Result
from indexer.testing._server import _handler_for, _Server


class _Transports:
    """The transports of `FakeHoncho`; the fake holds the state they use."""

    timeout_hold_s: float
    latency_s: float
    _lock: threading.RLock
    _down: bool
    _lifecycle: threading.Lock
    _server: _Server | None
    _address: tuple[str, int] | None
    _stopping: threading.Event
    _connections: set[socket.socket]
    _connections_lock: threading.Lock
    _dispatch: Callable[[str, str, str, str | None, bytes], _Result]

    @property
    def down(self) -> bool:
        """Whether the fake refuses connections (see the ``indexer.testing`` docstring)."""
        return self._down

    @down.setter
    def down(self, value: bool) -> None:
        with self._lifecycle:
            with self._lock:
                self._down = value
            if self._address is None:
                return
            if value and self._server is not None:
                self._stop_listener()
            elif not value and self._server is None:
                self._start_listener(*self._address)

    # ---------------------------------------------------------------- transports

    def transport(self) -> httpx.MockTransport:
        """Return an ``httpx.MockTransport`` answering from this fake."""
        return httpx.MockTransport(self._handle_httpx)

    def client(self, base_url: str = "http://honcho.test") -> httpx.Client:
        """Return an ``httpx.Client`` over `transport`, for ``honcho.Honcho(http_client=...)``."""
        return httpx.Client(transport=self.transport(), base_url=base_url)

    @contextlib.contextmanager
    def serve(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
        """Serve the fake over HTTP in a daemon thread; yield its base URL; stop on exit.

        Args:
            host: The address to bind.
            port: The port to bind; 0 picks a free one.

        Yields:
            The base URL, e.g. ``http://127.0.0.1:54321``.

        Raises:
            RuntimeError: If this fake is already serving.
        """
        with self._lifecycle:
            if self._address is not None:
                raise RuntimeError("this FakeHoncho is already serving")
            self._stopping.clear()
            self._start_listener(host, port)
            assert self._server is not None
            self._address = (host, self._server.server_address[1])
            if self._down:
                self._stop_listener()
            base_url = f"http://{host}:{self._address[1]}"
        try:
            yield base_url
        finally:
            with self._lifecycle:
                self._stopping.set()
                self._stop_listener()
                self._address = None

    def _start_listener(self, host: str, port: int) -> None:
        server = _Server((host, port), _handler_for(self))
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"FakeHoncho:{server.server_address[1]}",
            daemon=True,
        )
        thread.start()
        server.thread = thread
        self._server = server

    def _stop_listener(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if server.thread is not None:
            server.thread.join()
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._connections_lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _hold(self, connection: socket.socket) -> None:
        """Keep a connection open without answering until the client leaves (server mode)."""
        deadline = time.monotonic() + self.timeout_hold_s
        while not self._stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                readable, _, _ = select.select([connection], [], [], min(remaining, 0.05))
                if readable:
                    connection.recv(1, socket.MSG_PEEK)  # b"" or data: the client moved on
                    return
            except (OSError, ValueError):
                return

    def _handle_httpx(self, request: httpx.Request) -> httpx.Response:
        raw_path, _, raw_query = request.url.raw_path.decode("ascii").partition("?")
        result = self._dispatch(
            request.method,
            raw_path,
            raw_query,
            request.headers.get("authorization"),
            request.read(),
        )
        if isinstance(result, _Reply):
            headers = {"content-type": "application/json", **result.headers}
            return httpx.Response(result.status, headers=headers, content=result.encoded())
        if result == "refused":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if result == "timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        raise httpx.RemoteProtocolError(
            "Server disconnected without sending a response.", request=request
        )
