"""`BucketStore`: the one `Store` over an S3-compatible bucket, shared by many hosts.

The same guarantees as `ProjectStore`, in object-storage terms:

- record hashes the export in place first (no copy), so the content address is known before
  anything is sent; the media type and table facts are read from it through those chunk
  digests. Then the manifest and the object are published by conditional creates (`_publish`:
  nothing is sent for bytes proven stored, a corrupt stored copy is healed, else the export is
  read a second time and sent as a multipart upload on the final key, every part proven
  against the first pass before it goes, invisible until completed with `If-None-Match: *`, or
  under a claim where the service ignores that), and the card written with a conditional
  create or an `If-Match` replace (`cas._cardfiles`, through the seam), in the forms the service was
  found to accept (`_probe`), re-deciding on a lost condition (`Store`). A
  source that changes between the passes fails the record (`SourceChanged`) and nothing
  becomes visible. Nothing is written locally: keeping a cached copy of what was sent
  measured slower (its dirty pages compete with the upload); a resolve on this host downloads
  it, and a slice reads only the chunks it needs.
- resolve and locate hand out a local copy under `<state_root>/bucket-cache/` proven against the
  card (downloaded by ranged GETs while hashing, or trusted by a verification record of its exact
  identity, as locally). A slice reads such a copy's chunks, verified against the manifest, as
  locally; on a host with no copy it fetches only the chunks it touches (`_ranged`).

Quota bound: usage is counted from a listing at commit time, before the object is published.
Hosts committing at the same moment each see the others' objects only once published, so
committed usage can exceed a quota by at most (concurrent committers - 1) artifacts (each at
most `artifact_bytes`) and as many cards; one host alone never overshoots. Nothing is sent
before the check; incomplete uploads of records in flight (or crashed) occupy the bucket
until completed or aborted: at most the sum of those objects.

No lock spans hosts: every write is a conditional create or replace, so concurrent records of
the same bytes converge on one object and one card, and nothing is ever overwritten blindly.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple, Unpack

from cards import (
    ArtifactId,
    ExperimentCardV1,
    artifact_id_for_digest,
)
from cards.errors import IntegrityError, ObjectMissing
from cards.policy import check_byte_quota
from cas._backend import Entry
from cas._bucket._backend import BucketBackend
from cas._bucket._cache import LocalCopies, download
from cas._bucket._client import BucketClient
from cas._bucket._keys import BucketKeys
from cas._bucket._probe import Capabilities, known
from cas._bucket._proofs import Proofs
from cas._bucket._publish import Publisher, quarantine
from cas._bucket._ranged import pin_object
from cas._bucket._settings import BucketSettings
from cas._cardfiles import CardReads
from cas._hashing import Digests, hash_export
from cas._layout import stored_objects
from cas._progress import Progress
from cas._results import Committed, Provenance, Recorded
from cas._room import Options, Recording, Room
from cas._store import Store
from cas._verify import IntegrityMode

if TYPE_CHECKING:
    from cards import CardMetadata
    from cas._fsck import FsckRoom, Leftover
    from cas.slicing import RemoteBytes


class BucketRoom(NamedTuple):
    """A bucket project, open for a call: its keys and cards; no lock (writes are conditional)."""

    keys: BucketBackend
    cards: CardReads

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """No lock spans hosts: a write that lost its condition is decided again."""
        return contextlib.nullcontext()


class BucketStore(Store):
    """The one `Store` over a project in a bucket, with a verified local cache."""

    objects: BucketObjects

    def __init__(
        self, settings: BucketSettings, project_id: str, **options: Unpack[Options]
    ) -> None:
        """Serve `project_id` in `settings`' bucket; `options` as `Store`'s."""
        super().__init__(functools.partial(BucketObjects, settings), project_id, **options)

    def capabilities(self, *, refresh: bool = False) -> Capabilities:
        """What the bucket's service does (`BucketObjects.capabilities`; `artmem status`)."""
        return self.objects.capabilities(refresh=refresh)


