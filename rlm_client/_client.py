"""Memory tools from inside a kernel: typed wrappers over `dsh_tools.call`.

The host attaches the caller (session, project, call ids) itself; nothing here names a scope,
reads a credential, or talks to Honcho or the store. A failing tool comes back from the bridge
as a dict, which becomes a `ClientError` carrying the host's error code.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, Protocol

from rlm_client._errors import ClientError


class ToolBridge(Protocol):
    """The kernel's `dsh_tools` object (async)."""

    async def call(self, name: str, arguments: dict[str, Any]) -> object:
        """Call a host tool."""


_bridge: ToolBridge | None = None


def use_bridge(bridge: ToolBridge | None) -> None:
    """Use `bridge` instead of the kernel's global `dsh_tools` (tests, other hosts)."""
    global _bridge
    _bridge = bridge


def _tools() -> ToolBridge:
    if _bridge is not None:
        return _bridge
    found = getattr(builtins, "dsh_tools", None) or getattr(
        sys.modules["__main__"], "dsh_tools", None
    )
    if found is None:
        raise ClientError("client.no_bridge", "dsh_tools is not available in this kernel")
    return found  # type: ignore[no-any-return]


async def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = await _tools().call(name, arguments)
    if not isinstance(reply, Mapping):
        raise ClientError("client.bad_reply", "the tool bridge returned an unexpected value")
    if reply.get("isError"):
        error = reply.get("error") or {}
        info = error.get("info") if isinstance(error, Mapping) else None
        info = info if isinstance(info, Mapping) else {}
        raise ClientError(
            str(info.get("code", "tool.error")),
            str(error.get("message", "the tool failed") if isinstance(error, Mapping) else error),
            retryable=bool(info.get("retryable", False)),
        )
    value = reply.get("value")
    if not isinstance(value, Mapping):
        raise ClientError("client.bad_reply", "the tool result is not an object")
    return dict(value)


@dataclass(frozen=True, slots=True)
class Recorded:
    """A recorded result: its ids, digest and size, and whether Honcho indexing was queued."""

    experiment_id: str
    artifact_id: str
    sha256: str
    bytes: int
    deduplicated: bool
    honcho_queued: bool
    index_state: str
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Hit:
    """A search hit: an experiment card (untrusted data written by an earlier session)."""

    experiment_id: str
    artifact_id: str
    title: str | None
    summary: str | None
    source_version: str | None
    tags: tuple[str, ...]
    score: float
    source: str
    index_state: str
    available_locally: bool


@dataclass(frozen=True, slots=True)
class Resolved:
    """A verified local copy of an experiment's bytes (size and SHA-256 proven by the host)."""

    experiment_id: str
    path: str
    artifact_id: str
    sha256: str
    bytes: int
    media_type: str
    chunk_manifest_sha256: str
    title: str
    source_version: str
    columns: tuple[str, ...]
    freshness: str
    verified_at: str
    warnings: tuple[str, ...]


async def record(
    path: str | PathLike[str],
    *,
    title: str,
    summary: str,
    query_fingerprint: str,
    source: str,
    source_version: str,
    media_type: str = "application/vnd.apache.parquet",
    tags: Sequence[str] = (),
    columns: Sequence[str] = (),
    shape: Sequence[int] | None = None,
) -> Recorded:
    """Record a file under `$RLM_SESSION_DIR/exports/` with its experiment card.

    Raises:
        ClientError: the host refused (its code says why, e.g. `cas.path_escape`).
    """
    arguments: dict[str, Any] = {
        "source_path": str(path),
        "title": title,
        "summary": summary,
        "query_fingerprint": query_fingerprint,
        "source": source,
        "source_version": source_version,
        "media_type": media_type,
        "tags": list(tags),
        "columns": list(columns),
    }
    if shape is not None:
        arguments["shape"] = list(shape)
    value = await _call("memory_artifact_record", arguments)
    return Recorded(
        experiment_id=value["experiment_id"],
        artifact_id=value["artifact_id"],
        sha256=value["sha256"],
        bytes=int(value["bytes"]),
        deduplicated=bool(value["deduplicated"]),
        honcho_queued=bool(value["honcho_queued"]),
        index_state=value["index_state"],
        warnings=tuple(value.get("warnings", ())),
    )


async def search(query: str, limit: int = 10) -> list[Hit]:
    """Search this project's experiment cards (the host picks the project).

    Raises:
        ClientError: the host refused.
    """
    value = await _call("memory_search", {"query": query, "limit": limit})
    return [
        Hit(
            experiment_id=h["experiment_id"],
            artifact_id=h["artifact_id"],
            title=h.get("title"),
            summary=h.get("summary"),
            source_version=h.get("source_version"),
            tags=tuple(h.get("tags", ())),
            score=float(h.get("score", 0.0)),
            source=h["source"],
            index_state=h["index_state"],
            available_locally=bool(h["available_locally"]),
        )
        for h in value.get("hits", [])
    ]


async def resolve(experiment_id: str, current_source_version: str | None = None) -> Resolved:
    """Resolve an experiment to verified bytes, with freshness against your source version.

    Raises:
        ClientError: missing, corrupt or foreign experiments fail closed (e.g. `cas.integrity`).
    """
    arguments: dict[str, Any] = {"experiment_id": experiment_id}
    if current_source_version is not None:
        arguments["current_source_version"] = current_source_version
    value = await _call("memory_artifact_resolve", arguments)
    artifact, card = value["artifact"], value["card"]
    return Resolved(
        experiment_id=value["experiment_id"],
        path=value["path"],
        artifact_id=artifact["artifact_id"],
        sha256=artifact["sha256"],
        bytes=int(artifact["bytes"]),
        media_type=artifact["media_type"],
        chunk_manifest_sha256=artifact["chunk_manifest_sha256"],
        title=card["title"],
        source_version=card["source_version"],
        columns=tuple(card.get("columns", ())),
        freshness=value["freshness"],
        verified_at=value["verified_at"],
        warnings=tuple(value.get("warnings", ())),
    )
