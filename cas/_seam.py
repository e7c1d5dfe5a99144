"""What a backend supplies to the one `Store` (`_store`) beyond its keys: its `Objects`.

`Objects` is how one backend holds a project's objects: how it opens a project for a call,
records an export's bytes, proves an object where resolve hands it out, reaches it for a slice,
adopts a copy and checks its objects for fsck. A faster way a backend offers is a typed
extension, found by protocol (`isinstance(objects, Summarised)`), never by asking which backend
it is: `Summarised` (the objects' usage without a listing) and `Copies` (local copies, so
`has_object` sends no request). The local cards' extension, `CardFiles`, is the cards room's.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cards import ArtifactId, ExperimentCardV1
    from cas._fsck import FsckRoom
    from cas._hashing import Digests
    from cas._progress import Progress
    from cas._results import Recorded
    from cas._room import Recording, Room
    from cas.slicing import RemoteBytes


class Objects(Protocol):
    """How one backend holds a project's objects (see the module docstring)."""

    def opened(self, *, create: bool) -> AbstractContextManager[Room | None]:
        """The project open for one call; None when it has recorded nothing (not `create`)."""
        ...

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute local path of `parts` (a layout path), where resolve hands bytes out."""
        ...

    def record(self, job: Recording) -> Recorded:
        """Store the opened export's bytes and commit its card (`commit_card`)."""
        ...

    def verified(
        self, room: Room, card: ExperimentCardV1, progress: Progress | None
    ) -> tuple[datetime, bool]:
        """Prove the card's object intact where `resolve` hands it out; (when, hashed now)."""
        ...

    def remote(self, room: Room, card: ExperimentCardV1) -> RemoteBytes | None:
        """How a slice reaches the card's bytes: None for the local path (ObjectMissing)."""
        ...

    def adopt(self, artifact_id: ArtifactId, digests: Digests, source_fd: int) -> bool:
        """Store the bytes at `source_fd` unless an intact copy is; whether one was."""
        ...

    def checking(self, room: Room) -> FsckRoom:
        """What `check` asks of the open project beyond its keys (`cas._fsck.FsckRoom`)."""
        ...


@runtime_checkable
class Summarised(Protocol):
    """An extension: objects that count themselves faster than a listing of their keys."""

    def stored(self, room: Room) -> tuple[int, int]:
        """How many objects the project holds, and their bytes."""
        ...


@runtime_checkable
class Copies(Protocol):
    """An extension: objects with local copies, so `has_object` needs no request."""

    def has_copy(self, artifact_id: ArtifactId) -> bool:
        """Whether a copy of the object is kept here (a stat, not a verification)."""
        ...
