"""A bucket object as a slice reads it: ranged GETs of only the chunks touched, one version.

`locate` on a host without a local copy builds a `BucketRanges`: the object's key, the ETag its
HEAD saw (its size checked against the card), and the stored chunk manifest. The slice's reader
(`cas.slicing._reader`) proves the manifest against the card's `chunk_manifest_sha256` and every
chunk against the manifest before serving a byte, exactly as for a local file; this module only
fetches. Every GET names the ETag (`If-Match`), so an object replaced under its key after it was
located fails the read cleanly (`IntegrityError`) instead of mixing two versions.

The reads run in the slice's forked child (`cas.slicing._isolated`), which opens connections of
its own from the parent's session (`BucketClient.forked`): credentials come from the same
standard chain, no chunk crosses a pipe, and a child killed mid-response cannot leave a parent's
pooled connection in the middle of a reply. In the process that located the object, the store's
own client is used.
"""

from __future__ import annotations

import os

from cards import ExperimentCardV1
from cards.errors import IntegrityError, ObjectMissing
from cas._bucket._client import BucketClient, Conflict, Head
from cas._bucket._keys import BucketKeys
from fsedge import chunk_count


def pin_object(client: BucketClient, keys: BucketKeys, card: ExperimentCardV1) -> BucketRanges:
    """The bucket's current version of the card's object, and its stored manifest.

    Raises:
        ObjectMissing: the bucket has no such object.
        IntegrityError: its size differs from the card's, or its manifest is missing or
            larger than the card allows (`load_manifest` proves the rest).
        StoreIOError: the bucket failed.
    """
    artifact_id = card.typed_artifact_id
    head = client.head(keys.object(artifact_id))
    if head is None:
        raise ObjectMissing("the experiment's artifact is missing from the bucket")
    if head.size != card.artifact.bytes:
        raise IntegrityError("the bucket's artifact size differs from its card")
    bound = 256 + 40 * chunk_count(card.artifact.bytes)  # as `load_manifest` bounds it
    try:  # one byte past the bound, so an oversized manifest is seen as one
        manifest, _ = client.get_range(keys.chunks(artifact_id), 0, bound + 1)
    except ObjectMissing as exc:
        raise IntegrityError("the artifact's chunk manifest is missing from the bucket") from exc
    return BucketRanges(client, head, manifest)


class BucketRanges:
    """One version of a bucket object (`head`) and its stored manifest, read by ranges."""

    def __init__(self, client: BucketClient, head: Head, manifest: bytes) -> None:
        self._client = client
        self._head = head
        self._manifest = manifest

    def manifest(self) -> bytes:
        """The chunk manifest as stored (the slice's reader proves it against the card)."""
        return self._manifest

    def open(self) -> RangeReads:
        """Ranged reads of this version, in this process or in a child forked from it."""
        return RangeReads(self._client, self._head)


class RangeReads:
    """Ranged GETs of one object version, through a client that belongs to this process."""

    def __init__(self, client: BucketClient, head: Head) -> None:
        self._owner = os.getpid()
        self._client = client
        self._head = head

    def read(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes of the version at `offset`.

        Raises:
            IntegrityError: the object changed since it was located, or is shorter.
            ObjectMissing: the object is gone from the bucket.
            StoreIOError: the bucket failed.
        """
        client = self._here()
        try:
            data, _ = client.get_range(self._head.key, offset, offset + length, self._head.etag)
        except Conflict as exc:
            raise IntegrityError("the bucket's artifact changed while it was read") from exc
        except ObjectMissing as exc:
            raise ObjectMissing("the experiment's artifact is gone from the bucket") from exc
        if len(data) != length:
            raise IntegrityError("the bucket's artifact is shorter than its card")
        return data

    def close(self) -> None:
        """Nothing to release: a forked child's connections end with it."""

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled for a slice's reading helper: its client connects anew there."""
        return (RangeReads, (self._client, self._head))

    def _here(self) -> BucketClient:
        if os.getpid() != self._owner:
            self._client = self._client.forked()
            self._owner = os.getpid()
        return self._client
