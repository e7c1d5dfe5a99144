"""Hashing fed chunk by chunk: SHA-256 of the whole and xxh3-128 of each 4 MiB chunk.

A download (`_cache`) and fsck hash what arrives, in order, without a second pass. A record
hashes its source in place first (`hash_source`: the content address is known before a byte is
sent, and nothing is copied), then uploads it in a second pass that checks every chunk against
these digests (`_publish`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import xxhash

from cards.errors import StoreIOError
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


def hash_source(fd: int, size: int, progress: Progress | None = None) -> Digests:
    """Hash the file open at `fd` in place, reading at most one chunk past `size`.

    A file that grew shows as more than `size` bytes (the caller refuses it) without reading
    on for as long as it keeps growing.

    Raises:
        StoreIOError: the file could not be read.
    """
    hasher = ChunkHasher()
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    offset = 0
    while offset <= size:
        filled = 0
        try:
            while filled < CHUNK_BYTES and (n := os.preadv(fd, [view[filled:]], offset + filled)):
                filled += n
        except OSError as exc:
            raise StoreIOError(f"cannot read the export: {exc.strerror}") from exc
        if not filled:
            break
        hasher.update(view[:filled])
        offset += filled
        if progress is not None:
            progress.advance(filled)
    return hasher.digests()
