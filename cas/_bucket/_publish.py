"""Publishing an object at its content address: a conditional create, never an overwrite.

The record has already hashed the export in place, so the content address is known before a
byte is sent. Then:

- the chunk manifest goes first (`If-None-Match: *`; one that differs from ours is replaced by
  `If-Match` on exactly that version, since ours was computed from the bytes just hashed);
- a stored object is not sent again only once its bytes are proven to be the address's: hashed
  as read back by ranged GETs pinned to its ETag, or named by a proof this host kept of exactly
  that version (`_proofs`: its ETag and size, written when this host sent or hashed it). The
  SHA-256 metadata label is never trusted: a corrupt object of the right size under the
  original label is copied to `quarantine/`, removed, and published again (healed);
- a small object is one conditional `PutObject`; a larger one a multipart upload on the final
  key itself, parts read again from the source (`in_flight` at once, bounded memory), completed
  with `If-None-Match: *`. An incomplete upload is invisible, so the key shows the whole object
  or nothing; a crash leaves only an incomplete upload, which `fsck --repair` aborts after an
  age. No staging key and no server-side copy are needed. Where the service completes
  unconditionally (the probe says so, `_probe`), the completion is serialised by a claim key
  (`tmp/claim-<artifact_id>`, a conditional single `PUT`, which works there): whoever holds it
  completes if the object is still absent; the others wait for the object and deduplicate, so
  exactly one record reports `deduplicated: false`. A crashed holder's claim is taken over
  once it is `CLAIM_STALE_S` old.
- what is sent is proven to be the bytes of the address before the object is created: xxh3 is
  no cryptographic hash, and a kernel able to swap in colliding chunks between the passes
  must not get other bytes published under the address. When the first pass took the SHA-256
  of every part (`PartDigests`, from the same buffers that fed the address), each part
  declares that digest as its checksum and is proven against it just before it is sent
  (`BucketClient`: by the signer's own payload hash where it takes one, else hashed in the
  sending thread), so no second SHA-256 of the whole runs in order on this thread, and the SDK
  adds no CRC32. A service that enforces declared checksums verifies each part too; one that
  ignores them (the probe says which) stores what it received. Otherwise (plain `Digests`: a
  migration, or `part_checksums` off) every chunk read for sending is checked against its
  xxh3-128 (an early, cheap refusal) and the SHA-256 of everything sent against the address
  before the put or the completing call. A source that changed fails the record
  (`SourceChanged`, the upload aborted), so the object is exactly the bytes its address names.

A 412 means the address was taken meanwhile: by the same bytes from a concurrent record on
another host (deduplication), or by something else; it counts as ours only once proven as above.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from types import EllipsisType

import xxhash

import fsedge as _fs
from cards import ArtifactId
from cards.errors import IntegrityError, ObjectMissing, SourceChanged, StoreIOError
from cas._bucket._body_check import ChecksumMismatch
from cas._bucket._client import BucketClient, Conflict, Unsupported
from cas._bucket._keys import BucketKeys
from cas._bucket._probe import Capabilities
from cas._bucket._proofs import Proofs
from cas._hashing import Digests, PartDigests
from cas._layout import MAX_MANIFEST_BYTES
from cas._progress import Progress
from fsedge import CHUNK_BYTES

CLAIM_WAIT_S = 120.0  # how long a record waits for another host's completion before giving up
CLAIM_STALE_S = 600  # a claim this old belongs to a host that died while completing


class Publisher:
    """Publishes objects into one project of a bucket (see the module docstring)."""

    def __init__(
        self,
        client: BucketClient,
        keys: BucketKeys,
        caps: Capabilities,
        proofs: Proofs,
        *,
        part_bytes: int,
        in_flight: int,
    ) -> None:
        self.client = client
        self.keys = keys
        self.caps = caps
        self.proofs = proofs
        self.part_bytes = part_bytes
        self.in_flight = in_flight

    def publish(
        self,
        artifact_id: ArtifactId,
        digests: Digests,
        source_fd: int,
        progress: Progress | None = None,
        *,
        checked: bool | None | EllipsisType = ...,
    ) -> tuple[bool, bool]:
        """Publish the manifest, then the object unless it is proven stored.

        `checked` is what a check just now said (`Proofs.check`: None absent, False other
        bytes); by default it checks here. Returns whether the object was stored already,
        and whether a corrupt one was healed.

        Raises:
            SourceChanged: a chunk read for sending differs from `digests` (nothing is published).
            IntegrityError: the content address was taken by other bytes meanwhile.
            BackendUnsupported: the service has no conditional create.
            StoreIOError: the bucket or the source failed.
        """
        self.caps.require_create()
        key = self.keys.object(artifact_id)
        self._publish_manifest(self.keys.chunks(artifact_id), digests.manifest())
        present = checked
        if present is ...:
            present = self.proofs.check(self.client.head(key), artifact_id, digests)
        if present:
            return True, False
        healed = present is False
        if healed:
            quarantine(self.client, self.keys, artifact_id)
        try:
            etag = self._send(key, digests, source_fd, progress)
        except ChecksumMismatch:
            raise SourceChanged("the export changed between hashing and upload") from None
        except Conflict:
            if self.proofs.check(self.client.head(key), artifact_id, digests):
                return True, healed
            raise IntegrityError(
                "other bytes took this content address meanwhile; run `artmem fsck --repair`, "
                "then record again"
            ) from None
        self.proofs.remember(artifact_id, etag, digests.size)
        return False, healed

    def _send(self, key: str, digests: Digests, source_fd: int, progress: Progress | None) -> str:
        """Create the object at `key` from the source; its ETag (Conflict: it exists)."""
        sha256 = digests.sha256.hex()
        parts = _Parts(source_fd, digests, self.part_bytes, progress)
        if digests.size <= self.part_bytes:
            body = parts.read(bytearray(digests.size), 0)
            parts.check_whole()
            etag = self.client.put(
                key, body, create=True, sha256=sha256, checksum=parts.declared(None)
            )
            parts.sent(digests.size)
            return etag
        return self._upload_create(key, parts, sha256)

    def _upload_create(self, key: str, parts: _Parts, sha256: str) -> str:
        """A multipart upload of the source to `key`, completed only if `key` does not exist.

        `in_flight` parts at once, each read into a buffer reused once its part was sent.
        """
        client = self.client
        size, part_bytes, in_flight = parts.size, parts.part_bytes, self.in_flight
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
                    if size - offset < part_bytes:  # the last part, short: its own buffer
                        body = bytearray(size - offset)
                    parts.read(body, offset)
                    number, checksum = index + 1, parts.declared(index)
                    future = pool.submit(client.upload_part, key, upload_id, number, body, checksum)
                    pending.append((future, body))
                etags.extend(_sent(item, spare, parts) for item in list(pending))
            parts.check_whole()  # before the object becomes visible
            if self.caps.complete_if_absent:
                with contextlib.suppress(Unsupported):
                    return client.complete(
                        key, upload_id, etags, create=True, checksums=parts.part_sha256
                    )
            with self._claimed(key):
                return client.complete(key, upload_id, etags, checksums=parts.part_sha256)
        except BaseException:
            client.abort(key, upload_id)
            raise

    @contextlib.contextmanager
    def _claimed(self, key: str) -> Iterator[None]:
        """Hold the claim to complete `key` (see the module docstring).

        Raises:
            Conflict: the object appeared: another host completed it.
            StoreIOError: another host kept the claim for `CLAIM_WAIT_S` (retryable).
        """
        client, claim = self.client, self.keys.claim(key)
        deadline, delay = time.monotonic() + CLAIM_WAIT_S, 0.02
        while True:
            if client.head(key) is not None:
                raise Conflict("complete upload")
            try:
                client.put(claim, b"", create=True)
                break
            except Conflict:
                pass
            held = client.head(claim)
            if held is not None and datetime.now(UTC) - held.modified > timedelta(
                seconds=CLAIM_STALE_S
            ):
                client.delete(claim)  # its holder died while completing
                continue
            if time.monotonic() > deadline:
                raise StoreIOError("another host is still completing the same object; try again")
            time.sleep(delay)  # the holder completes in a request or two
            delay = min(0.5, delay * 2)
        try:
            if client.head(key) is not None:  # completed by the claim's previous holder
                raise Conflict("complete upload")
            yield
        finally:
            client.delete(claim)

    def _publish_manifest(self, key: str, manifest: bytes) -> None:
        client = self.client
        for _ in range(3):
            try:
                client.put(key, manifest, create=True)
                return
            except Conflict:
                pass
            try:
                got, etag = client.get_range(key, 0, MAX_MANIFEST_BYTES)
            except ObjectMissing:
                continue
            if got == manifest:
                return
            if self.caps.replace_etag is None:
                client.delete(key)  # ours is computed from the bytes: theirs is wrong
                continue
            with contextlib.suppress(Conflict):
                client.put(key, manifest, if_match=etag)
                return
        raise IntegrityError("the chunk manifest kept changing in the bucket; record again")


def quarantine(client: BucketClient, keys: BucketKeys, artifact_id: ArtifactId) -> None:
    """Copy a corrupt object to `quarantine/`, then remove it from its content address."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    key = keys.object(artifact_id)
    client.copy(key, f"{keys.quarantine}{artifact_id}.{stamp}")
    client.delete(key)


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


def _sent(item: tuple[Future[str], bytearray], spare: list[bytearray], parts: _Parts) -> str:
    """Wait for a part to be sent; its buffer goes back to `spare`."""
    future, body = item
    etag = future.result()
    spare.append(body)
    parts.sent(len(body))
    return etag
