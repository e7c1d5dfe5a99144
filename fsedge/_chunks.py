"""The chunk manifest: an xxh3-128 digest of every 4 MiB chunk of an object.

A slice that reads a few chunks can prove those bytes intact without hashing the whole object:
the card binds the manifest by its SHA-256, the manifest binds each chunk.
"""

from __future__ import annotations

import re

import msgspec

from cards import canonical_json
from cards.errors import IntegrityError

CHUNK_BYTES = 4 * 1024 * 1024
MANIFEST_VERSION = 1
ALGORITHM = "xxh3-128"
_DIGEST_HEX = re.compile(r"[0-9a-f]{32}")


class ChunkManifest(msgspec.Struct, frozen=True):
    """Per-chunk digests of one object."""

    size: int
    chunk_bytes: int
    digests: tuple[bytes, ...]

    def span(self, index: int) -> tuple[int, int]:
        """The (offset, length) of chunk `index`."""
        offset = index * self.chunk_bytes
        return offset, min(self.chunk_bytes, self.size - offset)

    def encode(self) -> bytes:
        """The manifest's canonical bytes (what the card's digest covers)."""
        return canonical_json(
            {
                "algorithm": ALGORITHM,
                "chunk_bytes": self.chunk_bytes,
                "chunks": [d.hex() for d in self.digests],
                "schema_version": MANIFEST_VERSION,
                "size": self.size,
            }
        )


def chunk_count(size: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """How many chunks an object of `size` bytes has (zero for an empty object)."""
    return -(-size // chunk_bytes)


def parse_manifest(raw: bytes) -> ChunkManifest:
    """Validate a stored chunk manifest.

    Raises:
        IntegrityError: the manifest is malformed or inconsistent with itself.
    """
    try:
        doc = msgspec.json.decode(raw)
        size, chunk_bytes, chunks = doc["size"], doc["chunk_bytes"], doc["chunks"]
        ok = (
            doc["schema_version"] == MANIFEST_VERSION
            and doc["algorithm"] == ALGORITHM
            and isinstance(size, int)
            and isinstance(chunk_bytes, int)
            and size >= 0
            and chunk_bytes > 0
            and isinstance(chunks, list)
            and len(chunks) == chunk_count(size, chunk_bytes)
            and all(isinstance(c, str) and _DIGEST_HEX.fullmatch(c) for c in chunks)
        )
    except (msgspec.DecodeError, RecursionError, KeyError, TypeError) as exc:
        raise IntegrityError("the chunk manifest is malformed") from exc
    if not ok:
        raise IntegrityError("the chunk manifest is malformed")
    return ChunkManifest(size, chunk_bytes, tuple(bytes.fromhex(c) for c in chunks))
