"""Proving stored objects intact: the verifier, and its cache keyed by file identity.

Resolve hands out a path only after the object's size and SHA-256 match its card; deduplication
counts a stored copy only after it hashes to its artifact id. A proof is remembered per exact
file identity (device, inode, size, mtime, ctime), so any later write or replace forces a rehash.
"""

from __future__ import annotations

import enum
import os
import stat
import threading
from collections.abc import Callable
from datetime import datetime

from cards import ArtifactId, ExperimentCardV1, ProjectKey
from cards.errors import IntegrityError, ObjectMissing
from cas._hashing import Digests, hash_fd
from cas._objects import ObjectStore
from cas._progress import Progress

Clock = Callable[[], datetime]


class IntegrityMode(enum.StrEnum):
    """How often resolve rehashes an object."""

    CACHED = "cached"  # first resolve in a process, and every observed file change
    ALWAYS = "always"  # every resolve


FileIdentity = tuple[ProjectKey, ArtifactId, int, int, int, int, int]


def file_identity(project: ProjectKey, artifact_id: ArtifactId, st: os.stat_result) -> FileIdentity:
    """The cache key: any write, replace or metadata change to the file changes it (ctime)."""
    return (project, artifact_id, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class VerificationCache:
    """Which exact file identities this process has hashed and found intact, and when.

    A fresh process starts empty, so its first resolve of any object always hashes.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self._verified: dict[FileIdentity, datetime] = {}
        self._max_entries = max_entries
        self._lock = threading.Lock()

    def get(self, key: FileIdentity) -> datetime | None:
        """When `key` was verified, or None if it never was (or the file changed)."""
        with self._lock:
            return self._verified.get(key)

    def put(self, key: FileIdentity, verified_at: datetime) -> None:
        """Remember a successful verification; the cache is bounded and simply forgets."""
        with self._lock:
            if len(self._verified) >= self._max_entries:
                self._verified.clear()
            self._verified[key] = verified_at

    def clear(self) -> None:
        """Forget every verification."""
        with self._lock:
            self._verified.clear()


PROCESS_CACHE = VerificationCache()


class Verifier:
    """Proves objects of one project intact, remembering proofs in `cache`."""

    def __init__(
        self, project: ProjectKey, mode: IntegrityMode, cache: VerificationCache, clock: Clock
    ) -> None:
        self._project = project
        self._mode = mode
        self._cache = cache
        self._clock = clock

    def verify(
        self, objects: ObjectStore, card: ExperimentCardV1, progress: Progress | None
    ) -> tuple[datetime, bool]:
        """When the card's object was proven intact, and whether that took a hash just now.

        Raises:
            ObjectMissing: the object is not in the store.
            IntegrityError: its size or SHA-256 differs from the card.
        """
        artifact_id = card.typed_artifact_id
        fd = objects.open(artifact_id)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != card.artifact.bytes:
                raise IntegrityError("the stored artifact's size differs from its card")
            key = file_identity(self._project, artifact_id, st)
            cached = None if self._mode is IntegrityMode.ALWAYS else self._cache.get(key)
            if cached is not None:
                return cached, False
            if progress is not None:
                progress.start(st.st_size)
            digests = hash_fd(fd, progress)
            after = file_identity(self._project, artifact_id, os.fstat(fd))
            if digests.sha256.hex() != card.artifact.sha256 or after != key:
                raise IntegrityError("the stored artifact's SHA-256 differs from its card")
        finally:
            os.close(fd)
        verified_at = self._clock()
        self._cache.put(key, verified_at)
        return verified_at, True

    def stored_copy(
        self, objects: ObjectStore, artifact_id: ArtifactId, digests: Digests
    ) -> tuple[bool, bool]:
        """Whether intact bytes of `artifact_id` are stored, and whether a corrupt copy was moved.

        A name or a size proves nothing: a copy counts only when its identity was proven before
        or it hashes to the artifact id now. Anything else at the name is quarantined.

        Raises:
            StoreIOError: a corrupt copy could not be moved aside.
        """
        st = objects.lstat(artifact_id)
        if st is None:
            return False, False
        if stat.S_ISREG(st.st_mode) and st.st_size == digests.size:
            key = file_identity(self._project, artifact_id, st)
            if self._mode is IntegrityMode.CACHED and self._cache.get(key) is not None:
                return True, False
            try:
                stored = objects.digests(artifact_id)
            except ObjectMissing:
                stored = None
            if stored is not None and stored.sha256 == digests.sha256:
                self._cache.put(key, self._clock())
                return True, False
        objects.quarantine(artifact_id)
        return False, True
