"""Hashing for the bucket: fed chunk by chunk (downloads), or a record's first pass by parts.

A download (`_cache`) and fsck hash what arrives, in order, without a second pass
(`ChunkHasher`). A record hashes its export in place first, then uploads it in a second pass
(`_publish`); `hash_for_upload` is that first pass: besides the SHA-256 of the whole and the
xxh3-128 of each 4 MiB chunk, it takes the SHA-256 of each part the upload will send, from the
same buffers that feed the whole's SHA-256. The second pass proves every part it sends against
those digests: together they prove the object is the bytes its address names (SHA-256 is
collision resistant; xxh3 is not, and is never the proof).
"""

from __future__ import annotations

import functools
import hashlib

import msgspec
import xxhash

import fsedge as _fs
from cards.errors import StoreIOError
from cas._hashing import Digests, Sha256Thread, filled_chunks
from cas._progress import Progress
from fsedge import CHUNK_BYTES


class ChunkHasher(msgspec.Struct):
    """SHA-256 of the whole and xxh3-128 of each chunk, fed chunk by chunk, in order."""

    size: int = 0
    _sha256: hashlib._Hash = msgspec.field(default_factory=hashlib.sha256)
    _chunks: list[bytes] = msgspec.field(default_factory=list)

    def update(self, chunk: bytes | memoryview) -> None:
        """Add one chunk (exactly `CHUNK_BYTES`, except the last)."""
        self._sha256.update(chunk)
        self._chunks.append(xxhash.xxh3_128_digest(chunk))
        self.size += len(chunk)

    def digests(self) -> Digests:
        """What was hashed."""
        return Digests(self.size, self._sha256.digest(), tuple(self._chunks))


class PartDigests(Digests, frozen=True):
    """First-pass digests, and the SHA-256 of each `part_bytes` part (the last may be short)."""

    part_bytes: int = 0
    part_sha256: tuple[bytes, ...] = ()


def hash_for_upload(
    fd: int, size: int, part_bytes: int, progress: Progress | None = None
) -> PartDigests:
    """Hash an export in place for upload in `part_bytes` parts, reading past `size` at most once.

    As `_hashing.hash_fd` reads, by parts: the whole's SHA-256 runs in a second thread
    (`Sha256Thread`) while this thread reads the next part and takes its SHA-256 and its
    chunks' xxh3 (hashlib releases the GIL: two CPUs hash at once). Two part buffers, so memory
    stays at two parts. A file still growing shows as larger (the caller refuses it) instead of
    being read for as long as it grows.

    Raises:
        StoreIOError: the export could not be read.
    """
    if part_bytes <= 0 or part_bytes % CHUNK_BYTES:
        raise ValueError("parts must be whole chunks")
    whole = Sha256Thread()
    chunks: list[bytes] = []
    parts: list[bytes] = []
    offset = 0
    try:
        for data in filled_chunks(whole, functools.partial(_fs.pread_into, fd), part_bytes):
            parts.append(hashlib.sha256(data).digest())
            chunks.extend(_xxh3_chunks(data))
            offset += len(data)
            if progress is not None:
                progress.advance(len(data))
            if offset > size or len(data) < part_bytes:
                break
        return PartDigests(offset, whole.digest(), tuple(chunks), part_bytes, tuple(parts))
    except OSError as exc:
        raise StoreIOError(f"cannot read the export: {exc.strerror}") from exc
    finally:
        whole.close()


def _xxh3_chunks(data: memoryview) -> list[bytes]:
    return [
        xxhash.xxh3_128_digest(data[start : start + CHUNK_BYTES])
        for start in range(0, len(data), CHUNK_BYTES)
    ]
