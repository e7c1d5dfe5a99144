"""Memory tools from inside a kernel: typed wrappers over `dsh_tools.call`.

The host attaches the caller (session, project, call ids) itself; nothing here names a scope,
reads a credential, or talks to Honcho or the store. Replies are decoded into the same structs
the host builds them as (`cards.results`). A failing tool comes back from the bridge as a dict,
which becomes a `ToolFailed` carrying the host's error code.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any, Protocol, TypeVar, cast

import msgspec

from cards.errors import BadReply, NoToolBridge, ToolFailed
from cards.results import RecordResult, ResolveResult, Result, SearchHit, SearchResult

_Result = TypeVar("_Result", bound=Result)


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
        raise NoToolBridge("dsh_tools is not available in this kernel")
    return cast(ToolBridge, found)


async def _call(name: str, arguments: dict[str, Any], result: type[_Result]) -> _Result:
    reply = await _tools().call(name, arguments)
    if not isinstance(reply, Mapping):
        raise BadReply("the tool bridge returned an unexpected value")
    if reply.get("isError"):
        error = reply.get("error")
        error = error if isinstance(error, Mapping) else {"message": str(error)}
        info = error.get("info")
        info = info if isinstance(info, Mapping) else {}
        raise ToolFailed(
            str(info.get("code", "")),
            str(error.get("message", "the tool failed"))[:1000],
            retryable=bool(info.get("retryable", False)),
        )
    try:
        return msgspec.convert(reply.get("value"), result)
    except msgspec.ValidationError as exc:
        raise BadReply(f"the {name} result does not match its schema") from exc


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
    derived_from: Sequence[str] = (),
) -> RecordResult:
    """Record a file under `$RLM_SESSION_DIR/exports/` with its experiment card.

    `derived_from` names experiments of this project the result was derived from (the host
    refuses one that is not, with `lineage.unknown_parent`).

    Raises:
        ToolFailed: the host refused (its `code` says why, e.g. `cas.path_escape`).
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
    if derived_from:  # omitted: a re-record keeps the card's parents
        arguments["derived_from"] = list(derived_from)
    return await _call("memory_artifact_record", arguments, RecordResult)


async def search(query: str, limit: int = 10) -> list[SearchHit]:
    """Search this project's experiment cards (the host picks the project).

    Raises:
        ToolFailed: the host refused.
    """
    found = await _call("memory_search", {"query": query, "limit": limit}, SearchResult)
    return found.hits


async def resolve(experiment_id: str, current_source_version: str | None = None) -> ResolveResult:
    """Resolve an experiment to verified bytes, with freshness against your source version.

    Raises:
        ToolFailed: missing, corrupt or foreign experiments fail closed (e.g. `cas.integrity`).
    """
    arguments: dict[str, Any] = {"experiment_id": experiment_id}
    if current_source_version is not None:
        arguments["current_source_version"] = current_source_version
    return await _call("memory_artifact_resolve", arguments, ResolveResult)
