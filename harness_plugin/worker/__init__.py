"""The JSONL worker for the harness.

`_serve` (the protocol loop), `_tools` (the tool registry and its host), `_caller` (the
host-supplied caller), `_hybrid` (local plus Honcho search).
"""
