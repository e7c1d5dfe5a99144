"""Verified partial reads: a file object that serves only bytes of chunks proven intact.

The card binds the chunk manifest by its SHA-256; the manifest binds every 4 MiB chunk by its
xxh3-128. A reader proves the manifest first, then each chunk it touches: it reads the whole
chunk once, checks its digest, and serves bytes from that checked buffer, never from a second
read of the file (which could differ from what was checked). A few checked chunks stay cached.

The bytes come from a local file, or, for a source that names `remote` bytes (a bucket store's
object not cached on this host), from ranged reads of only the chunks touched: the same proof
applies to each chunk before any of its bytes is served, whoever fetched it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Protocol

import msgspec
import xxhash

import fsedge as _fs
from cards.errors import ArtifactError, IntegrityError, ObjectMissing, StoreIOError, TableTooLarge
from cards.table_read import TableRead
from cas.slicing._threads import Passed
from fsedge import ChunkManifest, chunk_count, parse_manifest

CACHED_CHUNKS = 8
RUN_CHUNKS = 4  # contiguous missing chunks fetched by one read (a remote read: one request)
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ByteRanges(Protocol):
    """An open object's bytes, a range at a time (a local file, or a pinned remote version)."""

    def read(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes at `offset` (unchecked: the reader checks them).

        Raises:
            IntegrityError: fewer bytes exist, or the object changed since it was opened.
            ObjectMissing: the object is gone.
            StoreIOError: the bytes could not be read.
        """
        ...

    def close(self) -> None:
        """Release what reading holds."""
        ...


class RemoteBytes(Protocol):
    """An object that is not a local file: its stored manifest, and ranged reads of it."""

    def manifest(self) -> bytes:
        """The chunk manifest as stored (unproven: `load_manifest` proves it)."""
        ...

    def open(self) -> ByteRanges:
        """Ranged reads of the object; usable in this process and in a child forked from it."""
        ...


class SliceSource(msgspec.Struct, frozen=True):
    """A recorded object as a slice reads it: its bytes, its manifest, and what binds them.

    `size`, `media_type`, `chunk_manifest_sha256` and `table_read` (how a CSV is read) are the
    card's. With `remote`, the bytes and the manifest come from there, and the paths only say
    where a verified local copy would be. The store builds one after checking the card's scope
    (`ProjectStore.locate`); the kernel, from a resolve result the host verified.
    """

    path: str
    manifest_path: str
    size: int
    media_type: str
    chunk_manifest_sha256: str
    remote: RemoteBytes | None = None
    table_read: TableRead | None = None


class ReadStats(msgspec.Struct):
    """What a reader did: bytes read (from disk or fetched), and chunks hashed and found intact."""

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
    if source.remote is not None:
        raw = source.remote.manifest()
        if len(raw) > bound:
            raise IntegrityError("the chunk manifest is larger than its card allows")
    else:
        raw = _read_local_manifest(source.manifest_path, bound)
    if hashlib.sha256(raw).hexdigest() != source.chunk_manifest_sha256:
        raise IntegrityError("the chunk manifest differs from the one its card binds")
    manifest = parse_manifest(raw)
    if manifest.size != source.size:
        raise IntegrityError("the chunk manifest describes an object of another size")
    return manifest


def _read_local_manifest(path: str, bound: int) -> bytes:
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError as exc:
        raise IntegrityError("the artifact's chunk manifest is missing") from exc
    except OSError as exc:
        raise StoreIOError(f"cannot open the chunk manifest: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IntegrityError("the artifact's chunk manifest is not a regular file")
        return _read_bounded(fd, bound)
    finally:
        os.close(fd)


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

    A remote source is opened for ranged reads (its size was checked when it was located);
    a missing or changed remote object fails at the first read.

    Raises:
        ObjectMissing: there is no object at `source.path`.
        IntegrityError: the object is not a regular file of the card's size.
        StoreIOError: the object could not be opened.
    """
    if source.remote is not None:
        remote = VerifiedReader(source.remote.open(), manifest, max_read_bytes=max_read_bytes)
        try:
            yield remote
        finally:
            remote.close()
        return
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
    when a read lies within one chunk. The reader owns `fd` (a descriptor, or ranged reads of
    a remote object) and closes it. A `watch` sees
    each span `[start, end)` before its bytes are served, and may refuse it by raising
    (`_pages` checks Parquet page headers this way, before pyarrow decompresses a page).
    """

    def __init__(
        self,
        fd: int | ByteRanges,
        manifest: ChunkManifest,
        *,
        max_read_bytes: int,
        cached: int = CACHED_CHUNKS,
    ) -> None:
        self._bytes = _FileBytes(fd) if isinstance(fd, int) else fd
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
        for index, chunk in self._chunks(first, last):
            base = index * step
            low, high = max(start, base), min(end, base + len(chunk))
            out[low - start : high - start] = memoryview(chunk)[low - base : high - base]
        return memoryview(out)

    def _chunk(self, index: int) -> bytes:
        return next(self._chunks(index, index))[1]

    def _chunks(self, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Chunks `first..last`, each checked; missing neighbours are fetched by one read."""
        if self.closed:
            raise StoreIOError("the stored artifact was read after it was closed")
        index = first
        while index <= last:
            cached = self._cache.get(index)
            if cached is not None:
                self._cache.move_to_end(index)
                yield index, cached
                index += 1
                continue
            run = 1
            while run < RUN_CHUNKS and index + run <= last and index + run not in self._cache:
                run += 1
            yield from self._fetch(index, run)
            index += run

    def _fetch(self, first: int, run: int) -> Iterator[tuple[int, bytes]]:
        offset, _ = self._manifest.span(first)
        end = sum(self._manifest.span(first + run - 1))
        data = self._bytes.read(offset, end - offset)
        self.stats.bytes_read += len(data)
        view = memoryview(data)
        for index in range(first, first + run):
            low, length = self._manifest.span(index)
            chunk = data if run == 1 else bytes(view[low - offset : low - offset + length])
            if xxhash.xxh3_128_digest(chunk) != self._manifest.digests[index]:
                raise IntegrityError(
                    f"chunk {index} of the stored artifact differs from its manifest"
                )
            self.stats.chunks_verified += 1
            self._keep(index, chunk)
            yield index, chunk

    def _keep(self, index: int, chunk: bytes) -> None:
        """Cache a checked chunk, evicting the least recently used one but the last.

        The last chunk holds a footed table's footer, which its readers come back to; fetched
        from a bucket, each return would be another request.
        """
        self._cache[index] = chunk
        if len(self._cache) > self._capacity:
            oldest = next(iter(self._cache))
            if oldest == len(self._manifest.digests) - 1:
                self._cache.move_to_end(oldest)
            self._cache.popitem(last=False)

    def close(self) -> None:
        """Release the descriptor (or the ranged reads) and the cached chunks."""
        if not self.closed:
            self.closed = True
            self._cache.clear()
            self._bytes.close()

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled for the reading helper: the bytes and the manifest, not the cache or stats."""
        return (_reader_again, (self._bytes, self._manifest, self._max_read, self._capacity))


def _reader_again(
    ranges: ByteRanges, manifest: ChunkManifest, max_read_bytes: int, cached: int
) -> VerifiedReader:
    return VerifiedReader(ranges, manifest, max_read_bytes=max_read_bytes, cached=cached)


class _FileBytes:
    """Ranged reads of an open local file, which this owns."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def read(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes at `offset`."""
        return _pread_exact(self._fd, length, offset)

    def close(self) -> None:
        """Close the descriptor."""
        os.close(self._fd)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled for the reading helper: the descriptor itself crosses (`Passed`)."""
        return (_FileBytes, (Passed(self._fd),))


def _pread_exact(fd: int, length: int, offset: int) -> bytes:
    try:
        data = _fs.pread_full(fd, length, offset)
    except OSError as exc:
        raise StoreIOError(f"cannot read the stored artifact: {exc.strerror}") from exc
    if len(data) != length:
        raise IntegrityError("the stored artifact is shorter than its card")
    return data
