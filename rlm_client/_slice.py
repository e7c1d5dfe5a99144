"""Bounded, verified slices of a resolved result, read inside the kernel."""

from __future__ import annotations

from collections.abc import Sequence

from cards.results import ResolveResult
from cas.slicing import SliceRequest, SliceResult, SliceSource
from cas.slicing import read_slice as _read_slice


def read_slice(
    resolved: ResolveResult,
    *,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> SliceResult:
    """Read only the needed columns and rows of a resolved table, within hard bounds.

    Every chunk read is checked against the manifest the host verified; nothing else of the
    file is loaded. `result.table` is a pyarrow Table; `result.truncated` says a bound stopped it.

    Raises:
        ArtifactError: a typed error (unknown column, bad filter, integrity failure, ...).
    """
    source = SliceSource(
        path=resolved.path,
        manifest_path=resolved.chunk_manifest_path,
        size=resolved.artifact.bytes,
        media_type=resolved.artifact.media_type,
        chunk_manifest_sha256=resolved.artifact.chunk_manifest_sha256,
    )
    request = SliceRequest(
        columns=None if columns is None else tuple(columns), where=where, limit=limit, offset=offset
    )
    return _read_slice(source, request)
