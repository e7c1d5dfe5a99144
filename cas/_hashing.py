"""Hashing: SHA-256 of a whole object and xxh3-128 of each 4 MiB chunk, in one pass.

`hash_fd` reads an object already in place (resolve, fsck), `hash_export` a kernel's export in
place (a record that may deduplicate; a bucket record, which may also take the SHA-256 of each
part its upload will send, `PartDigests`, from the same buffers: the upload proves every part
against them, and SHA-256 is the proof, never xxh3); `ChunkHasher` is fed what arrives (a
bucket's download), in order; `copy_and_hash` has the kernel copy a source into a staging file
and hashes the copy (record).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import itertools
import queue
import threading
from collections.abc import Callable, Iterator

import msgspec
import xxhash

import fsedge as _fs
from cards.errors import ArtifactTooLarge, StoreIOError
from cas._progress import Progress
from fsedge import CHUNK_BYTES, ChunkManifest

# What `copy_file_range` fails with where the kernel cannot copy between two files.
_NO_KERNEL_COPY = frozenset(
    {errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM}
)


class Digests(msgspec.Struct, frozen=True):
    """What one pass over an object's bytes measured."""

    size: int
    sha256: bytes
    chunk_digests: tuple[bytes, ...]

    def manifest(self) -> bytes:
        """The canonical chunk manifest of these bytes."""
        return ChunkManifest(self.size, CHUNK_BYTES, self.chunk_digests).encode()


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


def hash_fd(
    fd: int, progress: Progress | None = None, *, limit: int | None = None, part_bytes: int = 0
) -> Digests:
    """Hash what is readable from `fd`, from its start (positional reads, so `fd` is shared).

    SHA-256 runs in a second thread (`filled_chunks`, `Sha256Thread`) while this one reads the
    next piece and takes each chunk's xxh3-128. With `limit`, stop once more than `limit` bytes
    were read (at most one piece past it). With `part_bytes` (whole chunks), the pieces are
    upload parts and this thread also takes each part's SHA-256 (`PartDigests`, for a bucket
    record: hashlib releases the GIL, so two CPUs hash at once; memory stays at two parts).
    """
    if part_bytes % CHUNK_BYTES:
        raise ValueError("parts must be whole chunks")
    sha256 = Sha256Thread()
    chunks: list[bytes] = []
    parts: list[bytes] = []
    size = 0
    try:
        for view in filled_chunks(
            sha256, functools.partial(_fs.pread_into, fd), part_bytes or CHUNK_BYTES
        ):
            if not part_bytes:
                chunks.append(xxhash.xxh3_128_digest(view))
            else:
                parts.append(hashlib.sha256(view).digest())
                for start in range(0, len(view), CHUNK_BYTES):
                    chunks.append(xxhash.xxh3_128_digest(view[start : start + CHUNK_BYTES]))
            size += len(view)
            if progress is not None:
                progress.advance(len(view))
            if limit is not None and size > limit:
                break
        if part_bytes:
            return PartDigests(size, sha256.digest(), tuple(chunks), part_bytes, tuple(parts))
        return Digests(size, sha256.digest(), tuple(chunks))
    finally:
        sha256.close()


def hash_export(
    fd: int, size: int, progress: Progress | None = None, *, part_bytes: int = 0
) -> Digests:
    """Hash a kernel's export in place (`hash_fd`), reading at most one piece past its `size`.

    A file still growing shows as larger (the caller refuses it) instead of being read for as
    long as it grows.

    Raises:
        StoreIOError: the export could not be read.
    """
    try:
        return hash_fd(fd, progress, limit=size, part_bytes=part_bytes)
    except OSError as exc:
        raise StoreIOError(f"cannot read the export: {exc.strerror}") from exc


def copy_and_hash(
    src_fd: int, dst_fd: int, *, limit: int, progress: Progress | None = None
) -> Digests:
    """Copy `src_fd` from its start into `dst_fd` (empty, at position 0), and hash the copy.

    The kernel copies each chunk (`_fs.copy_range`, as cp does); the chunk is then read back
    from the copy, still in the page cache, and hashed as `hash_fd` hashes (SHA-256 in a second
    thread). So the digests are those of the bytes stored, whatever the source does meanwhile
    (the caller checks that it did nothing). Where the kernel cannot copy between the two files
    (another filesystem, an older kernel), this thread reads and writes each chunk instead.
    Writeback of each chunk starts at once (`_fs.WriteBehind`), so the caller's final fsync
    finds little left to write; a file of one chunk starts neither a thread nor writeback.

    Raises:
        ArtifactTooLarge: more than `limit` bytes were read (at most one chunk past it).
        OSError: the source could not be read or the copy written.
    """
    sha256 = Sha256Thread()
    copier = _Copier(src_fd, dst_fd)
    chunks: list[bytes] = []
    behind: _fs.WriteBehind | None = None
    total = 0
    try:
        for view in filled_chunks(sha256, copier.fill):
            total += len(view)
            if total > limit:
                raise ArtifactTooLarge(
                    f"the artifact is larger than the {limit}-byte limit", limit=limit
                )
            if sha256.threaded:
                behind = behind or _fs.WriteBehind(dst_fd)
                behind.written(len(view))
            chunks.append(xxhash.xxh3_128_digest(view))
            if progress is not None:
                progress.advance(len(view))
        return Digests(total, sha256.digest(), tuple(chunks))
    finally:
        sha256.close()


