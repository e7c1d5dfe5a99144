"""Publishing an object at its content address: a conditional create, never an overwrite.

The record has already copied the export to a local stage while hashing it, so the content
address is known before a byte is sent. Then:

- the chunk manifest goes first (`If-None-Match: *`; one that differs from ours is replaced by
  `If-Match` on exactly that version, since ours was computed from the bytes just hashed);
- a stored object (HEAD: our size and the SHA-256 it was published with) is not sent again:
  deduplication costs no upload;
- a small object is one conditional `PutObject`; a larger one a multipart upload on the final
  key itself, parts read back from the stage (`in_flight` at once, bounded memory), completed
  with `If-None-Match: *`. An incomplete upload is invisible, so the key shows the whole object
  or nothing; a crash leaves only an incomplete upload, which `fsck --repair` aborts after an
  age. No staging key and no server-side copy are needed.

A 412 means the address was taken meanwhile: by the same bytes from a concurrent record on
another host (deduplication), or by something else. Before counting it as ours we check its
size and the SHA-256 stored as metadata when it was published (a cheap HEAD): that is not a
proof of its bytes, which resolve always gives (a streamed hash against the card).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

from cards import ArtifactId
from cards.errors import IntegrityError, StoreIOError
from cas._bucket._client import BucketClient, Conflict, Head
from cas._bucket._keys import BucketKeys
from cas._hashing import Digests
from cas._objects import MAX_MANIFEST_BYTES


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
    stage_fd: int,
    *,
    part_bytes: int,
    in_flight: int,
) -> bool:
    """Publish the manifest, then the staged object unless it is stored; whether it was.

    Raises:
        IntegrityError: other bytes hold the content address.
        StoreIOError: the bucket or the stage failed.
    """
    sha256 = digests.sha256.hex()
    key = keys.object(artifact_id)
    _publish_manifest(client, keys.chunks(artifact_id), digests.manifest())
    if stored(client.head(key), digests.size, sha256):
        return True
    try:
        if digests.size <= part_bytes:
            client.put(key, _pread(stage_fd, 0, digests.size), create=True, sha256=sha256)
        else:
            _upload_create(client, key, stage_fd, digests.size, sha256, part_bytes, in_flight)
    except Conflict:
        if stored(client.head(key), digests.size, sha256):
            return True
        raise IntegrityError("the content address was taken, then removed; record again") from None
    return False


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
    fd: int,
    size: int,
    sha256: str,
    part_bytes: int,
    in_flight: int,
) -> None:
    """A multipart upload of the stage to `key`, completed only if `key` does not exist."""
    upload_id = client.start_upload(key, sha256)
    try:
        etags: list[str] = []
        with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="artmem-up") as pool:
            pending: deque[Future[str]] = deque()
            for number, offset in enumerate(range(0, size, part_bytes), start=1):
                if len(pending) >= in_flight:
                    etags.append(pending.popleft().result())
                body = _pread(fd, offset, min(part_bytes, size - offset))
                pending.append(pool.submit(client.upload_part, key, upload_id, number, body))
            etags.extend(future.result() for future in pending)
        client.complete(key, upload_id, etags, create=True)
    except BaseException:
        client.abort(key, upload_id)
        raise


def _pread(fd: int, offset: int, length: int) -> bytes:
    parts: list[bytes] = []
    done = 0
    try:
        while done < length and (part := os.pread(fd, length - done, offset + done)):
            parts.append(part)
            done += len(part)
    except OSError as exc:
        raise StoreIOError(f"cannot read the local copy: {exc.strerror}") from exc
    if done != length:
        raise StoreIOError("the local copy is shorter than what was hashed")
    return b"".join(parts)
