"""The host side and composition root, in rooms (ARCHITECTURE.md lists them).

`config/` (the strict TOML configuration, data only); the shared host pieces `_stores` (the one
place that builds a store from a configuration), `_runtime` (stores, outbox and Honcho client),
`_catalogs`, `_views`, `_status`, `_progress`, `_lineage`, `_diff`, `_shortids`; `memory/` (the
conversational memory); `worker/` (`artmem serve`: the JSONL worker and the tools); `eval/`
(`artmem eval`); `ui/` (the catalog page); `notebook` (the read-only notebook API); `cli/` (the
`artmem` commands); `dsh/` is the TypeScript plugin that runs `artmem serve` inside the
DeepSeek Harness.

Names load lazily (PEP 562): `artmem --help` loads none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness_plugin._runtime import Runtime
    from harness_plugin._stores import build_store
    from harness_plugin.worker._caller import Caller, parse_caller
    from harness_plugin.worker._tools import ToolHost

_EXPORTS = {
    "Caller": "harness_plugin.worker._caller",
    "parse_caller": "harness_plugin.worker._caller",
    "Runtime": "harness_plugin._runtime",
    "ToolHost": "harness_plugin.worker._tools",
    "build_store": "harness_plugin._stores",
}

__all__ = ["Caller", "Runtime", "ToolHost", "build_store", "parse_caller"]


def __getattr__(name: str) -> object:
    """Load an exported name's module on first use (PEP 562) and keep the name here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The exported names."""
    return sorted(_EXPORTS)
