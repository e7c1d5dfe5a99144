"""An export's growth against the recorded file: `slice --out` never amplifies in silence.

A 30 KB Parquet file can hold 10^9 rows and become a 2 GB CSV within the export bounds. That
is allowed, but a person must see it happening: while the export runs, the first time its
file passes `WARN_RATIO` times the recorded file's size a warning goes to stderr at once, and
the result names the final ratio.
"""

from __future__ import annotations

from typing import TextIO

from harness_plugin._views import human_size

WARN_RATIO = 100  # output bytes per recorded byte worth a warning (CSV of Parquet: ~2-20)


class Growth:
    """Called with an export's size so far (`export_slice`'s `watch`); warns once."""

    def __init__(self, source_bytes: int, err: TextIO) -> None:
        # A plain class: `slice` loads no `dataclasses` (tests/test_startup_imports.py).
        self.source_bytes = source_bytes
        self.err = err
        self.warned = False

    def __call__(self, written: int) -> None:
        """Take the file's size so far; warn on stderr the first time it passes the ratio."""
        if self.warned or written <= WARN_RATIO * max(self.source_bytes, 1):
            return
        self.warned = True
        self.err.write(
            f"artmem: warning: the output has passed {WARN_RATIO}x the recorded file "
            f"({human_size(self.source_bytes)} recorded, {human_size(written)} written so far) "
            "and is still growing; stop it (Ctrl-C) and narrow it with --columns, --where or "
            "--limit if that is not what you meant\n"
        )
        self.err.flush()

    def ratio(self, written: int) -> float:
        """The output's size over the recorded file's."""
        return round(written / max(self.source_bytes, 1), 1)

    def notice(self, written: int) -> str | None:
        """The result's line when the ratio passed the warning's."""
        if written <= WARN_RATIO * max(self.source_bytes, 1):
            return None
        return (
            f"warning: wrote {self.ratio(written):,.0f}x the recorded file "
            f"({human_size(self.source_bytes)} -> {human_size(written)})"
        )
