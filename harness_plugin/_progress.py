"""A small progress bar for people: drawn on a terminal's stderr, never under --json or a pipe."""

from __future__ import annotations

import time
from typing import TextIO

from harness_plugin._views import human_size

_WIDTH = 30
_REDRAW_S = 0.1


class TerminalProgress:
    """Draws `label [#####.....] 42% 1.2/3.0 GiB` on one line, at most ten times a second."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self._stream = stream
        self._label = label
        self._total = 0
        self._done = 0
        self._drawn_at = 0.0

    def start(self, total: int) -> None:
        """Begin a bar for `total` bytes."""
        self._total, self._done = total, 0
        self._draw(force=True)

    def advance(self, done: int) -> None:
        """Move the bar on by `done` bytes."""
        self._done += done
        self._draw(force=self._done >= self._total)

    def close(self) -> None:
        """Erase the bar so the next output starts on a clean line."""
        if self._drawn_at:
            self._stream.write("\r\x1b[2K")
            self._stream.flush()

    def _draw(self, *, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._drawn_at < _REDRAW_S:
            return
        self._drawn_at = now
        fraction = min(1.0, self._done / self._total) if self._total else 1.0
        filled = int(fraction * _WIDTH)
        bar = "#" * filled + "." * (_WIDTH - filled)
        amount = f"{human_size(self._done)}/{human_size(self._total)}"
        self._stream.write(f"\r{self._label} [{bar}] {fraction:4.0%} {amount}")
        self._stream.flush()


def progress_for(stream: TextIO, label: str, *, enabled: bool) -> TerminalProgress | None:
    """A bar on `stream` when it is a terminal and output is for a person, else None."""
    if not enabled or not stream.isatty():
        return None
    return TerminalProgress(stream, label)
