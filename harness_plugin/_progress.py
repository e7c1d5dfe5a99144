"""What people see on a terminal: progress bars and tables drawn by `rich`, loaded only there.

Under `--json`, in a pipe or in a file nothing here loads: no bar is drawn, and tables are plain
aligned text that greps and diffs well.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID


class TerminalProgress:
    """A transient byte-counting bar on the terminal (`rich`), cleared when closed."""

    def __init__(self, stream: TextIO, label: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress: RichProgress = Progress(
            TextColumn(label),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(file=stream),
            transient=True,
        )
        self._task: TaskID | None = None

    def start(self, total: int) -> None:
        """Begin a bar for `total` bytes."""
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task("", total=total)
        else:
            self._progress.reset(self._task, total=total)
        self._progress.refresh()  # drawn now, not at the next tick of rich's refresh thread

    def advance(self, done: int) -> None:
        """Move the bar on by `done` bytes."""
        if self._task is not None:
            self._progress.advance(self._task, done)

    def close(self) -> None:
        """Stop and erase the bar so the next output starts on a clean line."""
        if self._task is not None:
            self._progress.stop()


def progress_for(stream: TextIO, label: str, *, enabled: bool) -> TerminalProgress | None:
    """A bar on `stream` when it is a terminal and output is for a person, else None."""
    if not enabled or not stream.isatty():
        return None
    return TerminalProgress(stream, label)


def table_lines(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, terminal: bool
) -> list[str]:
    """A table as lines: drawn by `rich` for a terminal, plain aligned columns otherwise.

    A column of numbers (every cell starts with a digit) is right-aligned in the plain form.
    """
    if terminal:
        import shutil

        from rich.console import Console
        from rich.table import Table

        table = Table(*headers, box=None, header_style="bold", pad_edge=False)
        for row in rows:
            table.add_row(*row)
        buffer = io.StringIO()
        width = shutil.get_terminal_size().columns
        Console(file=buffer, width=width, force_terminal=True).print(table)
        return buffer.getvalue().rstrip("\n").splitlines()
    columns = list(zip(headers, *rows, strict=True))
    widths = [max(len(cell) for cell in column) for column in columns]
    numeric = [bool(rows) and all(c[:1].isdigit() for c in column[1:]) for column in columns]
    lines = []
    for row in (headers, *rows):
        cells = [
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(row, widths, numeric, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines
