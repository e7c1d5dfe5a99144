"""The local store: safe ingest, content-addressed objects, cards, integrity and search."""

from cas._chunks import CHUNK_BYTES, ChunkManifest, parse_manifest
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
    "export_parts",
    "parse_manifest",
    "utc_now",
]
