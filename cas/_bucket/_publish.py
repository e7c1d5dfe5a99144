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
  adds no CRC32, and the service verifies each part too. Otherwise (plain `Digests`: a
  migration, or `part_checksums` off) every chunk read for sending is checked against its
  xxh3-128 (an early, cheap refusal) and the SHA-256 of everything sent against the address
  before the put or the completing call. A source that changed fails the record
  (`SourceChanged`, the upload aborted), so the object is exactly the bytes its address names.

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
    parts = _Parts(source_fd, digests, part_bytes, progress)
    try:
        if digests.size <= part_bytes:
            body = parts.read(bytearray(digests.size), 0)
            parts.check_whole()
            client.put(key, body, create=True, sha256=sha256, checksum=parts.declared(None))
            parts.sent(digests.size)
        else:
            _upload_create(client, key, parts, sha256, in_flight)
    except ChecksumMismatch:
        raise SourceChanged("the export changed between hashing and upload") from None
    except Conflict:
        if stored(client.head(key), digests.size, sha256):
            return True
        raise IntegrityError("the content address was taken, then removed; record again") from None
    return False


class _Parts:
    """Reads of the source for sending, in order, and how each is proven as the first pass hashed.

    With the first pass's SHA-256 of every part (`PartDigests` of this part size), each part
    declares its digest (`declared`) and the client proves it as it is sent. Otherwise each
    chunk is checked against its xxh3 digest as it is read, and the SHA-256 of them all against
    the address before the object is created (`check_whole`).
    """

    def __init__(
        self, fd: int, digests: Digests, part_bytes: int, progress: Progress | None
    ) -> None:
        """Prepare to send `digests`' bytes from `fd` in parts of `part_bytes`.

        Raises:
            StoreIOError: the part digests do not cover the object in parts of `part_bytes`.
        """
        self._fd = fd
        self._digests = digests
        self.part_bytes = part_bytes
        self._progress = progress
        self.checksums = False  # whether each part declares its SHA-256 (`part_sha256`)
        self.part_sha256: tuple[bytes, ...] = ()
        if isinstance(digests, PartDigests) and digests.part_bytes == part_bytes:
            if len(digests.part_sha256) != -(-digests.size // part_bytes):
                raise StoreIOError("the first pass did not hash the parts being sent")
            self.checksums, self.part_sha256 = True, digests.part_sha256
        self._sha256 = hashlib.sha256()
        self._read = 0

    @property
    def size(self) -> int:
        """The object's size."""
        return self._digests.size

    def declared(self, index: int | None) -> bytes | None:
        """The SHA-256 part `index` declares (None: the whole object, sent in one put)."""
        if not self.checksums:
            return None
        return self._digests.sha256 if index is None else self.part_sha256[index]

    def read(self, body: bytearray, offset: int) -> bytearray:
        """Fill `body` with the bytes at `offset` (chunk-aligned), proven as hashed if by chunks.

        Raises:
            SourceChanged: a chunk differs from its digest.
            StoreIOError: the source could not be read, or ends early.
        """
        if offset != self._read:  # the whole digest needs the bytes in order
            raise StoreIOError("the source was not read for sending in order")
        try:
            n = _fs.pread_into(self._fd, body, offset)
        except OSError as exc:
            raise StoreIOError(f"cannot read the source: {exc.strerror}") from exc
        if n != len(body):
            raise StoreIOError("the source is shorter than what was hashed")
        self._read += n
        if not self.checksums:
            view = memoryview(body)
            for start in range(0, n, CHUNK_BYTES):
                chunk = view[start : start + CHUNK_BYTES]
                digest = self._digests.chunk_digests[(offset + start) // CHUNK_BYTES]
                if xxhash.xxh3_128_digest(chunk) != digest:
                    raise SourceChanged("the export changed between hashing and upload")
            self._sha256.update(view)
        return body

    def check_whole(self) -> None:
        """Prove that the bytes read for sending are the bytes of the address.

        With declared part digests the client proved each part as it was sent; only the count
        of bytes read is left to check.

        Raises:
            SourceChanged: they are not (fewer, or others with the same chunk digests).
        """
        whole = self.checksums or self._sha256.digest() == self._digests.sha256
        if self._read != self._digests.size or not whole:
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
    client: BucketClient, key: str, parts: _Parts, sha256: str, in_flight: int
) -> None:
    """A multipart upload of the source to `key`, completed only if `key` does not exist.

    `in_flight` parts at once, each read into a buffer reused once its part was sent.
    """
    size, part_bytes = parts.size, parts.part_bytes
    upload_id = client.start_upload(key, sha256, checksums=parts.checksums)
    try:
        etags: list[str] = []
        spare = [bytearray(part_bytes) for _ in range(min(in_flight, -(-size // part_bytes)))]
        pending: deque[tuple[Future[str], bytearray]] = deque()
        with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="artmem-up") as pool:
            for index, offset in enumerate(range(0, size, part_bytes)):
                if not spare:
                    etags.append(_sent(pending.popleft(), spare, parts))
                body = spare.pop()
                if size - offset < part_bytes:  # the last part, short: a buffer of its own size
                    body = bytearray(size - offset)
                parts.read(body, offset)
                number, checksum = index + 1, parts.declared(index)
                future = pool.submit(client.upload_part, key, upload_id, number, body, checksum)
                pending.append((future, body))
            etags.extend(_sent(item, spare, parts) for item in list(pending))
        parts.check_whole()  # before the object becomes visible
        client.complete(key, upload_id, etags, create=True, checksums=parts.part_sha256)
    except BaseException:
        client.abort(key, upload_id)
        raise


def _sent(item: tuple[Future[str], bytearray], spare: list[bytearray], parts: _Parts) -> str:
    """Wait for a part to be sent; its buffer goes back to `spare`."""
    future, body = item
    etag = future.result()
    spare.append(body)
    parts.sent(len(body))
    return etag
