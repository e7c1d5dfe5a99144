"""Proving stored objects intact: the verifier, and its cache keyed by file identity.

Resolve hands out a path only after the object's size and SHA-256 match its card; deduplication
counts a stored copy only after it hashes to its artifact id. A proof is remembered per exact
file identity (device, inode, size, mtime, ctime), so any later write, chmod or replace forces a
rehash: in this process's cache, and on disk in a verification record beside the object
(`objects/<shard>/<artifact_id>.verified`), so a repeat resolve in a new process needs no rehash.
A record is trusted only when it names the object's current identity and the card's SHA-256.
What neither can see is silent media corruption that leaves the identity alone: `artmem fsck`
and `integrity = "always"` rehash every time.
"""

from __future__ import annotations

import enum
import os
import stat
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from cards import ArtifactId, ProjectKey
from cards.errors import IntegrityError, ObjectMissing
from cas._hashing import Digests, hash_fd
from cas._objects import ObjectStore
from cas._progress import Progress

if TYPE_CHECKING:
    from cards import ExperimentCardV1
    from fsedge import Staged

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
            if self._mode is IntegrityMode.CACHED:
                cached = self._cache.get(key) or _recorded(
                    objects.read_record(artifact_id), key, card.artifact.sha256
                )
                if cached is not None:
                    self._cache.put(key, cached)
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
        objects.write_record(artifact_id, _record(key, card.artifact.sha256, verified_at))
        return verified_at, True

    def proven_copy(self, objects: ObjectStore, artifact_id: ArtifactId, digests: Digests) -> bool:
        """Whether an intact copy of `artifact_id` is stored; changes nothing if not.

        Proven by this process's cache or a verification record of the copy's exact identity,
        else by hashing it. A corrupt copy is left in place: `stored_copy`, under the project
        lock, quarantines it.
        """
        st = objects.lstat(artifact_id)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size != digests.size:
            return False
        key = file_identity(self._project, artifact_id, st)
        sha256 = digests.sha256.hex()
        if self._mode is IntegrityMode.CACHED and (
            self._cache.get(key) or _recorded(objects.read_record(artifact_id), key, sha256)
        ):
            return True
        try:
            stored = objects.digests(artifact_id)
        except ObjectMissing:
            return False
        if stored.sha256 != digests.sha256:
            return False
        self.remember(objects, artifact_id, st, sha256)
        return True

    def remember(
        self, objects: ObjectStore, artifact_id: ArtifactId, st: os.stat_result, sha256: str
    ) -> None:
        """Record that the file of identity `st` holds bytes of `sha256` (just hashed)."""
        key = file_identity(self._project, artifact_id, st)
        verified_at = self._clock()
        self._cache.put(key, verified_at)
        objects.write_record(artifact_id, _record(key, sha256, verified_at))

    def adopt(
        self, objects: ObjectStore, tmp_fd: int, stage: Staged, artifact_id: ArtifactId,
        digests: Digests,
    ) -> bool:  # fmt: skip
        """Publish a stage hashed as it was written (`digests`), under the caller's commit lock.

        It is fsynced and its proof persisted beside it, unless an intact copy is stored
        already (a corrupt one is quarantined first). Returns whether one was.

        Raises:
            StoreIOError: the stage could not be published, or a corrupt copy moved aside.
        """
        present, _ = self.stored_copy(objects, artifact_id, digests)
        if present:
            return True
        objects.publish(stage, artifact_id, digests.manifest(), tmp_fd)
        stage.drop_name()
        self.remember(objects, artifact_id, os.fstat(stage.fd), digests.sha256.hex())
        return False

    def stored_copy(
        self, objects: ObjectStore, artifact_id: ArtifactId, digests: Digests
    ) -> tuple[bool, bool]:
        """Whether intact bytes of `artifact_id` are stored, and whether a corrupt copy was moved.

        A name or a size proves nothing: a copy counts only when its identity was proven before
        or it hashes to the artifact id now. Anything else at the name is quarantined.

        Raises:
            StoreIOError: a corrupt copy could not be moved aside.
        """
        if self.proven_copy(objects, artifact_id, digests):
            return True, False
        if objects.lstat(artifact_id) is None:
            return False, False
        objects.quarantine(artifact_id)
        return False, True


def _record(key: FileIdentity, sha256: str, verified_at: datetime) -> bytes:
    """A verification record: the identity that was hashed, its digest, and when."""
    return msgspec.json.encode(
        {
            "v": 1,
            "identity": list(key[2:]),
            "sha256": sha256,
            "verified_at": verified_at.isoformat(),
        }
    )


def _recorded(raw: bytes | None, key: FileIdentity, sha256: str) -> datetime | None:
    """When a record proves this exact identity had `sha256`, else None (any doubt: rehash)."""
    if raw is None:
        return None
    try:
        record = msgspec.json.decode(raw)
        if (
            record.get("v") != 1
            or record.get("identity") != list(key[2:])
            or record.get("sha256") != sha256
        ):
            return None
        verified_at = datetime.fromisoformat(record["verified_at"])
    except (msgspec.DecodeError, RecursionError, AttributeError, KeyError, TypeError, ValueError):
        return None
    return verified_at if verified_at.tzinfo is not None else None
