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
- what is sent is proven to be the bytes of the address before the object is created: xxh3 is
  no cryptographic hash, and a kernel able to swap in colliding chunks between the passes
  must not get other bytes published under the address. When the first pass took the SHA-256
  of every part (`PartDigests`, from the same buffers that fed the address), each part
  declares that digest as its checksum and is proven against it just before it is sent
  (`BucketClient`: by the signer's own payload hash where it takes one, else hashed in the
  sending thread), so no second SHA-256 of the whole runs in order on this thread, the SDK
  adds no CRC32, and the service verifies each part too. Otherwise (plain `Digests`, e.g. a
  migration) every chunk read for sending is checked against its xxh3-128 (an early, cheap
  refusal) and the SHA-256 of everything sent against the address before the put or the
  completing call. A source that changed fails the record (`SourceChanged`, the upload
  aborted), so the object is exactly the bytes its address names.

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
from cas._bucket._client import BucketClient, ChecksumMismatch, Conflict, Head
from cas._bucket._hasher import PartDigests
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
        if isinstance(digests, PartDigests) and digests.part_bytes == part_bytes:
            _send_proven(client, key, digests, source_fd, in_flight, progress)
        elif digests.size <= part_bytes:
            body = parts.read(0, digests.size)
            parts.check_whole()
            client.put(key, body, create=True, sha256=sha256)
            parts.sent(digests.size)
        else:
            _upload_create(client, key, parts, sha256, part_bytes, in_flight)
    except ChecksumMismatch:
        raise SourceChanged("the export changed between hashing and upload") from None
    except Conflict:
        if stored(client.head(key), digests.size, sha256):
            return True
        raise IntegrityError("the content address was taken, then removed; record again") from None
    return False


def _send_proven(
    client: BucketClient,
    key: str,
    digests: PartDigests,
    fd: int,
    in_flight: int,
    progress: Progress | None,
) -> None:
    """Send the source in the parts the first pass hashed, each proven by its SHA-256 as sent.

    Raises:
        ChecksumMismatch: a part is not the bytes the first pass hashed (nothing is created).
        Conflict: the address exists. StoreIOError: the bucket or the source failed.
    """
    sha256 = digests.sha256.hex()
    if digests.size <= digests.part_bytes:  # one put, proven against the address itself
        body = _read_part(fd, bytearray(digests.size), 0)
        client.put(key, body, create=True, sha256=sha256, checksum=digests.sha256)
        if progress is not None:
            progress.advance(digests.size)
        return
    if len(digests.part_sha256) != -(-digests.size // digests.part_bytes):
        raise StoreIOError("the first pass did not hash the parts being sent")
    upload_id = client.start_upload(key, sha256, checksums=True)
    try:
        etags = _send_parts(client, key, upload_id, digests, fd, in_flight, progress)
        client.complete(key, upload_id, etags, create=True, checksums=digests.part_sha256)
    except BaseException:
        client.abort(key, upload_id)
        raise


def _send_parts(
    client: BucketClient,
    key: str,
    upload_id: str,
    digests: PartDigests,
    fd: int,
    in_flight: int,
    progress: Progress | None,
) -> list[str]:
    """Read and send every part, `in_flight` at once, each in a reused buffer; their ETags."""
    size, part_bytes = digests.size, digests.part_bytes
    spare = [bytearray(part_bytes) for _ in range(min(in_flight, len(digests.part_sha256)))]
    pending: deque[tuple[Future[str], bytearray]] = deque()
    etags: list[str] = []
    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="artmem-up") as pool:
        for index, offset in enumerate(range(0, size, part_bytes)):
            if not spare:
                etags.append(_returned(pending.popleft(), spare, progress))
            body = spare.pop()
            if size - offset < part_bytes:  # the last part, short: a buffer of its own size
                body = bytearray(size - offset)  # (the SDK may still hold a view of the old)
            _read_part(fd, body, offset)
            digest = digests.part_sha256[index]
            future = pool.submit(client.upload_part, key, upload_id, index + 1, body, digest)
            pending.append((future, body))
        etags.extend(_returned(item, spare, progress) for item in list(pending))
    return etags


def _returned(
    item: tuple[Future[str], bytearray], spare: list[bytearray], progress: Progress | None
) -> str:
    """Wait for a part to be sent; its buffer goes back to `spare`."""
    future, body = item
    etag = future.result()
    spare.append(body)
    if progress is not None:
        progress.advance(len(body))
    return etag


def _read_part(fd: int, body: bytearray, offset: int) -> bytearray:
    try:
        n = _fs.pread_into(fd, body, offset)
    except OSError as exc:
        raise StoreIOError(f"cannot read the source: {exc.strerror}") from exc
    if n != len(body):
        raise StoreIOError("the source is shorter than what was hashed")
    return body


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

    def read(self, offset: int, length: int) -> bytearray:
        """Bytes `[offset, offset + length)` (chunk-aligned `offset`), proven as hashed.

        Raises:
            SourceChanged: a chunk differs from its digest.
            StoreIOError: the source could not be read.
        """
        if offset != self._read:  # the whole digest needs the bytes in order
            raise StoreIOError("the source was not read for sending in order")
        data = _read_part(self._fd, bytearray(length), offset)  # sent as is, in one write
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
