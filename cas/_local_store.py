"""`ProjectStore`: the one `Store` over a local directory (`LocalObjects`; layout: `_layout`).

The rooms: `_objects` (object files), `_cardfiles` (card files), `_hashing` (the digests),
`_ingest` (opening a kernel's export safely), `_record` (the commit protocol of a record,
deduplication and quotas), `_sniff` (the media type), `_verify` (proofs of intactness and their
records), `_project` (the project's directory, commit lock and staging), `_fs` (the filesystem
edge). `LocalObjects` opens the project for each call and hands the rooms to `Store`; the
record-only rooms load with the first record, so a reader never imports them. A `read_only`
store (the notebook API) writes nothing at all: not even a verification record.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Unpack

import fsedge as _fs
from cards import ArtifactId
from cards.errors import ArtifactTooLarge, InvalidInput, ObjectMissing, SourceChanged, StoreIOError
from cas._backend import Entry
from cas._local_backend import LocalBackend
from cas._local_cards import RACY_NS as RACY_NS  # the catalog reads card files by it
from cas._objects import ObjectStore
from cas._progress import Progress
from cas._project import Project, open_project
from cas._room import Options, Recording, Room, require_room
from cas._store import Store

if TYPE_CHECKING:  # the card models load with the first card read or written
    from cards import ExperimentCardV1
    from cas._fsck import FsckRoom, Leftover
    from cas._hashing import Digests
    from cas._results import Recorded
    from cas.slicing import RemoteBytes


class ProjectStore(Store):
    """The one `Store` over a project's directory below the configured artifact root."""

    objects: LocalObjects

    def __init__(self, artifact_root: str, project_id: str, **options: Unpack[Options]) -> None:
        """Serve `project_id` below `artifact_root` (absolute); `options` as `Store`'s."""
        if not os.path.isabs(artifact_root):
            raise InvalidInput("the artifact root must be an absolute path")
        self.artifact_root = artifact_root
        super().__init__(functools.partial(LocalObjects, artifact_root), project_id, **options)


class LocalObjects:
    """A project's objects as files below `artifact_root` (`Objects`, and `Summarised`)."""

    def __init__(self, artifact_root: str, store: Store) -> None:
        self._root = artifact_root
        self._store = store
        self._layout = store.layout

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute path of `parts` (a layout path) below this project's directory."""
        return os.path.join(self._root, *self._layout.root, *parts)

    def opened(self, *, create: bool) -> contextlib.AbstractContextManager[Project | None]:
        """The project's directory, open for one call (`open_project`)."""
        return open_project(self._root, self._layout, create=create)

    def record(self, job: Recording) -> Recorded:
        """Stage, hash and publish the export, then commit its card (`_record`)."""
        from cas._record import Recorder  # record-only rooms (see the module docstring)

        with self.opened(create=True) as opened:
            return Recorder(self._store).record(_project(require_room(opened)), job)

    def verified(
        self, room: Room, card: ExperimentCardV1, progress: Progress | None
    ) -> tuple[datetime, bool]:
        """The object's file proven against the card (a record of its identity, or a hash)."""
        project = _project(room)
        objects = _UnrecordedProofs(project.fd, self._layout) if self._store.read_only else None
        return self._store.verifier.verify(objects or project.objects, card, progress)

    def remote(self, room: Room, card: ExperimentCardV1) -> RemoteBytes | None:
        """None: a slice reads the object's file (which must be a regular file)."""
        if room.keys.stat("/".join(self._layout.object_path(card.typed_artifact_id))) is None:
            raise ObjectMissing("the experiment's artifact is missing from the store")
        return None

    def adopt(self, artifact_id: ArtifactId, digests: Digests, source_fd: int) -> bool:
        """Copy the bytes into a stage, hashed as copied, and publish it (or find it stored)."""
        from cas._hashing import copy_and_hash

        verifier = self._store.verifier
        with self.opened(create=True) as opened:
            project = _project(require_room(opened))
            if verifier.proven_copy(project.objects, artifact_id, digests):
                return True
            with project.staging() as tmp_fd, _fs.staged(tmp_fd, "object") as stage:
                try:
                    copied = copy_and_hash(source_fd, stage.fd, limit=digests.size)
                except ArtifactTooLarge:
                    raise SourceChanged("the bytes grew while they were copied") from None
                except OSError as exc:
                    raise StoreIOError(f"cannot copy the object: {exc.strerror}") from exc
                if copied.sha256 != digests.sha256 or copied.size != digests.size:
                    raise SourceChanged("the bytes changed while they were copied")
                with project.locked():
                    return verifier.adopt(project.objects, tmp_fd, stage, artifact_id, digests)

    def stored(self, room: Room) -> tuple[int, int]:
        """The objects' count and bytes from the summary kept by directory stamps (`_usage`)."""
        summary = _project(room).objects.summary()
        return summary.objects, summary.bytes

    def checking(self, room: Room) -> FsckRoom:
        """A file's hash, a stage's lock, a rename aside (`_LocalCheck`)."""
        return _LocalCheck(_project(room))


def _project(room: Room) -> Project:
    assert isinstance(room, Project)
    return room


class _UnrecordedProofs(ObjectStore):
    """A read-only store's objects: a proof stays in the process's cache, never on disk."""

    def write_record(self, artifact_id: ArtifactId, data: bytes) -> bool:
        """Write nothing (the record only spares a later rehash)."""
        return False


class _LocalCheck:
    """What `fsck` asks of a local project: a file's hash, a stage's lock, a rename aside."""

    def __init__(self, project: Project) -> None:
        self._project = project
        self.backend = LocalBackend(project.fd)

    def digests(self, entry: Entry, progress: Progress | None) -> Digests | None:
        """The object's file hashed whole; None when no regular file holds its name."""
        try:
            return self._project.objects.digests(ArtifactId(entry.key.rpartition("/")[2]), progress)
        except ObjectMissing:
            return None

    def stale(self, entry: Entry) -> bool | None:
        """Whether a stage is old and no writer holds its lock (None: no stage of ours)."""
        from cas._fsck import STALE_STAGE_AGE_S

        older_than = time.time_ns() - STALE_STAGE_AGE_S * 1_000_000_000
        return self._project.stale_stage(entry.key, older_than)

    def leftovers(self) -> Iterator[Leftover]:
        """None: every local leftover is a stage."""
        return iter(())

    def quarantine(self, artifact_id: ArtifactId) -> None:
        """Rename the object into `quarantine/`."""
        self._project.objects.quarantine(artifact_id)
