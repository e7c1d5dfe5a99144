"""The local store: safe ingest, content-addressed objects, cards, integrity and search."""

from cas._chunks import CHUNK_BYTES, ChunkManifest, parse_manifest
from cas._fs import atomic_write, make_dirs, open_dir, open_dir_beneath, read_small, staged
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
