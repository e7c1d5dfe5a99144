"""Where a project's objects, manifests, cards and staging files live, on every backend.

Below the artifact root (or a bucket's prefix): `projects/<project_key>/` holds `objects/<shard>/
<artifact_id>` (with `.chunks` and `.verified` beside it), `cards/<experiment_id>.json` and
`cards.log`, `tmp/` (stages), `quarantine/` (objects `fsck --repair` moved aside), `lock` and the
objects' summary. The project key is one-way: a listing never shows a project's name.
"""

from __future__ import annotations

import msgspec

from cards import ArtifactId, ExperimentId, ProjectId, ProjectKey, project_key

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

    def card_path(self, experiment_id: ExperimentId) -> tuple[str, ...]:
        """A card's path components."""
        return (*self.cards_dir, experiment_id + CARD_SUFFIX)

    @property
    def tmp_dir(self) -> tuple[str, ...]:
        """The staging directory (same filesystem as objects and cards)."""
        return (TMP,)

    @property
    def quarantine_dir(self) -> tuple[str, ...]:
        """Where `fsck --repair` moves corrupt objects; nothing is ever deleted."""
        return (QUARANTINE,)
