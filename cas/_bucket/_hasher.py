"""Hashing fed chunk by chunk: SHA-256 of the whole and xxh3-128 of each 4 MiB chunk.

A download (`_cache`) and fsck hash what arrives, in order, without a second pass. (A record
hashes its export in place first, with `cas._hashing.hash_export`, then uploads it in a second
pass that checks every chunk against those digests: `_publish`.)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import xxhash

from cas._hashing import Digests


@dataclass(slots=True)
class ChunkHasher:
    """SHA-256 of the whole and xxh3-128 of each chunk, fed chunk by chunk, in order."""

    size: int = 0
    _sha256: hashlib._Hash = field(default_factory=hashlib.sha256)
    _chunks: list[bytes] = field(default_factory=list)

    def update(self, chunk: bytes | memoryview) -> None:
        """Add one chunk (exactly `CHUNK_BYTES`, except the last)."""
        self._sha256.update(chunk)
        self._chunks.append(xxhash.xxh3_128_digest(chunk))
        self.size += len(chunk)

    def digests(self) -> Digests:
        """What was hashed."""
        return Digests(self.size, self._sha256.digest(), tuple(self._chunks))
