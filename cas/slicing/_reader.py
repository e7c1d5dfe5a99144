"""Verified partial reads: a file object that serves only bytes of chunks proven intact.

The card binds the chunk manifest by its SHA-256; the manifest binds every 4 MiB chunk by its
xxh3-128. A reader proves the manifest first, then each chunk it touches: it reads the whole
chunk once, checks its digest, and serves bytes from that checked buffer, never from a second
read of the file (which could differ from what was checked). A few checked chunks stay cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import xxhash

from cards.errors import ArtifactError, IntegrityError, ObjectMissing, StoreIOError, TableTooLarge
from cas import _fs
from cas._chunks import ChunkManifest, chunk_count, parse_manifest

CACHED_CHUNKS = 8
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class SliceSource:
    """A recorded object as a slice reads it: its bytes, its manifest, and what binds them.

    `size`, `media_type` and `chunk_manifest_sha256` are the card's facts about the bytes.

    The store builds one after checking the card's scope (`ProjectStore.locate`); the kernel
    builds one from a resolve result the host verified.
    """

    path: str
    manifest_path: str
    size: int
    media_type: str
    chunk_manifest_sha256: str


@dataclass(slots=True)
class ReadStats:
    """What a reader did: bytes read from disk, and chunks hashed and found intact."""

    bytes_read: int = 0
    chunks_verified: int = 0


def load_manifest(source: SliceSource) -> ChunkManifest:
    """Read an object's chunk manifest and prove it is the one `source` names.

    Raises:
        IntegrityError: the manifest is missing, differs from the card's digest, is malformed,
            or describes an object of another size.
        StoreIOError: the manifest could not be read.
    """
    # Canonical JSON: under 40 bytes a chunk digest, plus a short fixed header.
    bound = 256 + 40 * chunk_count(source.size)
    try:
        fd = os.open(source.manifest_path, _OPEN_FLAGS)
    except FileNotFoundError as exc:
        raise IntegrityError("the artifact's chunk manifest is missing") from exc
    except OSError as exc:
        raise StoreIOError(f"cannot open the chunk manifest: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IntegrityError("the artifact's chunk manifest is not a regular file")
        raw = _read_bounded(fd, bound)
    finally:
        os.close(fd)
    if hashlib.sha256(raw).hexdigest() != source.chunk_manifest_sha256:
        raise IntegrityError("the chunk manifest differs from the one its card binds")
    manifest = parse_manifest(raw)
    if manifest.size != source.size:
        raise IntegrityError("the chunk manifest describes an object of another size")
    return manifest


def _read_bounded(fd: int, bound: int) -> bytes:
    try:
        return _fs.read_small(fd, bound)
    except StoreIOError as exc:
        raise IntegrityError("the chunk manifest is larger than its card allows") from exc
    except OSError as exc:
        raise StoreIOError(f"cannot read the chunk manifest: {exc.strerror}") from exc


@contextlib.contextmanager
def verified_object(
    source: SliceSource, manifest: ChunkManifest, *, max_read_bytes: int
) -> Iterator[VerifiedReader]:
    """Open a stored object for verified reads; it is closed on exit.

    Raises:
        ObjectMissing: there is no object at `source.path`.
        IntegrityError: the object is not a regular file of the card's size.
        StoreIOError: the object could not be opened.
    """
    try:
        fd = os.open(source.path, _OPEN_FLAGS)
    except FileNotFoundError as exc:
        raise ObjectMissing("the experiment's artifact is missing from the store") from exc
    except OSError as exc:
        raise StoreIOError(f"cannot open the stored artifact: {exc.strerror}") from exc
    reader = VerifiedReader(fd, manifest, max_read_bytes=max_read_bytes)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != source.size:
            raise IntegrityError("the stored artifact's size differs from its card")
        yield reader
    finally:
        reader.close()


class VerifiedReader:
    """A read-only, seekable binary file over an open object, serving only checked chunks.

    Implements what `pyarrow.PythonFile` calls: `read_buffer` hands pyarrow a zero-copy view
    when a read lies within one chunk. The reader owns `fd` and closes it. A `watch` sees
    each span `[start, end)` before its bytes are served, and may refuse it by raising
    (`_pages` checks Parquet page headers this way, before pyarrow decompresses a page).
    """

    def __init__(
        self, fd: int, manifest: ChunkManifest, *, max_read_bytes: int, cached: int = CACHED_CHUNKS
    ) -> None:
        self._fd = fd
        self._manifest = manifest
        self._max_read = max_read_bytes
        self._capacity = cached
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._pos = 0
        self.stats = ReadStats()
        self.failure: ArtifactError | None = None
        self.closed = False
        self.watch: Callable[[int, int], None] | None = None

    @property
    def size(self) -> int:
        """The object's size in bytes."""
        return self._manifest.size

    def readable(self) -> bool:
        """Always readable."""
        return True

    def seekable(self) -> bool:
        """Always seekable."""
        return True

    def writable(self) -> bool:
        """Never writable."""
        return False

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move the position; past the end is allowed (reads there return nothing)."""
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        """The current position."""
        return self._pos

    def read(self, size: int = -1) -> memoryview:
        """Read up to `size` checked bytes (all the rest when negative), as a read-only view.

        A view, not `bytes`: pyarrow copies what it needs out of it, so a copy here is waste.

        Raises:
            IntegrityError: a chunk differs from its manifest digest, or the file shrank.
            TableTooLarge: one read asks for more than the configured bound.
            StoreIOError: the object could not be read.
        """
        return self.read_buffer(size)

    def read_buffer(self, size: int = -1) -> memoryview:
        """Like `read`, but without copying when the bytes lie within one chunk.

        Raises:
            IntegrityError: a chunk differs from its manifest digest, or the file shrank.
            TableTooLarge: one read asks for more than the configured bound.
            StoreIOError: the object could not be read.
        """
        start = min(self._pos, self.size)
        end = self.size if size < 0 else min(self.size, start + size)
        try:
            if end - start > self._max_read:
                raise TableTooLarge(
                    f"a single read of {end - start} bytes exceeds the {self._max_read}-byte bound",
                    limit=self._max_read,
                )
            view = self._span(start, end)
            if self.watch is not None and end > start:
                self.watch(start, end)
        except ArtifactError as exc:
            # pyarrow may wrap what we raise in its own error; the caller re-raises this one.
            self.failure = self.failure or exc
            raise
        self._pos = max(self._pos, end)
        return view

    def peek(self, offset: int, size: int) -> memoryview:
        """Up to `size` checked bytes at `offset`; the position and the watch are left alone.

        Raises:
            IntegrityError: a chunk differs from its manifest digest, or the file shrank.
            TableTooLarge: the read asks for more than the configured bound.
            StoreIOError: the object could not be read.
        """
        start = min(max(0, offset), self.size)
        end = min(self.size, start + max(0, size))
        if end - start > self._max_read:
            raise TableTooLarge(
                f"a single read of {end - start} bytes exceeds the {self._max_read}-byte bound",
                limit=self._max_read,
            )
        return self._span(start, end)

    def _span(self, start: int, end: int) -> memoryview:
        if end <= start:
            return memoryview(b"")
        step = self._manifest.chunk_bytes
        first, last = start // step, (end - 1) // step
        if first == last:
            return memoryview(self._chunk(first))[start - first * step : end - first * step]
        out = bytearray(end - start)
        for index in range(first, last + 1):
            chunk, base = self._chunk(index), index * step
            low, high = max(start, base), min(end, base + len(chunk))
            out[low - start : high - start] = memoryview(chunk)[low - base : high - base]
        return memoryview(out)

    def _chunk(self, index: int) -> bytes:
        if self.closed:
            raise StoreIOError("the stored artifact was read after it was closed")
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        offset, length = self._manifest.span(index)
        data = _pread_exact(self._fd, length, offset)
        self.stats.bytes_read += len(data)
        if xxhash.xxh3_128_digest(data) != self._manifest.digests[index]:
            raise IntegrityError(f"chunk {index} of the stored artifact differs from its manifest")
        self.stats.chunks_verified += 1
        self._cache[index] = data
        if len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
        return data

    def close(self) -> None:
        """Release the descriptor and the cached chunks."""
        if not self.closed:
            self.closed = True
            self._cache.clear()
            os.close(self._fd)


def _pread_exact(fd: int, length: int, offset: int) -> bytes:
    parts: list[bytes] = []
    remaining = length
    while remaining:
        try:
            part = os.pread(fd, remaining, offset + length - remaining)
        except OSError as exc:
            raise StoreIOError(f"cannot read the stored artifact: {exc.strerror}") from exc
        if not part:
            raise IntegrityError("the stored artifact is shorter than its card")
        parts.append(part)
        remaining -= len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)
