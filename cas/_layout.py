"""Where a project's objects, manifests, cards and staging files live, on every backend.

Below the artifact root (or a bucket's prefix): `projects/<project_key>/` holds `objects/<shard>/
<artifact_id>` (with `.chunks` and `.verified` beside it), `cards/<experiment_id>.json` and
`cards.log`, `tmp/` (stages), `quarantine/` (objects `fsck --repair` moved aside), `lock` and the
objects' summary. The project key is one-way: a listing never shows a project's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from cards import ArtifactId, ProjectId, ProjectKey, parse_artifact_id, project_key
from cards.errors import InvalidId

if TYPE_CHECKING:
    from cas._backend import Backend, Entry

PROJECTS = "projects"
OBJECTS = "objects"
CARDS = "cards"
TMP = "tmp"
QUARANTINE = "quarantine"
LOCK = "lock"
CARDS_LOG = "cards.log"  # card file names written, in order (see `_card_log`)
CARD_SUFFIX = ".json"
CHUNKS_SUFFIX = ".chunks"
VERIFIED_SUFFIX = ".verified"  # a verification record beside its object (see `_verify`)
USAGE = "objects.summary"  # sizes of the objects per shard, a cache (see `_usage`)
MAX_MANIFEST_BYTES = 1 << 20


class ProjectLayout(msgspec.Struct, frozen=True):
    """Path components of one project: `root` below the artifact root, the rest below `root`."""

    project_id: ProjectId
    key: ProjectKey

    @classmethod
    def for_project(cls, project_id: ProjectId) -> ProjectLayout:
        """The layout of `project_id`, keyed by its one-way project key."""
        return cls(project_id=project_id, key=project_key(project_id))

    @property
    def root(self) -> tuple[str, str]:
        """The project directory, relative to the artifact root."""
        return (PROJECTS, self.key)

    @staticmethod
    def shard(artifact_id: ArtifactId) -> str:
        """The two-character fan-out directory of an object (the digest's first characters)."""
        return artifact_id[4:6]

    def object_dir(self, artifact_id: ArtifactId) -> tuple[str, ...]:
        """The directory holding an object and its chunk manifest."""
        return (OBJECTS, self.shard(artifact_id))

    def object_path(self, artifact_id: ArtifactId) -> tuple[str, ...]:
        """The object's path components."""
        return (*self.object_dir(artifact_id), artifact_id)

    def chunks_path(self, artifact_id: ArtifactId) -> tuple[str, ...]:
        """The chunk manifest's path components."""
        return (*self.object_dir(artifact_id), artifact_id + CHUNKS_SUFFIX)

    @property
    def cards_dir(self) -> tuple[str, ...]:
        """The directory of this project's cards."""
        return (CARDS,)

    @property
    def tmp_dir(self) -> tuple[str, ...]:
        """The staging directory (same filesystem as objects and cards)."""
        return (TMP,)

    @property
    def quarantine_dir(self) -> tuple[str, ...]:
        """Where `fsck --repair` moves corrupt objects; nothing is ever deleted."""
        return (QUARANTINE,)


def object_name(name: str, shard: str) -> ArtifactId | None:
    """The artifact id `name` is, if it is an object's name in `shard`; else None."""
    try:
        artifact_id = parse_artifact_id(name)
    except InvalidId:
        return None
    return artifact_id if ProjectLayout.shard(artifact_id) == shard else None


def listed_objects(keys: Backend) -> list[tuple[Entry, ArtifactId]]:
    """Every object of a project (not its manifests or records), listed through its keys."""
    found: list[tuple[Entry, ArtifactId]] = []
    for entry in keys.list(f"{OBJECTS}/"):
        shard, _, name = entry.key.removeprefix(f"{OBJECTS}/").partition("/")
        artifact_id = object_name(name, shard)
        if artifact_id is not None:
            found.append((entry, artifact_id))
    return found


def stored_objects(keys: Backend) -> tuple[int, int]:
    """How many objects a project holds, and their bytes (one listing of its keys)."""
    listed = listed_objects(keys)
    return len(listed), sum(entry.size for entry, _ in listed)
