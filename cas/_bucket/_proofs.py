"""Which versions of a bucket's objects this host proved to hold their address's bytes.

A stored object is not sent again only once its bytes are proven: hashed as read back by ranged
GETs pinned to its ETag, or named by a proof this host kept of exactly that version. A service
gives a replaced object a new ETag, so a kept proof of (ETag, size) is as good as a read-back;
the SHA-256 label an object carries as metadata is never trusted.
"""

from __future__ import annotations

import contextlib
import os
import threading

import msgspec

import fsedge as _fs
from cards import ArtifactId
from cards.errors import IntegrityError
from cas._bucket._cache import download
from cas._bucket._client import BucketClient, Head
from cas._hashing import Digests

_PROOF_MAX_BYTES = 512


class Proofs:
    """Which versions of the bucket's objects this host proved to be their address's bytes.

    A proof is a small file per artifact under the local cache (`proofs/<artifact_id>`): the
    ETag and size of the version proven. A service gives a replaced object a new ETag, so a
    matching proof spares reading the object back again; `trusted` False (integrity "always")
    never uses one.
    """

    def __init__(self, client: BucketClient, root: str, in_flight: int, *, trusted: bool) -> None:
        self._client = client
        self._root = root
        self._in_flight = in_flight
        self._trusted = trusted

    def check(self, head: Head | None, artifact_id: ArtifactId, digests: Digests) -> bool | None:
        """None: no object; True: the object is proven to be `digests`' bytes; False: it is not.

        Raises:
            StoreIOError: the bucket failed.
        """
        if head is None:
            return None
        if head.size != digests.size:
            return False
        if self._trusted and self._recorded(artifact_id) == (head.etag, head.size):
            return True
        try:
            got = download(self._client, head.key, None, head.size, self._in_flight, None)
        except IntegrityError:  # replaced or truncated while it was read: not proven
            return False
        if got.sha256 != digests.sha256:
            return False
        self.remember(artifact_id, head.etag, head.size)
        return True

    def remember(self, artifact_id: ArtifactId, etag: str, size: int) -> None:
        """Keep a proof that the version `etag` holds the artifact's bytes (best effort).

        Renamed into place unsynced: after a crash it is whole, or unreadable (and ignored).
        """
        if not etag:
            return
        path = os.path.join(self._root, artifact_id)
        stage = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with contextlib.suppress(OSError):
            os.makedirs(self._root, mode=0o700, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(stage, flags, 0o600)
            try:
                _fs.write_all(fd, msgspec.json.encode((etag, size)))
            finally:
                os.close(fd)
            os.replace(stage, path)

    def _recorded(self, artifact_id: ArtifactId) -> tuple[str, int] | None:
        path = os.path.join(self._root, artifact_id)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            etag, size = msgspec.json.decode(
                _fs.read_small(fd, _PROOF_MAX_BYTES), type=tuple[str, int]
            )
        except (OSError, ValueError, msgspec.DecodeError):
            return None
        finally:
            os.close(fd)
        return etag, size
