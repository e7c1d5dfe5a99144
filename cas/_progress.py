"""The progress seam: long operations report bytes done; the CLI decides whether to draw."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Receives the size of a long operation, then how many bytes are done as it goes."""

    def start(self, total: int) -> None:
        """The operation will process `total` bytes."""

    def advance(self, done: int) -> None:
        """`done` more bytes were processed."""
