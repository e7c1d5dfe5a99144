"""Verified local copies of a bucket project's objects, under `<state_root>/bucket-cache/`.

The cache has the local store's layout (`projects/<project_key>/objects/<shard>/<artifact_id>`,
`.chunks` and `.verified` beside it, `tmp/` for stages, `lock`), so it reuses its rooms: the
object files (`ObjectStore`), the commit lock, and the verifier with its persisted records of
a copy's exact identity. A copy is published only after its size, SHA-256 and chunk manifest
match the card; a repeat resolve trusts the verification record exactly as the local store does
(never in `integrity = "always"` mode). A copy found corrupt is moved to the cache's
`quarantine/` and downloaded again. Kernels read these files; the bucket is never mounted.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

import fsedge as _fs
from cards import ArtifactId, ExperimentCardV1
from cards.errors import IntegrityError, ObjectMissing, StoreIOError
from cas._bucket._client import BucketClient, Conflict
from cas._hashing import ChunkHasher, Digests
from cas._layout import ProjectLayout
from cas._progress import Progress
from cas._project import open_project
from cas._verify import Verifier
from fsedge import CHUNK_BYTES


class LocalCopies:
    """The verified local copies of one project's objects."""

    def __init__(self, cache_root: str, layout: ProjectLayout, verifier: Verifier) -> None:
        self.root = cache_root
        self._layout = layout
        self._verifier = verifier

    def path(self, parts: tuple[str, ...]) -> str:
        """The absolute path of a layout path in the cache."""
        return os.path.join(self.root, *self._layout.root, *parts)

    def has(self, artifact_id: ArtifactId) -> bool:
        """Whether a copy of the object is cached here (a stat, not a verification)."""
        with open_project(self.root, self._layout, create=False) as project:
            return project is not None and project.objects.lstat(artifact_id) is not None

    def verified(
        self,
        card: ExperimentCardV1,
        client: BucketClient,
        key: str,
        in_flight: int,
        progress: Progress | None,
    ) -> tuple[datetime, bool]:
        """Prove the card's local copy intact, downloading it first if needed.

        Returns when it was proven and whether that took a hash just now.

        Raises:
            ObjectMissing: the bucket has no such object.
            IntegrityError: the bucket's bytes differ from the card (nothing is cached).
            StoreIOError: the bucket or the cache failed.
        """
        with open_project(self.root, self._layout, create=True) as project:
            assert project is not None
            try:
                return self._verifier.verify(project.objects, card, progress)
            except ObjectMissing:
                pass
            except IntegrityError:
                with project.locked():  # a damaged copy: aside, and fetch it again
                    project.objects.quarantine(card.typed_artifact_id)
            with project.staging() as tmp_fd, _fs.staged(tmp_fd, "object") as stage:
                digests = download(client, key, stage.fd, card.artifact.bytes, in_flight, progress)
                _check(card, digests)
                with project.locked():  # a concurrent resolve's copy is kept
                    self._verifier.adopt(
                        project.objects, tmp_fd, stage, card.typed_artifact_id, digests
                    )
            verified_at, _ = self._verifier.verify(project.objects, card, None)
            return verified_at, True


def _check(card: ExperimentCardV1, digests: Digests) -> None:
    if digests.size != card.artifact.bytes:
        raise IntegrityError("the bucket's artifact size differs from its card")
    if digests.sha256.hex() != card.artifact.sha256:
        raise IntegrityError("the bucket's artifact SHA-256 differs from its card")
    if hashlib.sha256(digests.manifest()).hexdigest() != card.chunk_manifest_sha256:
        raise IntegrityError("the artifact's chunk manifest differs from the one its card binds")


def download(
    client: BucketClient,
    key: str,
    fd: int | None,
    size: int,
    in_flight: int,
    progress: Progress | None,
    part_bytes: int = 2 * CHUNK_BYTES,
) -> Digests:
    """Fetch a key into `fd` (None: hash only) by ranged GETs (`in_flight` at once), in order.

    Every range names the version first seen (its ETag), so a key replaced meanwhile fails
    rather than mixing versions.

    Raises:
        ObjectMissing: the key does not exist.
        IntegrityError: its size is not `size`, or it changed during the download.
        StoreIOError: the bucket or the local file failed.
    """
    head = client.head(key)
    if head is None:
        raise ObjectMissing("the experiment's artifact is missing from the bucket")
    if head.size != size:
        raise IntegrityError("the bucket's artifact size differs from its card")
    if progress is not None:
        progress.start(size)
    hasher = ChunkHasher()
    spans = [(start, min(size, start + part_bytes)) for start in range(0, size, part_bytes)]
    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="artmem-get") as pool:
        pending: deque[Future[bytes]] = deque()
        for span in spans:
            pending.append(pool.submit(_fetch, client, key, span, head.etag))
            if len(pending) >= in_flight:
                _take(pending.popleft(), fd, hasher, progress)
        while pending:
            _take(pending.popleft(), fd, hasher, progress)
    return hasher.digests()


def _fetch(client: BucketClient, key: str, span: tuple[int, int], etag: str) -> bytes:
    try:
        data, _ = client.get_range(key, span[0], span[1], etag)
    except Conflict as exc:
        raise IntegrityError("the bucket's artifact changed while it was downloaded") from exc
    if len(data) != span[1] - span[0]:
        raise IntegrityError("the bucket's artifact is shorter than its card")
    return data


def _take(
    future: Future[bytes], fd: int | None, hasher: ChunkHasher, progress: Progress | None
) -> None:
    data = future.result()
    try:
        if fd is not None:
            _fs.write_all(fd, data)
    except OSError as exc:
        raise StoreIOError(f"cannot write the local copy: {exc.strerror}") from exc
    view = memoryview(data)
    for offset in range(0, len(data), CHUNK_BYTES):
        hasher.update(view[offset : offset + CHUNK_BYTES])
    if progress is not None:
        progress.advance(len(data))
