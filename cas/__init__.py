"""The local store: safe ingest, content-addressed objects, cards, integrity and search.

Names load lazily (PEP 562), so a kernel importing only the slicing modules (`rlm_client`) never
loads the store's write path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cards._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from cas._chunks import CHUNK_BYTES, ChunkManifest, parse_manifest
    from cas._fs import (
        atomic_write,
        make_dirs,
        open_dir,
        open_dir_beneath,
        read_small,
        staged,
    )
    from cas._ingest import export_parts
    from cas._layout import ProjectLayout
    from cas._store import (
        CardProblem,
        CardScan,
        ProjectStore,
        Provenance,
        Recorded,
        Resolved,
        Usage,
        utc_now,
    )
    from cas._verify import PROCESS_CACHE, IntegrityMode, VerificationCache

_EXPORTS = {
    "CHUNK_BYTES": "cas._chunks",
    "ChunkManifest": "cas._chunks",
    "parse_manifest": "cas._chunks",
    "atomic_write": "cas._fs",
    "make_dirs": "cas._fs",
    "open_dir": "cas._fs",
    "open_dir_beneath": "cas._fs",
    "read_small": "cas._fs",
    "staged": "cas._fs",
    "export_parts": "cas._ingest",
    "ProjectLayout": "cas._layout",
    "CardProblem": "cas._store",
    "CardScan": "cas._store",
    "ProjectStore": "cas._store",
    "Provenance": "cas._store",
    "Recorded": "cas._store",
    "Resolved": "cas._store",
    "Usage": "cas._store",
    "utc_now": "cas._store",
    "PROCESS_CACHE": "cas._verify",
    "IntegrityMode": "cas._verify",
    "VerificationCache": "cas._verify",
}

__all__ = [
    "CHUNK_BYTES",
    "PROCESS_CACHE",
    "CardProblem",
    "CardScan",
    "ChunkManifest",
    "IntegrityMode",
    "ProjectLayout",
    "ProjectStore",
    "Provenance",
    "Recorded",
    "Resolved",
    "Usage",
    "VerificationCache",
    "atomic_write",
    "export_parts",
    "make_dirs",
    "open_dir",
    "open_dir_beneath",
    "parse_manifest",
    "read_small",
    "staged",
    "utc_now",
]


__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
