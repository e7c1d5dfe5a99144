"""Local hashing: SHA-256 of a whole object and xxh3-128 of each 4 MiB chunk, in one pass.

`hash_fd` reads an object already in place (resolve, fsck), `hash_export` a kernel's export in
place (a record that may deduplicate; a bucket record without part checksums);
`copy_and_hash` streams a source into a staging file, hashing while it copies (record). A
bucket record that declares part checksums hashes in `_bucket._hasher.hash_for_upload`
instead, which also takes each upload part's SHA-256.
"""

from __future__ import annotations

import hashlib
import itertools
import queue
import threading
from collections.abc import Iterator

import msgspec
import xxhash

from cards.errors import ArtifactTooLarge, StoreIOError
from cas import _fs
from cas._chunks import CHUNK_BYTES, ChunkManifest
from cas._progress import Progress


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

    SHA-256 runs in a second thread (`_chunks`, `_Sha256`) while this one reads the next chunk
    and takes each chunk's xxh3-128. With `limit`, stop once more than `limit` bytes were read
    (at most one chunk past it).
    """
    sha256 = _Sha256()
    chunks: list[bytes] = []
    size = 0
    try:
        for view in _chunks(fd, sha256):
            chunks.append(xxhash.xxh3_128_digest(view))
            size += len(view)
            if progress is not None:
                progress.advance(len(view))
            if limit is not None and size > limit:
                break
        return Digests(size, sha256.digest(), tuple(chunks))
    finally:
        sha256.close()


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
    src_fd: int, dst_fd: int, *, limit: int, progress: Progress | None = None
) -> Digests:
    """Copy `src_fd` from its start to `dst_fd`, hashing the bytes as they pass.

    As `hash_fd` reads (SHA-256 in a second thread, two buffers taking turns), this thread
    also writes each chunk and starts its writeback (`_fs.WriteBehind`), so the caller's final
    fsync finds little left to write. A file of one chunk has nothing to overlap: no thread and
    no writeback.

    Raises:
        ArtifactTooLarge: more than `limit` bytes were read (stops at once).
        OSError: the source could not be read or the copy written.
    """
    sha256 = _Sha256()
    chunks: list[bytes] = []
    behind: _fs.WriteBehind | None = None
    total = 0
    try:
        for view in _chunks(src_fd, sha256):
            total += len(view)
            if total > limit:
                raise ArtifactTooLarge(
                    f"the artifact is larger than the {limit}-byte limit", limit=limit
                )
            _fs.write_all(dst_fd, view)
            if sha256.threaded:
                behind = behind or _fs.WriteBehind(dst_fd)
                behind.written(len(view))
            chunks.append(xxhash.xxh3_128_digest(view))
            if progress is not None:
                progress.advance(len(view))
        return Digests(total, sha256.digest(), tuple(chunks))
    finally:
        sha256.close()


def _chunks(fd: int, sha256: _Sha256) -> Iterator[memoryview]:
    """`fd`'s chunks from its start, each already handed to `sha256`; valid until the next.

    Two 4 MiB buffers take turns, reused for the whole pass: a fresh `bytes` a chunk would cost
    the copying thread a page fault every 4 KiB, more than its writing. A buffer is read into
    again only once `sha256` is done with it.
    """
    buffers = (bytearray(CHUNK_BYTES), bytearray(CHUNK_BYTES))
    offset = 0
    for turn in itertools.count():
        buffer = buffers[turn % 2]
        sha256.settle(1)  # this buffer's last update (two chunks ago) is done
        if not (n := _fs.pread_into(fd, buffer, offset)):
            return
        view = memoryview(buffer)[:n]
        sha256.update(view)
        yield view
        offset += n


class _Sha256:
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
