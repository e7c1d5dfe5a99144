"""Where a project's objects, manifests, cards and staging keys live in a bucket.

The same layout as on disk (`cas._layout`), below an optional prefix:
`<prefix>/projects/<project_key>/objects/<shard>/<artifact_id>` (and `.chunks` beside it),
`.../cards/<experiment_id>.json`, `.../tmp/<random>` for staging, `.../quarantine/` for objects
`fsck --repair` moved aside.
"""

from __future__ import annotations

import msgspec

from cards import ArtifactId
from cas._layout import CHUNKS_SUFFIX, ProjectLayout, object_name


class BucketKeys(msgspec.Struct, frozen=True):
    """The keys of one project: every key this store reads or writes starts with `root`."""

    layout: ProjectLayout
    prefix: str

    @property
    def root(self) -> str:
        """The project's key prefix, ending in '/'."""
        head = f"{self.prefix}/" if self.prefix else ""
        return f"{head}{'/'.join(self.layout.root)}/"

    @property
    def objects(self) -> str:
        """The prefix of every object and manifest."""
        return f"{self.root}objects/"

    @property
    def tmp(self) -> str:
        """The prefix of staging keys (crash leftovers live only here)."""
        return f"{self.root}tmp/"

    @property
    def quarantine(self) -> str:
        """Where `fsck --repair` moves corrupt objects."""
        return f"{self.root}quarantine/"

    def object_of(self, key: str) -> ArtifactId | None:
        """The artifact id a listed key names as an object (in its shard), else None."""
        shard, _, name = key.removeprefix(self.objects).partition("/")
        return object_name(name, shard)

    def object(self, artifact_id: ArtifactId) -> str:
        """The object's key."""
        return "/".join((self.root.rstrip("/"), *self.layout.object_path(artifact_id)))

    def chunks(self, artifact_id: ArtifactId) -> str:
        """The chunk manifest's key."""
        return self.object(artifact_id) + CHUNKS_SUFFIX

    def claim(self, key: str) -> str:
        """The staging key that claims the completion of the object at `key`."""
        return f"{self.tmp}claim-{key.rpartition('/')[2]}"
