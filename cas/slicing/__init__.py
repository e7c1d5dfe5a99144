"""Slicing: bounded, verified reads of recorded tables, and what their footers say.

The public surface is small: a `SliceSource` names the bytes and what binds them (the store
builds one with `ProjectStore.locate`, a kernel from a resolve result), `read_slice` reads
projected columns and filtered rows within hard bounds, `describe` reads only the footer (of a
text table, its first block), and `export_slice` streams a slice into a new file batch by
batch, within the operator's export bounds (`ExportLimits`) instead of the in-memory ones.

    source = store.locate(experiment_id).source
    result = read_slice(source, SliceRequest(columns=("a", "b"), where="a > 1", limit=100))
    export_slice(source, SliceRequest(where="a > 1"), "/tmp/rows.parquet", "parquet")

Rooms: `_expr` (the filter language, pure) and `_expr_check` (typing it against a schema),
`_reader` (chunk-verified file reads), `_media` (the formats read, by name), `_formats` (opening
a table of any of them), `_tables` (bounded Parquet and Arrow readers), `_text_tables` (CSV and
TSV in bounded blocks), `_json_lines` (JSON Lines, likewise; `_json_fields` types a block's
fields, `_json_text` reads what pyarrow cannot), `_text_checks` (what a text table's bytes must
pass first), `_pages` and `_ipc_layout` (declared decoded sizes, checked
before pyarrow decompresses), `_isolated` (all table parsing and decoding in a child within
memory and time bounds; `_answer` reads its answer back into values or typed errors), `_helper`
(the pre-started process that forks those children for a process with threads; a worker starts
it before its threads, `start_helper`), `_threads` (what keeps a reading process
single-threaded), `_collect` (the kept rows, streamed back from the child), `_table_info`,
`_footer` (a recorded table's columns and shape, for its card), `_limits`, `_slice`; `_export`
(a slice streamed into a staged file) and `_encoders` (Parquet, CSV and JSON Lines writers, run
in the child).

The store takes only this API (`SliceSource`, `RemoteBytes`, `load_manifest` for its located
results; `measure` and `Measured` for a recorded table's card facts), and slicing imports nothing
of the store: both stand on `fsedge`. Names load lazily (PEP 562): configuration and the store
use `SliceLimits` and `SliceSource` without loading pyarrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cas.slicing import _threads  # small: what keeps a reading process single-threaded

if TYPE_CHECKING:
    from cas.slicing._encoders import json_lines, refused_columns
    from cas.slicing._export import ExportResult, export_slice
    from cas.slicing._footer import Measured, measure
    from cas.slicing._isolated import start_helper, stop_helper
    from cas.slicing._limits import DEFAULT_SLICE_LIMITS, ExportLimits, SliceLimits
    from cas.slicing._reader import RemoteBytes, SliceSource, load_manifest
    from cas.slicing._slice import SliceRequest, SliceResult, describe, read_slice
    from cas.slicing._table_info import TableInfo
    from cas.slicing._threads import ONE_THREAD_ENV, import_readers

_EXPORTS = {
    "json_lines": "cas.slicing._encoders",
    "refused_columns": "cas.slicing._encoders",
    "ExportResult": "cas.slicing._export",
    "export_slice": "cas.slicing._export",
    "Measured": "cas.slicing._footer",
    "measure": "cas.slicing._footer",
    "start_helper": "cas.slicing._isolated",
    "stop_helper": "cas.slicing._isolated",
    "DEFAULT_SLICE_LIMITS": "cas.slicing._limits",
    "ExportLimits": "cas.slicing._limits",
    "SliceLimits": "cas.slicing._limits",
    "RemoteBytes": "cas.slicing._reader",
    "SliceSource": "cas.slicing._reader",
    "load_manifest": "cas.slicing._reader",
    "SliceRequest": "cas.slicing._slice",
    "SliceResult": "cas.slicing._slice",
    "describe": "cas.slicing._slice",
    "read_slice": "cas.slicing._slice",
    "TableInfo": "cas.slicing._table_info",
    "ONE_THREAD_ENV": "cas.slicing._threads",
    "import_readers": "cas.slicing._threads",
}

__all__ = [
    "DEFAULT_SLICE_LIMITS",
    "ExportLimits",
    "ExportResult",
    "ONE_THREAD_ENV",
    "Measured",
    "RemoteBytes",
    "SliceLimits",
    "SliceRequest",
    "SliceResult",
    "SliceSource",
    "TableInfo",
    "describe",
    "export_slice",
    "import_readers",
    "json_lines",
    "load_manifest",
    "measure",
    "read_slice",
    "refused_columns",
    "start_helper",
    "stop_helper",
]


def __getattr__(name: str) -> object:
    """Load an exported name's module on first use (PEP 562) and keep the name here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # pyarrow loads with a reader, and without numpy, whichever name is asked first
    loaded = _threads.import_reader(module) if module in _threads.READERS else None
    value = getattr(loaded or importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The exported names."""
    return sorted(_EXPORTS)