class BucketObjects:
    """A project's objects in a bucket, and its local cache (`Objects`)."""

    def __init__(self, settings: BucketSettings, store: Store) -> None:
        self._store = store
        self._layout = store.layout
        self.settings = settings
        self.keys = BucketKeys(store.layout, settings.prefix)
        self.copies = LocalCopies(settings.cache_root, store.layout, store.verifier)
        self._client: BucketClient | None = None
        self._client_lock = threading.Lock()

    @property
    def client(self) -> BucketClient:
        """The bucket client, built (and the SDK loaded) on first use."""
        with self._client_lock:
            if self._client is None:
                self._client = BucketClient(self.settings)
            return self._client

    @property
    def backend(self) -> BucketBackend:
        """This project's keys in the bucket, through the storage seam (`cas._backend`)."""
        return BucketBackend(self.client, self.keys.root, self._capabilities)

    @property
    def cards(self) -> CardReads:
        """This project's card objects."""
        return CardReads(self.backend, self._layout)

    def capabilities(self, *, refresh: bool = False) -> Capabilities:
        """What the bucket's service does (`_probe`): remembered, or probed on first use.

        Raises:
            StoreIOError: the bucket failed.
        """
        return known(
            self.client, self.settings.cache_root, self.settings.endpoint_url, self.keys.tmp,
            refresh=refresh,
        )  # fmt: skip

    def _capabilities(self, refresh: bool) -> Capabilities:
        return self.capabilities(refresh=refresh)

    def publisher(self) -> Publisher:
        """Publishes objects into this project, as the service's capabilities allow."""
        in_flight = self.settings.max_in_flight
        proofs = Proofs(
            self.client, self.copies.path(("proofs",)), max(2, in_flight),
            trusted=self._store.integrity is not IntegrityMode.ALWAYS,
        )  # fmt: skip
        return Publisher(
            self.client, self.keys, self.capabilities(), proofs,
            part_bytes=self.settings.part_bytes, in_flight=in_flight,
        )  # fmt: skip

    def has_copy(self, artifact_id: ArtifactId) -> bool:
        """Whether a copy is cached here (`Copies`: `has_object` then sends no request)."""
        return self.copies.has(artifact_id)

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute path of `parts` (a layout path) in this project's local cache."""
        return self.copies.path(tuple(parts))

    @contextlib.contextmanager
    def opened(self, *, create: bool) -> Iterator[Room | None]:
        """The bucket's project (it always exists: nothing to create)."""
        backend = self.backend
        yield BucketRoom(backend, CardReads(backend, self._layout))

    # -- record -----------------------------------------------------------------------------

    def record(self, job: Recording) -> Recorded:
        """Hash the export in place, publish what is not stored, commit the card.

        Raises:
            IntegrityError: other bytes took the content address meanwhile.
            BackendUnsupported: the service lacks a conditional write the record needs.
            StoreIOError: the bucket or the local cache failed, or the card kept changing
                under other writers (retryable).
        """
        src, provenance, metadata, progress = job
        if progress is not None:
            progress.start(2 * src.size)  # hashed in place, then sent
        part_bytes = self.settings.part_bytes if self.settings.part_checksums else 0
        digests = hash_export(src.fd, src.size, progress, part_bytes=part_bytes)
        src.check_unchanged(digests.size)
        recorded = self._commit(src.fd, digests, metadata, src.name, provenance, progress)
        if progress is not None and recorded.deduplicated:
            progress.advance(digests.size)  # nothing was sent
        return recorded

    def _commit(
        self,
        source_fd: int,
        digests: Digests,
        metadata: CardMetadata,
        name: str,
        provenance: Provenance,
        progress: Progress | None = None,
    ) -> Recorded:
        from cas._sniff import detect
        from cas.slicing import measure

        store = self._store
        artifact_id = artifact_id_for_digest(digests.sha256)
        metadata = detect(source_fd, digests.size, name, metadata)
        seen = self.cards.find_versioned(store.experiment_of(digests, metadata))
        # Read through the first pass's chunk digests: a changed source gives no facts.
        measured = measure(source_fd, digests.manifest(), metadata, seen[0])
        publisher = self.publisher()

        def place() -> tuple[bool, bool]:
            head = self.client.head(self.keys.object(artifact_id))
            checked = publisher.proofs.check(head, artifact_id, digests)
            if checked:
                return True, False
            replaced = head.size if checked is False and head is not None else 0
            used = stored_objects(self.backend)[1] - replaced
            check_byte_quota(used, digests.size, store.limits)
            return publisher.publish(artifact_id, digests, source_fd, progress, checked=checked)

        room = BucketRoom(self.backend, self.cards)
        committed = Committed(digests, metadata, measured, provenance)
        recorded = store.commit(room, committed, place, seen)  # its card writes are conditional
        if self.client.head(self.keys.object(artifact_id)) is None:
            # `artmem gc` deleted the object while this record adopted it (`cas._bucket._gc`):
            # now that a card names it, send it again (nothing is lost either way).
            publisher.publish(artifact_id, digests, source_fd, progress, checked=None)
        return recorded

    # -- objects ----------------------------------------------------------------------------

    def verified(
        self, room: Room, card: ExperimentCardV1, progress: Progress | None
    ) -> tuple[datetime, bool]:
        """A verified local copy, downloaded by ranged GETs while hashed if needed (`_cache`)."""
        key = self.keys.object(card.typed_artifact_id)
        return self.copies.verified(
            card, self.client, key, max(2, self.settings.max_in_flight), progress
        )

    def remote(self, room: Room, card: ExperimentCardV1) -> RemoteBytes | None:
        """A verified local copy (left by a resolve) is read from disk; else ranged GETs."""
        if self.copies.has(card.typed_artifact_id):
            return None
        return pin_object(self.client, self.keys, card)

    def adopt(self, artifact_id: ArtifactId, digests: Digests, source_fd: int) -> bool:
        """Publish the bytes as a record does (`Publisher`), unless they are proven stored."""
        present, _ = self.publisher().publish(artifact_id, digests, source_fd)
        return present

    def checking(self, room: Room) -> FsckRoom:
        """Ranged GETs, stage ages, incomplete uploads (`_BucketCheck`)."""
        return _BucketCheck(self)


