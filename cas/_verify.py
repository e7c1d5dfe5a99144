"""Integrity verification of stored objects, with a process-local cache keyed by file identity."""

from __future__ import annotations

import enum
import hashlib
import os
import threading
from datetime import datetime

from cards import ArtifactId, ProjectKey
from cas._progress import Progress

_READ_BYTES = 1 << 20


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


def sha256_fd(fd: int, progress: Progress | None = None) -> tuple[bytes, int]:
    """SHA-256 and length of everything readable from `fd`, from its start, in 1 MiB reads."""
    hasher = hashlib.sha256()
    buffer = bytearray(_READ_BYTES)
    view = memoryview(buffer)
    offset = 0
    while n := os.preadv(fd, [buffer], offset):
        hasher.update(view[:n])
        offset += n
        if progress is not None:
            progress.advance(n)
    return hasher.digest(), offset
