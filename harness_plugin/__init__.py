"""The host side and composition root: configuration, the tool surface, the JSONL worker, the CLI.

Rooms: `config` (the strict TOML configuration), `_caller` (the host-supplied caller), `_runtime`
(stores, outbox and Honcho client built from a configuration), `_tools` (the tool registry and
its host), `_hybrid` and `_catalogs` (local plus Honcho search), `_serve` (the JSONL worker),
`cli` (parsing and dispatch) with `_command` (what commands share), `_table_commands`,
`_operator_commands`, `_listing`, `_views`, `_status` and `_demo` (what people and scripts see).
`dsh/` will hold the TypeScript plugin that runs `artmem serve` inside the DeepSeek Harness.

Names load lazily (PEP 562): `artmem --help` loads none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cards.lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from harness_plugin._caller import Caller, parse_caller
    from harness_plugin._runtime import Runtime
    from harness_plugin._tools import ToolHost

_EXPORTS = {
    "Caller": "harness_plugin._caller",
    "parse_caller": "harness_plugin._caller",
    "Runtime": "harness_plugin._runtime",
    "ToolHost": "harness_plugin._tools",
}

__all__ = ["Caller", "Runtime", "ToolHost", "parse_caller"]

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
