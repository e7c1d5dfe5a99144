"""Recording a kernel's export: stream, hash, publish, commit the card.

Commit protocol: the bytes go into a locked stage in `tmp/` and are fsynced; then,
under the project lock, quotas are checked, the chunk manifest and the object are published (hard
link, so an existing object is never overwritten: that is deduplication), the directory fsynced,
and the card written atomically. Object plus card is the local commit; a crash before the card
leaves at most an unreferenced object that `fsck` reports, never a card pointing at nothing.

Two ways in, one commit. Fresh bytes are copied into the stage while they are hashed: one read
of the source. Bytes that may be stored already (an object of exactly their size exists, and they
are large enough for a copy to matter) are hashed first, writing nothing; when an intact copy is
proven stored, nothing is copied at all, and the media type and table facts are read from that
proven object, never from the source after its hash. Otherwise the source is copied as if fresh.

Deduplication never trusts a name or a size: a stored object counts only once its bytes are proven
to hash to its id (a verification record of its exact identity, or a rehash). A corrupt one is
moved to `quarantine/` under the lock and replaced by the new bytes, with a warning.

Quota bound: quotas are checked under the lock at commit time, when the object's size and the
card count are exact, so committed usage never exceeds the limits (overshoot 0). Stages in `tmp/`
occupy disk before that check: at most the sum of the in-flight permitted writes.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

import fsedge as _fs
from cards import ArtifactId, CardMetadata, artifact_id_for_digest
from cards.errors import StoreIOError
from cards.policy import check_byte_quota
from cas._hashing import Digests, copy_and_hash, hash_export
from cas._progress import Progress
from cas._project import Project
from cas._results import Committed, Provenance, Recorded

if TYPE_CHECKING:
    from cas._room import Recording
    from cas._store import Store

PROBE_MIN_BYTES = 4 << 20  # below this, copying costs little more than hashing first


class _Vanished(Exception):
    """The stored copy proven before the lock is gone (or corrupt) under it: copy after all."""


class Recorder:
    """Records into one project of `store` (built by `LocalObjects`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.verifier = store.verifier

    def record(self, project: Project, job: Recording) -> Recorded:
        """Record the opened export `job.src` into `project` (see the module docstring).

        Raises:
            ArtifactTooLarge, QuotaExceeded, SourceChanged, StoreIOError: see `Store.record`.
        """
        src, provenance, metadata, progress = job
        limit = self.store.limits.artifact_bytes  # the caller refused a larger file already
        if src.size >= PROBE_MIN_BYTES and _has_object_of_size(project, src.size):
            if progress is not None:
                progress.start(src.size)
            digests = hash_export(src.fd, src.size, progress)
            src.check_unchanged(digests.size)
            artifact_id = artifact_id_for_digest(digests.sha256)
            if self.verifier.proven_copy(project.objects, artifact_id, digests):
                with contextlib.suppress(_Vanished):
                    return self._deduplicate(
                        project, artifact_id, digests, metadata, provenance, src.name
                    )
        if progress is not None:
            progress.start(src.size)
        with project.staging() as tmp_fd, _fs.staged(tmp_fd, "object") as stage:
            digests = _stream(src.fd, stage.fd, limit, progress)
            src.check_unchanged(digests.size)
            measured = self._measure(project, stage.fd, digests, metadata, src.name, provenance)
            return self._commit(project, tmp_fd, stage, measured)

    def _deduplicate(
        self,
        project: Project,
        artifact_id: ArtifactId,
        digests: Digests,
        metadata: CardMetadata,
        provenance: Provenance,
        name: str,
    ) -> Recorded:
        """Commit against the proven stored copy; its bytes, not the source's, are read.

        `name` is the source's: a type known by its extension alone (CSV) is detected as for
        a first record.
        """
        fd = project.objects.open(artifact_id)
        try:
            measured = self._measure(project, fd, digests, metadata, name, provenance)
        finally:
            os.close(fd)
        with project.staging() as tmp_fd:
            return self._commit(project, tmp_fd, None, measured)

    def _measure(
        self,
        project: Project,
        fd: int,
        digests: Digests,
        metadata: CardMetadata,
        name: str,
        provenance: Provenance,
    ) -> Committed:
        """The media type from the bytes at `fd`, and their table facts (before the lock)."""
        from cas._sniff import detect
        from cas.slicing import measure

        metadata = detect(fd, digests.size, name, metadata)
        # Read outside the lock (it may take seconds); the card seen here only spares a
        # needless read: `Store.commit` decides on the card under the lock.
        seen, _ = project.cards.find_versioned(self.store.experiment_of(digests, metadata))
        measured = measure(fd, digests.manifest(), metadata, seen)
        return Committed(digests, metadata, measured, provenance)

    def _commit(
        self, project: Project, tmp_fd: int, stage: _fs.Staged | None, recording: Committed
    ) -> Recorded:
        """Publish the object (unless `stage` is None: then it must be stored) and the card."""
        digests = recording.digests
        artifact_id = artifact_id_for_digest(digests.sha256)

        def place() -> tuple[bool, bool]:  # under the commit lock
            present, healed = self.verifier.stored_copy(project.objects, artifact_id, digests)
            if stage is None and (healed or not present):
                raise _Vanished
            if not present:
                used = project.objects.summary(tmp_fd).bytes
                check_byte_quota(used, digests.size, self.store.limits)
            manifest = digests.manifest()
            project.objects.publish(None if present else stage, artifact_id, manifest, tmp_fd)
            if stage is not None and not present:
                # The bytes were hashed as they were written: record the published file's
                # final identity (our own inode, whatever its name points to later), so its
                # first resolve and a later deduplication need no rehash.
                stage.drop_name()
                sha256 = digests.sha256.hex()
                self.verifier.remember(project.objects, artifact_id, os.fstat(stage.fd), sha256)
            return present, healed

        return self.store.commit(project, recording, place)


def _has_object_of_size(project: Project, size: int) -> bool:
    """Whether any stored object has exactly `size` bytes (from the objects' summary)."""
    with project.staging() as tmp_fd:
        return size in project.objects.summary(tmp_fd).sizes


def _stream(src_fd: int, dst_fd: int, limit: int, progress: Progress | None) -> Digests:
    try:
        return copy_and_hash(src_fd, dst_fd, limit=limit, progress=progress)
    except OSError as exc:
        raise StoreIOError(f"cannot write the object: {exc.strerror}") from exc