class _BucketCheck:
    """What `fsck` asks of a bucket project: ranged GETs, stage ages, incomplete uploads."""

    def __init__(self, objects: BucketObjects) -> None:
        self._client, self._keys = objects.client, objects.keys
        self.backend = objects.backend
        stale_after = timedelta(seconds=objects.settings.stale_after_s)
        self._older_than = datetime.now(UTC) - stale_after

    def digests(self, entry: Entry, progress: Progress | None) -> Digests | None:
        """The object hashed as read back (one version); None when it is gone or changed."""
        try:
            got = download(self._client, self._keys.root + entry.key, None, entry.size, 2, None)
        except (ObjectMissing, IntegrityError):
            return None
        if progress is not None:
            progress.advance(entry.size)
        return got

    def stale(self, entry: Entry) -> bool:
        """Whether a staging key is older than `stale_after_s`."""
        return entry.modified <= self._older_than.timestamp()

    def leftovers(self) -> Iterator[Leftover]:
        """The project's incomplete multipart uploads."""
        for upload in self._client.uploads(self._keys.root):
            name = "upload:" + upload.key.removeprefix(self._keys.root)
            abort = functools.partial(self._client.abort, upload.key, upload.upload_id)
            yield name, upload.initiated <= self._older_than, abort

    def quarantine(self, artifact_id: ArtifactId) -> None:
        """Copy the object into `quarantine/`, then remove it from its address."""
        quarantine(self._client, self._keys, artifact_id)
