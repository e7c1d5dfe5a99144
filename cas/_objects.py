"""The object store of one project: immutable, read-only, content-addressed files.

An object lives at `objects/<shard>/<artifact_id>` beside its chunk manifest. It is published by
hard link from a fsynced stage, so an existing name is never overwritten by accident; only a
proven-corrupt object is replaced, and it is first moved to `quarantine/`, never deleted.
Every method works through the project's directory descriptor (see `_fs`).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator

import fsedge as _fs
from cards import ArtifactId
from cards.errors import ObjectMissing, PathEscape, SourceMissing, StoreIOError
from cas._hashing import Digests, hash_fd
from cas._layout import (
    CHUNKS_SUFFIX,
    MAX_MANIFEST_BYTES,
    VERIFIED_SUFFIX,
    ProjectLayout,
    object_name,
)
from cas._local_backend import LocalBackend
from cas._progress import Progress
from cas._usage import ObjectSummary, summarise

MAX_RECORD_BYTES = 4096
_SIDE_FILES = (CHUNKS_SUFFIX, VERIFIED_SUFFIX)


class ObjectStore:
    """Objects of the project open at `project_fd` (borrowed: the caller closes it)."""

    def __init__(self, project_fd: int, layout: ProjectLayout) -> None:
        self._fd = project_fd
        self._layout = layout
        self._keys = LocalBackend(project_fd)  # the side files: manifests, verification records

    def lstat(self, artifact_id: ArtifactId) -> os.stat_result | None:
        """What holds the object's name (not followed), or None when nothing does."""
        try:
            obj_dir = _fs.open_dir_beneath(self._fd, self._layout.object_dir(artifact_id))
        except (SourceMissing, PathEscape):
            return None
        try:
            st = os.stat(artifact_id, dir_fd=obj_dir, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(obj_dir)
        return st

    def open(self, artifact_id: ArtifactId) -> int:
        """Open an object for reading; the caller closes the descriptor and `fstat`s it.

        Raises:
            ObjectMissing: there is no object of that id.
        """
        try:
            return _fs.open_file_beneath(self._fd, self._layout.object_path(artifact_id))
        except (SourceMissing, PathEscape) as exc:
            raise ObjectMissing("the experiment's artifact is missing from the store") from exc

    def digests(self, artifact_id: ArtifactId, progress: Progress | None = None) -> Digests:
        """Hash a stored object whole (SHA-256 and chunk digests).

        Raises:
            ObjectMissing: there is no regular file of that id.
        """
        fd = self.open(artifact_id)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ObjectMissing("the stored artifact is not a regular file")
            return hash_fd(fd, progress)
        finally:
            os.close(fd)

    def summary(self, stage_fd: int | None = None) -> ObjectSummary:
        """Count, bytes and sizes of the named objects, from the persisted summary (`_usage`).

        With `stage_fd` (a writer's staging directory) a summary that changed is persisted.
        """
        return summarise(self._fd, _object_sizes, stage_fd)

    def read_manifest(self, artifact_id: ArtifactId) -> bytes | None:
        """The stored chunk manifest's bytes, or None when it is absent or unreadable."""
        return self._read_side(artifact_id, CHUNKS_SUFFIX, MAX_MANIFEST_BYTES)

    def read_record(self, artifact_id: ArtifactId) -> bytes | None:
        """The object's verification record, or None when it is absent or unreadable."""
        return self._read_side(artifact_id, VERIFIED_SUFFIX, MAX_RECORD_BYTES)

    def write_record(self, artifact_id: ArtifactId, data: bytes) -> bool:
        """Write the object's verification record (`LocalBackend`); False if it was not written.

        A record only saves a later rehash, so failing to write one (no object, or another
        writer replaced the record first) is not an error.
        """
        key = self._side_key(artifact_id, VERIFIED_SUFFIX)
        try:
            if self.lstat(artifact_id) is None:
                return False
            entry = self._keys.stat(key)
            if entry is None:
                return self._keys.create(key, data) is not None
            return self._keys.replace(key, data, entry.version) is not None
        except (StoreIOError, PathEscape):
            return False

    def _side_key(self, artifact_id: ArtifactId, suffix: str) -> str:
        return "/".join((*self._layout.object_dir(artifact_id), artifact_id + suffix))

    def _read_side(self, artifact_id: ArtifactId, suffix: str, max_bytes: int) -> bytes | None:
        try:
            got = self._keys.read(self._side_key(artifact_id, suffix), 0, max_bytes + 1)
        except (ObjectMissing, StoreIOError):
            return None
        return got.data if len(got.data) <= max_bytes else None

    def publish(
        self, stage: _fs.Staged | None, artifact_id: ArtifactId, manifest: bytes, tmp_fd: int
    ) -> None:
        """Publish the chunk manifest, and the staged bytes unless `stage` is None.

        The object's name is taken by hard link, never replacing what is there: callers
        quarantine a proven-corrupt object first. The manifest is rewritten only if it differs.

        Raises:
            StoreIOError: the object or manifest could not be published.
        """
        obj_dir = _fs.make_dirs(self._fd, self._layout.object_dir(artifact_id))
        try:
            if self.read_manifest(artifact_id) != manifest:
                _fs.atomic_write(obj_dir, artifact_id + CHUNKS_SUFFIX, manifest, tmp_fd, "chunks")
            if stage is not None:
                _link_object(obj_dir, stage, artifact_id)
        finally:
            os.close(obj_dir)

    def quarantine(self, artifact_id: ArtifactId) -> str:
        """Move an object into `quarantine/` under a time-stamped name, which is returned.

        Raises:
            StoreIOError: the object could not be moved.
        """
        quarantine_fd = _fs.make_dirs(self._fd, self._layout.quarantine_dir)
        name = f"{artifact_id}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        try:
            shard_fd = _fs.open_dir_beneath(self._fd, self._layout.object_dir(artifact_id))
            try:
                os.rename(artifact_id, name, src_dir_fd=shard_fd, dst_dir_fd=quarantine_fd)
                _fs.fsync_dir(shard_fd)
            finally:
                os.close(shard_fd)
            _fs.fsync_dir(quarantine_fd)
        except OSError as exc:
            raise StoreIOError(f"cannot quarantine an object: {exc.strerror}") from exc
        finally:
            os.close(quarantine_fd)
        return name


def _object_sizes(shard_fd: int, shard: str) -> Iterator[int]:
    """The sizes of one shard's objects (entries named like an object of that shard)."""
    with os.scandir(shard_fd) as entries:
        for entry in entries:
            if not entry.name.endswith(_SIDE_FILES) and object_name(entry.name, shard):
                try:
                    yield entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:  # collected since the scan: no longer counts
                    continue


def _link_object(obj_dir: int, stage: _fs.Staged, artifact_id: ArtifactId) -> None:
    """Make the stage read-only and durable, then link it into place.

    Only a new object pays this fsync; a deduplicated record never gets here.
    """
    try:
        os.fchmod(stage.fd, _fs.OBJECT_MODE)
        os.fsync(stage.fd)
        if not stage.commit_link(obj_dir, artifact_id):
            # Someone published these bytes between our check and now (another process under
            # another lock cannot, so this is a foreign writer): keep theirs, never overwrite.
            raise StoreIOError("an object appeared under our name while it was published")
    except OSError as exc:
        raise StoreIOError(f"cannot publish the object: {exc.strerror}") from exc
