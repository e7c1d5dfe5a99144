"""Local hashing: SHA-256 of a whole object and xxh3-128 of each 4 MiB chunk, in one pass.

`hash_fd` reads an object already in place (resolve, fsck), `hash_export` a kernel's export in
place (a record that may deduplicate; a bucket record without part checksums);
`copy_and_hash` streams a source into a staging file, hashing while it copies (record). A
bucket record that declares part checksums hashes in `_bucket._hasher.hash_for_upload`
instead, which also takes each upload part's SHA-256.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

import msgspec
import xxhash

from cards.errors import ArtifactTooLarge, StoreIOError
from cas import _fs
from cas._chunks import CHUNK_BYTES, ChunkManifest
from cas._progress import Progress

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor


class Digests(msgspec.Struct, frozen=True):
    """What one pass over an object's bytes measured."""

    size: int
    sha256: bytes
    chunk_digests: tuple[bytes, ...]

    def manifest(self) -> bytes:
        """The canonical chunk manifest of these bytes."""
        return ChunkManifest(self.size, CHUNK_BYTES, self.chunk_digests).encode()


def hash_fd(fd: int, progress: Progress | None = None, *, limit: int | None = None) -> Digests:
    """Hash what is readable from `fd`, from its start (positional reads, so `fd` is shared).

    With `limit`, stop once more than `limit` bytes were read (at most one chunk past it).
    """
    sha256 = hashlib.sha256()
    chunks: list[bytes] = []
    buffer = bytearray(CHUNK_BYTES)
    offset = 0
    while (limit is None or offset <= limit) and (n := _fs.pread_into(fd, buffer, offset)):
        view = memoryview(buffer)[:n]
        sha256.update(view)
        chunks.append(xxhash.xxh3_128_digest(view))
        offset += n
        if progress is not None:
            progress.advance(n)
    return Digests(offset, sha256.digest(), tuple(chunks))


def hash_export(fd: int, size: int, progress: Progress | None = None) -> Digests:
    """Hash a kernel's export in place, reading at most one chunk past the `size` it had.

    A file still growing shows as larger (the caller refuses it) instead of being read for as
    long as it grows.

    Raises:
        StoreIOError: the export could not be read.
    """
    try:
        return hash_fd(fd, progress, limit=size)
    except OSError as exc:
        raise StoreIOError(f"cannot read the export: {exc.strerror}") from exc


def copy_and_hash(
    src_fd: int,
    dst_fd: int,
    *,
    limit: int,
    progress: Progress | None = None,
    writeback: bool = True,
) -> Digests:
    """Copy `src_fd` to `dst_fd` in 4 MiB chunks, hashing each chunk while the next is copied.

    A worker thread runs SHA-256 (hashlib releases the GIL on large buffers) while this thread
    reads, writes, starts the chunk's writeback (unless `writeback` is off: a copy that is only
    a cache, as a bucket record's) and takes its xxh3-128 (xxhash holds the GIL, so it runs here
    rather than slow this thread down from the worker). At most three chunks are alive at once.
    A file of one chunk has nothing to overlap: it is hashed and written here, without a thread
    or writeback (the caller's fsync follows at once).

    Raises:
        ArtifactTooLarge: more than `limit` bytes were read (stops at once).
        OSError: the copy could not be written.
    """
    sha256 = hashlib.sha256()
    chunks: list[bytes] = []
    pool: ThreadPoolExecutor | None = None
    pending: Future[None] | None = None
    behind: _fs.WriteBehind | None = None
    total = 0
    try:
        while chunk := _read_chunk(src_fd):
            total += len(chunk)
            if total > limit:
                raise ArtifactTooLarge(
                    f"the artifact is larger than the {limit}-byte limit", limit=limit
                )
            if pending is not None:
                pending.result()
            if pool is None and len(chunk) < CHUNK_BYTES:  # a one-chunk file: nothing to overlap
                sha256.update(chunk)
            else:
                pool = pool or _hash_worker()
                pending = pool.submit(sha256.update, chunk)
            _fs.write_all(dst_fd, chunk)
            if writeback and pool is not None:
                behind = behind or _fs.WriteBehind(dst_fd)
                behind.written(len(chunk))
            chunks.append(xxhash.xxh3_128_digest(chunk))
            if progress is not None:
                progress.advance(len(chunk))
        if pending is not None:
            pending.result()
    finally:
        if pool is not None:
            pool.shutdown()  # waits for a pending update
    return Digests(total, sha256.digest(), tuple(chunks))


def _hash_worker() -> ThreadPoolExecutor:
    """One thread for SHA-256 updates, made for files of several chunks.

    concurrent.futures loads logging: about 8 ms that a one-chunk record need not pay.
    """
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="artmem-hash")


def _read_chunk(fd: int) -> bytes:
    """Read exactly one chunk, or less only at end of file (chunk digests need alignment)."""
    chunk = os.read(fd, CHUNK_BYTES)
    if len(chunk) in (0, CHUNK_BYTES):
        return chunk
    parts = [chunk]
    missing = CHUNK_BYTES - len(chunk)
    while missing and (more := os.read(fd, missing)):
        parts.append(more)
        missing -= len(more)
    return b"".join(parts)
