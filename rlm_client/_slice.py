"""Bounded, verified slices of a resolved result, read inside the kernel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cards.model import ArtifactRefV1
from cas._slice import SliceRequest, SliceResult
from cas._slice import read_slice as _read_slice
from rlm_client._client import Resolved


@dataclass(frozen=True, slots=True)
class _Target:
    """What a slice verifies against: the artifact reference and the manifest digest."""

    artifact: ArtifactRefV1
    chunk_manifest_sha256: str


def read_slice(
    resolved: Resolved,
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
    artifact = ArtifactRefV1(
        schema_version=1,
        artifact_id=resolved.artifact_id,
        sha256=resolved.sha256,
        bytes=resolved.bytes,
        media_type=resolved.media_type,
        created_at=datetime.fromisoformat(resolved.verified_at.replace("Z", "+00:00")),
    )
    target = _Target(artifact, resolved.chunk_manifest_sha256)
    request = SliceRequest(
        columns=None if columns is None else tuple(columns), where=where, limit=limit, offset=offset
    )
    return _read_slice(resolved.path, target, resolved.path + ".chunks", request)
