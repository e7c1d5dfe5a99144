"""Publishing an object at its content address: a conditional create, never an overwrite.

The record has already hashed the export in place, so the content address is known before a
byte is sent. Then:

- the chunk manifest goes first (`If-None-Match: *`; one that differs from ours is replaced by
  `If-Match` on exactly that version, since ours was computed from the bytes just hashed);
- a stored object (HEAD: our size and the SHA-256 it was published with) is not sent again:
  deduplication costs no upload;
- a small object is one conditional `PutObject`; a larger one a multipart upload on the final
  key itself, parts read again from the source (`in_flight` at once, bounded memory), completed
  with `If-None-Match: *`. An incomplete upload is invisible, so the key shows the whole object
  or nothing; a crash leaves only an incomplete upload, which `fsck --repair` aborts after an
  age. No staging key and no server-side copy are needed.
- every chunk read for sending is checked against the digests of the first pass before it is
  sent (xxh3-128: an early, cheap refusal), and the SHA-256 of everything sent is checked
  against the address before the object is created (the put, or the completing call): xxh3 is
  no cryptographic hash, and a kernel able to swap in colliding chunks between the passes
  must not get other bytes published under the address. A source that changed fails the
  record (`SourceChanged`, the upload aborted), so the object is exactly the bytes its address
  names.

A 412 means the address was taken meanwhile: by the same bytes from a concurrent record on
another host (deduplication), or by something else. Before counting it as ours we check its
size and the SHA-256 stored as metadata when it was published (a cheap HEAD): that is not a
proof of its bytes, which resolve always gives (a streamed hash against the card).
"""

from __future__ import annotations

import hashlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import xxhash

from cards import ArtifactId
from cards.errors import IntegrityError, SourceChanged, StoreIOError
from cas import _fs
from cas._bucket._client import BucketClient, Conflict, Head
from cas._bucket._keys import BucketKeys
from cas._chunks import CHUNK_BYTES
from cas._hashing import Digests
from cas._objects import MAX_MANIFEST_BYTES
from cas._progress import Progress


def stored(head: Head | None, size: int, sha256: str) -> bool:
    """Whether a HEAD shows our object: its size and the SHA-256 it was published with.

    Raises:
        IntegrityError: other bytes (or unlabelled ones) hold the content address.
    """
    if head is None:
        return False
    if head.size != size or head.sha256 != sha256:
        raise IntegrityError(
            "the bucket holds other bytes under this content address; "
            "run `artmem fsck --repair`, then record again"
        )
    return True


def publish(
    client: BucketClient,
    keys: BucketKeys,
    artifact_id: ArtifactId,
    digests: Digests,
    source_fd: int,
    *,
    part_bytes: int,
    in_flight: int,
    progress: Progress | None = None,
) -> bool:
    """Publish the manifest, then the object at `source_fd` unless it is stored; whether it was.

    Raises:
        SourceChanged: a chunk read for sending differs from `digests` (nothing is published).
        IntegrityError: other bytes hold the content address.
        StoreIOError: the bucket or the source failed.
    """
    sha256 = digests.sha256.hex()
    key = keys.object(artifact_id)
    _publish_manifest(client, keys.chunks(artifact_id), digests.manifest())
    if stored(client.head(key), digests.size, sha256):
        return True
    parts = _Parts(source_fd, digests, progress)
    try:
        if digests.size <= part_bytes:
            body = parts.read(0, digests.size)
            parts.check_whole()
            client.put(key, body, create=True, sha256=sha256)
            parts.sent(digests.size)
        else:
            _upload_create(client, key, parts, sha256, part_bytes, in_flight)
    except Conflict:
        if stored(client.head(key), digests.size, sha256):
            return True
        raise IntegrityError("the content address was taken, then removed; record again") from None
    return False


class _Parts:
    """Reads of the source for sending, in order, proven as the first pass hashed them.

    Each chunk is checked against its xxh3 digest as it is read; the SHA-256 of them all,
    against the address before the object is created (`check_whole`).
    """

    def __init__(self, fd: int, digests: Digests, progress: Progress | None) -> None:
        self._fd = fd
        self._digests = digests
        self._progress = progress
        self._sha256 = hashlib.sha256()
        self._read = 0

    @property
    def size(self) -> int:
        """The object's size."""
        return self._digests.size

    def read(self, offset: int, length: int) -> bytes:
        """Bytes `[offset, offset + length)` (chunk-aligned `offset`), proven as hashed.

        Raises:
            SourceChanged: a chunk differs from its digest.
            StoreIOError: the source could not be read.
        """
        if offset != self._read:  # the whole digest needs the bytes in order
            raise StoreIOError("the source was not read for sending in order")
        data = _pread(self._fd, offset, length)
        view = memoryview(data)
        for start in range(0, length, CHUNK_BYTES):
            index = (offset + start) // CHUNK_BYTES
            chunk = view[start : start + CHUNK_BYTES]
            if xxhash.xxh3_128_digest(chunk) != self._digests.chunk_digests[index]:
                raise SourceChanged("the export changed between hashing and upload")
        self._sha256.update(view)
        self._read += length
        return data

    def check_whole(self) -> None:
        """Prove that the bytes read for sending are the bytes of the address.

        Raises:
            SourceChanged: they are not (fewer, or others with the same chunk digests).
        """
        if self._read != self._digests.size or self._sha256.digest() != self._digests.sha256:
            raise SourceChanged("the export changed between hashing and upload")

    def sent(self, length: int) -> None:
        """`length` more bytes reached the bucket."""
        if self._progress is not None:
            self._progress.advance(length)


def _publish_manifest(client: BucketClient, key: str, manifest: bytes) -> None:
    for _ in range(3):
        try:
            client.put(key, manifest, create=True)
            return
        except Conflict:
            got = client.get(key, MAX_MANIFEST_BYTES)
            if got is None:
                continue
            if got[0] == manifest:
                return
            try:
                client.put(key, manifest, if_match=got[1])
                return
            except Conflict:
                continue
    raise IntegrityError("the chunk manifest kept changing in the bucket; record again")


def _upload_create(
    client: BucketClient,
    key: str,
    parts: _Parts,
    sha256: str,
    part_bytes: int,
    in_flight: int,
) -> None:
    """A multipart upload of the source to `key`, completed only if `key` does not exist."""
    size = parts.size
    upload_id = client.start_upload(key, sha256)
    try:
        etags: list[str] = []
        with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="artmem-up") as pool:
            pending: deque[tuple[int, Future[str]]] = deque()
            for number, offset in enumerate(range(0, size, part_bytes), start=1):
                if len(pending) >= in_flight:
                    etags.append(_sent(pending.popleft(), parts))
                body = parts.read(offset, min(part_bytes, size - offset))
                future = pool.submit(client.upload_part, key, upload_id, number, body)
                pending.append((len(body), future))
            etags.extend(_sent(item, parts) for item in pending)
        parts.check_whole()  # before the object becomes visible
        client.complete(key, upload_id, etags, create=True)
    except BaseException:
        client.abort(key, upload_id)
        raise


def _sent(item: tuple[int, Future[str]], parts: _Parts) -> str:
    etag = item[1].result()
    parts.sent(item[0])
    return etag


def _pread(fd: int, offset: int, length: int) -> bytes:
    try:
        data = _fs.pread_full(fd, length, offset)
    except OSError as exc:
        raise StoreIOError(f"cannot read the source: {exc.strerror}") from exc
    if len(data) != length:
        raise StoreIOError("the source is shorter than what was hashed")
    return data
