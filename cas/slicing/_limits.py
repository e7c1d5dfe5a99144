"""The operator's bounds on slices, apart from the readers so configuration loads no pyarrow."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from cards.errors import ConfigError

DECODE_SHARE = 4
"""A single decode (a page, a record batch) may claim at most 1/DECODE_SHARE of the memory
bound: decoding holds the compressed bytes, the decoded values and a filtered copy at once."""


@dataclass(frozen=True, slots=True)
class TableBounds:
    """Bounds on what a table's metadata may claim before it is parsed or used.

    `max_decoded_bytes` bounds the declared decoded size of one Parquet page, and of the
    needed columns of one Arrow record batch (or all its dictionaries), checked before
    pyarrow decompresses anything.
    """

    max_columns: int
    max_footer_bytes: int
    max_decoded_bytes: int


@dataclass(frozen=True, slots=True)
class SliceLimits:
    """The operator's ceilings on slices; they may be lowered, never raised.

    `max_memory_bytes` is the address space the process that decodes a table (a child: see
    `_isolated`) may add to what it inherits; a table that needs more is `TableTooLarge`.
    `max_seconds` is the wall-clock budget of one slice or description; past it the child is
    killed and the call raises `SliceTimeout`.
    """

    max_rows: int = 100_000
    max_bytes: int = 64 * 2**20
    max_columns: int = 10_000
    max_footer_bytes: int = 16 * 2**20
    max_read_bytes: int = 256 * 2**20
    max_filter_chars: int = 4_000
    max_memory_bytes: int = 256 * 2**20
    max_seconds: int = 30

    def lowered(self, **overrides: int) -> SliceLimits:
        """These limits with some lowered.

        Raises:
            ConfigError: a name is unknown, or a value is not a positive integer at most the
                current one.
        """
        for name, value in overrides.items():
            if name not in {f.name for f in fields(self)}:
                raise ConfigError(f"slice.{name} is not a known limit")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"slice.{name} must be a positive integer")
            if value > getattr(self, name):
                raise ConfigError(
                    f"slice.{name} may only be lowered (at most {getattr(self, name)})"
                )
        return replace(self, **overrides)

    @property
    def table_bounds(self) -> TableBounds:
        """The bounds checked against a table's metadata."""
        return TableBounds(
            max_columns=self.max_columns,
            max_footer_bytes=self.max_footer_bytes,
            max_decoded_bytes=max(1, self.max_memory_bytes // DECODE_SHARE),
        )


DEFAULT_SLICE_LIMITS = SliceLimits()
