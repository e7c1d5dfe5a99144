"""Bounded, verified slices of a resolved result, read inside the kernel."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cards.results import ResolveResult
from cards.table_read import table_read
from cas.slicing import SliceRequest, SliceResult, SliceSource
from cas.slicing import read_slice as _read_slice


def read_slice(
    resolved: ResolveResult,
    *,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    csv_types: Mapping[str, str] | None = None,
    csv_nulls: Sequence[str] | None = None,
    csv_decimal: str | None = None,
    csv_encoding: str | None = None,
) -> SliceResult:
    """Read only the needed columns and rows of a resolved table, within hard bounds.

    Every chunk read is checked against the manifest the host verified; nothing else of the
    file is loaded. `result.table` is a pyarrow Table; `result.truncated` says a bound stopped it.
    A CSV or TSV is read with the column types, null tokens, decimal mark and encoding its card
    declares (`resolved.card.table_read`); `csv_types` ({column: type}), `csv_nulls`,
    `csv_decimal` (`","` reads 1,5 as 1.5) and `csv_encoding` (`"cp1252"`) override them for
    this read.

    Raises:
        ArtifactError: a typed error (unknown column, bad filter, integrity failure, ...).
    """
    source = SliceSource(
        path=resolved.path,
        manifest_path=resolved.chunk_manifest_path,
        size=resolved.artifact.bytes,
        media_type=resolved.artifact.media_type,
        chunk_manifest_sha256=resolved.artifact.chunk_manifest_sha256,
        table_read=resolved.card.table_read,  # decoded and checked as a `TableRead`
    )
    request = SliceRequest(
        columns=None if columns is None else tuple(columns),
        where=where,
        limit=limit,
        offset=offset,
        table_read=table_read(csv_types, csv_nulls, csv_decimal, csv_encoding),
    )
    return _read_slice(source, request)
