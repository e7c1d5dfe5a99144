"""Run `FakeHoncho` over HTTP in a separate process, so it never competes for our GIL."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

_SERVER = """
import sys
from indexer.testing import FakeHoncho
fake = FakeHoncho(api_key=sys.argv[1])
fake.latency_s = float(sys.argv[2])
with fake.serve() as url:
    print(url, flush=True)
    for line in sys.stdin:  # "latency SECONDS" changes the added latency; EOF stops
        fake.latency_s = float(line.split()[1])
        print("ok", flush=True)
"""


class FakeServer:
    """A running fake: its URL, and a way to change its added latency."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self._process = process
        self.url = url

    def set_latency(self, seconds: float) -> None:
        """Answer every later request after `seconds`."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(f"latency {seconds}\n")
        self._process.stdin.flush()
        self._process.stdout.readline()


@contextlib.contextmanager
def fake_honcho(api_key: str, latency_s: float = 0.0) -> Iterator[FakeServer]:
    """Run a fake Honcho answering after `latency_s` seconds (changeable) until exit."""
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, api_key, str(latency_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield FakeServer(server, server.stdout.readline().strip())
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