class _Copier:
    """Copies the source a chunk at a time and fills a buffer with that chunk of the copy."""

    def __init__(self, src_fd: int, dst_fd: int) -> None:
        self._src_fd, self._dst_fd = src_fd, dst_fd
        self.in_kernel = True

    def fill(self, buffer: bytearray, offset: int) -> int:
        """Copy the chunk at `offset` and read it back into `buffer`; its length (0: the end)."""
        if self.in_kernel:
            try:
                copied = _fs.copy_range(self._src_fd, self._dst_fd, len(buffer), offset)
            except OSError as exc:
                if offset or exc.errno not in _NO_KERNEL_COPY:
                    raise
                self.in_kernel = False  # decided at the first chunk, for the whole copy
            else:
                return _fs.pread_into(self._dst_fd, memoryview(buffer)[:copied], offset)
        n = _fs.pread_into(self._src_fd, buffer, offset)
        _fs.write_all(self._dst_fd, memoryview(buffer)[:n])
        return n


def filled_chunks(
    sha256: Sha256Thread, fill: Callable[[bytearray, int], int], size: int = CHUNK_BYTES
) -> Iterator[memoryview]:
    """Pieces of `size` bytes from `fill(buffer, offset)`, from 0, each handed to `sha256`.

    A piece is valid until the next is asked for. Two buffers take turns for the whole pass (a
    fresh `bytes` a piece would cost a page fault every 4 KiB), and a buffer is filled again
    only once `sha256` is done with it.
    """
    buffers = (bytearray(size), bytearray(size))
    offset = 0
    for turn in itertools.count():
        buffer = buffers[turn % 2]
        sha256.settle(1)  # this buffer's last update (two chunks ago) is done
        if not (n := fill(buffer, offset)):
            return
        view = memoryview(buffer)[:n]
        sha256.update(view)
        yield view
        offset += n


class Sha256Thread:
    """SHA-256 updated in order by a second thread, so the caller's reads and xxh3 overlap it.

    hashlib releases the GIL while it hashes a large buffer; xxhash does not, so xxh3 stays in
    the caller's thread. A short first chunk (all of a one-chunk file) has nothing to overlap:
    it is hashed at once and no thread starts. The caller leaves the data of an update alone
    until `settle` says that update is done.
    """

    def __init__(self) -> None:
        self._sha256 = hashlib.sha256()
        self._thread: threading.Thread | None = None
        self._todo: queue.SimpleQueue[bytes | memoryview | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        self._in_flight = 0

    @property
    def threaded(self) -> bool:
        """Whether updates run in the second thread (a file of more than one chunk)."""
        return self._thread is not None

    def update(self, data: bytes | memoryview) -> None:
        """Hash `data` after everything handed over before it."""
        if self._thread is None and len(data) < CHUNK_BYTES:
            self._sha256.update(data)  # nothing in flight: no thread has started
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="artmem-sha256", daemon=True)
            self._thread.start()
        self._in_flight += 1
        self._todo.put(data)

    def settle(self, in_flight: int) -> None:
        """Wait until at most `in_flight` updates are not done (the latest ones).

        Raises:
            Exception: an update failed (as hashlib raised it).
        """
        while self._in_flight > in_flight:
            self._in_flight -= 1
            if (failure := self._done.get()) is not None:
                raise failure

    def digest(self) -> bytes:
        """The digest of everything handed over (waits for every update)."""
        self.settle(0)
        return self._sha256.digest()

    def close(self) -> None:
        """Stop the thread once the updates in flight are done (after success or failure)."""
        if self._thread is not None:
            self._todo.put(None)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while (data := self._todo.get()) is not None:
            try:
                self._sha256.update(data)
            except BaseException as exc:  # handed to the caller's thread, never lost
                self._done.put(exc)
            else:
                self._done.put(None)
