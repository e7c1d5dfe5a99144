"""The operator's bounds on slices, apart from the readers so configuration loads no pyarrow.

Two sets, kept apart: `SliceLimits` bounds what a slice materialises in memory or hands to a
model or kernel (tools, `rlm_client`, the notebook API, rows on stdout), and may only be
lowered; `ExportLimits` bounds an operator's slice streamed into a file, which holds one batch
at a time, so its rows need no bound and its bytes and time only generous ceilings.
"""

from __future__ import annotations

import msgspec

from cards.errors import ConfigError

DECODE_SHARE = 4
"""A single decode (a page, a record batch) may claim at most 1/DECODE_SHARE of the memory
bound: decoding holds the compressed bytes, the decoded values and a filtered copy at once."""


class TableBounds(msgspec.Struct, frozen=True):
    """Bounds on what a table's metadata may claim before it is parsed or used.

    `max_decoded_bytes` bounds the declared decoded size of one Parquet page, and of the
    needed columns of one Arrow record batch (or all its dictionaries), checked before
    pyarrow decompresses anything.
    """

    max_columns: int
    max_footer_bytes: int
    max_decoded_bytes: int


MAX_EXPORT_SECONDS = 7 * 24 * 3600
"""A week: `poll` takes the remaining time as a C int of milliseconds, which this keeps valid."""
MAX_EXPORT_BYTES = 2**62
"""Beyond any disk; keeps byte counts well inside a signed 64-bit integer."""


class ExportLimits(msgspec.Struct, frozen=True):
    """The operator's bounds on a slice streamed into a file (`artmem slice --out`).

    The child that decodes holds one batch at a time, so `max_rows` defaults to no bound
    (None). `max_bytes` bounds the materialised (Arrow) bytes of the rows written, the measure
    of `SliceLimits.max_bytes`: 64 GiB is more than ordinary tables decode to from the largest
    recordable artifact (1 GiB by default, at 5-20x compression), yet stops a table whose rows
    repeat a large value (a dictionary entry, a run) from filling the disk. Reaching it ends
    the file there, as a truncated slice. `max_seconds` is the export's wall-clock budget: in
    an hour even JSON Lines, the slowest format (about 12 MB/s of rows on one decoding thread;
    Parquet and CSV 40-90 MB/s), writes some 40 GB of rows, and a runaway export still ends.
    Unlike `SliceLimits`, these may be raised (within `MAX_EXPORT_BYTES`, `MAX_EXPORT_SECONDS`).
    """

    max_rows: int | None = None
    max_bytes: int = 64 * 2**30
    max_seconds: int = 3600

    def __post_init__(self) -> None:
        _check_positive("export_max_rows", self.max_rows, 2**63 - 1, optional=True)
        _check_positive("export_max_bytes", self.max_bytes, MAX_EXPORT_BYTES)
        _check_positive("export_max_seconds", self.max_seconds, MAX_EXPORT_SECONDS)


def _check_positive(name: str, value: object, high: int, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ConfigError(f"slice.{name} must be a positive integer at most {high}")


class SliceLimits(msgspec.Struct, frozen=True):
    """The operator's ceilings on slices; they may be lowered, never raised.

    `max_memory_bytes` is the address space the process that decodes a table (a child: see
    `_isolated`) may add to what it inherits; a table that needs more is `TableTooLarge`.
    `max_seconds` is the wall-clock budget of one slice or description; past it the child is
    killed and the call raises `SliceTimeout`. `export` holds the separate bounds of a slice
    streamed into a file; the other limits (columns, footer, reads, filter, memory) bound an
    export too.
    """

    max_rows: int = 100_000
    max_bytes: int = 64 * 2**20
    max_columns: int = 10_000
    max_footer_bytes: int = 16 * 2**20
    max_read_bytes: int = 256 * 2**20
    max_filter_chars: int = 4_000
    max_memory_bytes: int = 256 * 2**20
    max_seconds: int = 30
    export: ExportLimits = ExportLimits()

    def lowered(self, **overrides: int) -> SliceLimits:
        """These limits with some lowered.

        Raises:
            ConfigError: a name is unknown, or a value is not a positive integer at most the
                current one.
        """
        for name, value in overrides.items():
            if name not in self.__struct_fields__ or name == "export":
                raise ConfigError(f"slice.{name} is not a known limit")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"slice.{name} must be a positive integer")
            if value > getattr(self, name):
                raise ConfigError(
                    f"slice.{name} may only be lowered (at most {getattr(self, name)})"
                )
        return msgspec.structs.replace(self, **overrides)

    def with_export(self, export: ExportLimits) -> SliceLimits:
        """These limits, with `export` as the bounds of slices streamed into a file."""
        return msgspec.structs.replace(self, export=export)

    @property
    def table_bounds(self) -> TableBounds:
        """The bounds checked against a table's metadata."""
        return TableBounds(
            max_columns=self.max_columns,
            max_footer_bytes=self.max_footer_bytes,
            max_decoded_bytes=max(1, self.max_memory_bytes // DECODE_SHARE),
        )


DEFAULT_SLICE_LIMITS = SliceLimits()
