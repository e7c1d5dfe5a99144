"""Hashing fed chunk by chunk: SHA-256 of the whole and xxh3-128 of each 4 MiB chunk.

A download (`_cache`) and fsck hash what arrives, in order, without a second pass; a record
copies its source into the page cache while hashing it (`copy_and_hash`), leaving durability to
the bucket: the local copy is only a cache (see `LocalCopies.adopt`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import xxhash

from cards.errors import ArtifactTooLarge, StoreIOError
from cas import _fs
from cas._chunks import CHUNK_BYTES
from cas._hashing import Digests
from cas._progress import Progress


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


def copy_and_hash(src_fd: int, dst_fd: int, *, limit: int, progress: Progress | None) -> Digests:
    """Copy `src_fd` to `dst_fd` chunk by chunk, hashing each; no forced writeback.

    Raises:
        ArtifactTooLarge: more than `limit` bytes were read (stops at once).
        StoreIOError: the copy could not be written.
    """
    hasher = ChunkHasher()
    while chunk := _read_chunk(src_fd):
        if hasher.size + len(chunk) > limit:
            raise ArtifactTooLarge(
                f"the artifact is larger than the {limit}-byte limit", limit=limit
            )
        try:
            _fs.write_all(dst_fd, chunk)
        except OSError as exc:
            raise StoreIOError(f"cannot write the local copy: {exc.strerror}") from exc
        hasher.update(chunk)
        if progress is not None:
            progress.advance(len(chunk))
    return hasher.digests()


def _read_chunk(fd: int) -> bytes:
    """Exactly one chunk, or less only at end of file (chunk digests need alignment)."""
    chunk = os.read(fd, CHUNK_BYTES)
    if len(chunk) in (0, CHUNK_BYTES):
        return chunk
    parts = [chunk]
    missing = CHUNK_BYTES - len(chunk)
    while missing and (more := os.read(fd, missing)):
        parts.append(more)
        missing -= len(more)
    return b"".join(parts)
