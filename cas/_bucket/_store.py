"""`BucketStore`: one project's store in an S3-compatible bucket, shared by many hosts.

The same guarantees as `ProjectStore`, in object-storage terms (DESIGN.md §9):

- record hashes the export in place first (no copy), so the content address is known before
  anything is sent; the media type and table facts are read from it through those chunk
  digests. Then the manifest and the object are published by conditional creates (`_publish`:
  nothing is sent for stored bytes, else the export is read a second time and sent as a
  multipart upload on the final key, every chunk checked against the first pass before it
  goes, invisible until completed with `If-None-Match: *`), and the card written with a
  conditional create or an `If-Match` replace (`_cards`), re-deciding on a lost condition. A
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

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from cards import (
    ArtifactId,
    CardMetadata,
    ExperimentCardV1,
    ExperimentId,
    IndexState,
    IndexStatus,
    Limits,
    ProjectId,
    QueryFingerprint,
    artifact_id_for_digest,
    experiment_id,
    parse_artifact_id,
    parse_experiment_id,
    parse_project_id,
)
from cards.build import card_changes, record_warnings, revised_card, with_index
from cards.errors import ArtifactTooLarge, CardInvalid, ExperimentNotFound
from cards.policy import DEFAULT_LIMITS, check_byte_quota, check_card_quota
from cas._bucket._backend import BucketBackend
from cas._bucket._cache import LocalCopies
from cas._bucket._cards import BucketCards, retried
from cas._bucket._client import BucketClient
from cas._bucket._hasher import hash_for_upload
from cas._bucket._keys import BucketKeys
from cas._bucket._probe import Capabilities, known
from cas._bucket._publish import Proofs, Publisher
from cas._bucket._ranged import pinned
from cas._bucket._settings import BucketSettings
from cas._cardfiles import CardChanges, CardRead, CardScan, CardStamp
from cas._hashing import Digests, hash_export
from cas._layout import ProjectLayout
from cas._progress import Progress
from cas._results import (
    Located,
    Provenance,
    Recorded,
    Resolved,
    Usage,
    check_version,
    check_writable,
    first_card,
    located,
    resolved,
)
from cas._verify import PROCESS_CACHE, Clock, IntegrityMode, VerificationCache, Verifier

if TYPE_CHECKING:
    from cas._card_log import LogMark
    from cas._fsck import FsckReport


class BucketStore:
    """The content-addressed store of one project in a bucket, with a verified local cache."""

    def __init__(
        self,
        settings: BucketSettings,
        project_id: str,
        *,
        limits: Limits = DEFAULT_LIMITS,
        integrity: IntegrityMode = IntegrityMode.CACHED,
        initial_index_state: IndexState = IndexState.DISABLED,
        clock: Clock | None = None,
        cache: VerificationCache = PROCESS_CACHE,
        require_owner: bool = True,
        read_only: bool = False,
    ) -> None:
        from cas._store import utc_now

        self.settings = settings
        self.layout = ProjectLayout.for_project(parse_project_id(project_id))
        self.limits = limits
        self.integrity = integrity
        self.require_owner = require_owner
        self.read_only = read_only  # records nothing, writes no card (the notebook API)
        self._initial_index_state = initial_index_state
        self._clock = clock or utc_now
        self._verifier = Verifier(self.layout.key, integrity, cache, self._clock)
        self.keys = BucketKeys(self.layout, settings.prefix)
        self.copies = LocalCopies(settings.cache_root, self.layout, self._verifier)
        self._client: BucketClient | None = None
        self._client_lock = threading.Lock()

    @property
    def project_id(self) -> ProjectId:
        """The project this store serves."""
        return self.layout.project_id

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
    def _cards(self) -> BucketCards:
        return BucketCards(self.client, self.keys, self._capabilities)

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
            trusted=self.integrity is not IntegrityMode.ALWAYS,
        )  # fmt: skip
        return Publisher(
            self.client, self.keys, self.capabilities(), proofs,
            part_bytes=self.settings.part_bytes, in_flight=in_flight,
        )  # fmt: skip

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute path of `parts` (a layout path) in this project's local cache."""
        return self.copies.path(tuple(parts))

    # -- record -----------------------------------------------------------------------------

    def record(
        self,
        rlm_root: str,
        provenance: Provenance,
        metadata: CardMetadata,
        source_path: str,
        progress: Progress | None = None,
    ) -> Recorded:
        """Upload a kernel export and commit its card (see the module docstring).

        Raises:
            InvalidInput, PathRejected, SourceMissing, SourceChanged, ArtifactTooLarge,
                QuotaExceeded: as `ProjectStore.record`.
            IntegrityError: other bytes hold the content address in the bucket.
            StoreIOError: the bucket or the local cache failed, or the card kept changing
                under other writers (retryable).
        """
        from cas._ingest import open_export

        check_writable(self.read_only)
        metadata.check(self.limits)
        limit = self.limits.artifact_bytes
        with open_export(
            rlm_root, provenance.session_id, source_path, require_owner=self.require_owner
        ) as src:
            if src.size > limit:
                raise ArtifactTooLarge(
                    f"the artifact is larger than the {limit}-byte limit", limit=limit
                )
            if progress is not None:
                progress.start(2 * src.size)  # hashed in place, then sent
            digests: Digests
            if self.settings.part_checksums:
                digests = hash_for_upload(src.fd, src.size, self.settings.part_bytes, progress)
            else:
                digests = hash_export(src.fd, src.size, progress)
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
        from cas._record import CORRUPT_REPLACED
        from cas._sniff import detect
        from cas.slicing import _footer

        artifact_id = artifact_id_for_digest(digests.sha256)
        metadata = detect(source_fd, digests.size, name, metadata)
        exp_id = self._experiment_id(artifact_id, metadata)
        seen, _ = self._cards.find(exp_id)
        # Read through the first pass's chunk digests: a changed source gives no facts.
        measured = _footer.measure(source_fd, digests.manifest(), metadata, seen)
        if seen is None:
            check_card_quota(self._cards.count(), self.limits)
        publisher = self.publisher()
        head = self.client.head(self.keys.object(artifact_id))
        checked = publisher.proofs.check(head, artifact_id, digests)
        present, healed = bool(checked), False
        if not present:
            replaced = head.size if checked is False and head is not None else 0
            check_byte_quota(self._stored()[1] - replaced, digests.size, self.limits)
            present, healed = publisher.publish(
                artifact_id, digests, source_fd, progress, present=checked
            )

        def attempt() -> Recorded | None:
            existing, etag = self._cards.find(exp_id)
            completed, table_warnings = measured.complete(metadata, existing, self.limits)
            now = self._clock()
            if existing is None:
                card = first_card(
                    exp_id, self.project_id, artifact_id, digests, completed, provenance,
                    self._initial_index_state, now,
                )  # fmt: skip
            else:
                card = revised_card(existing, completed, now)
            if card is not existing and not self._cards.write(card, etag):
                return None
            warnings = (*record_warnings(card, deduplicated=present), *table_warnings)
            return Recorded(
                card=card,
                deduplicated=present,
                card_created=existing is None,
                card_updated=existing is not None and card is not existing,
                changed=() if existing is None else card_changes(existing, card),
                warnings=(*warnings, CORRUPT_REPLACED) if healed else warnings,
            )

        return retried(attempt)

    def _experiment_id(self, artifact_id: ArtifactId, metadata: CardMetadata) -> ExperimentId:
        return experiment_id(
            self.project_id,
            artifact_id,
            QueryFingerprint(metadata.query_fingerprint),
            metadata.source_version,
        )

    # -- resolve ----------------------------------------------------------------------------

    def resolve(
        self,
        experiment_id: str,
        current_source_version: str | None = None,
        progress: Progress | None = None,
    ) -> Resolved:
        """Prove an experiment's bytes intact and hand out the path of a verified local copy.

        Raises:
            InvalidId, InvalidInput, ExperimentNotFound, CardInvalid: as `ProjectStore.resolve`.
            ObjectMissing: the card's object is in neither the bucket nor the cache.
            IntegrityError: the bucket's (or the cache's) bytes differ from the card.
            StoreIOError: the bucket or the cache failed.
        """
        exp_id = parse_experiment_id(experiment_id)
        check_version(current_source_version)
        card, _ = self._cards.read(exp_id)
        verified_at, hashed = self._verified(card, progress)
        return resolved(card, self._paths(card), current_source_version, verified_at, hashed)

    def locate(self, experiment_id: str, current_source_version: str | None = None) -> Located:
        """A card, its freshness, and its bytes as a slice reads them (chunk by chunk, verified).

        Nothing is hashed whole, as locally. A verified local copy (left by a resolve on this
        host) is read from disk; otherwise the slice fetches only the chunks it touches from
        the bucket, pinned to the version located here (`_ranged`).

        Raises:
            InvalidId, InvalidInput, ExperimentNotFound, CardInvalid: see `resolve`.
            ObjectMissing: the card's object is in neither the bucket nor the cache.
            IntegrityError: the bucket's size or chunk manifest differs from the card's.
            StoreIOError: the bucket failed.
        """
        exp_id = parse_experiment_id(experiment_id)
        check_version(current_source_version)
        card, _ = self._cards.read(exp_id)
        if self.copies.has(card.typed_artifact_id):
            return located(card, self._paths(card), current_source_version)
        remote = pinned(self.client, self.keys, card)
        return located(card, self._paths(card), current_source_version, remote)

    def _verified(self, card: ExperimentCardV1, progress: Progress | None) -> tuple[datetime, bool]:
        key = self.keys.object(card.typed_artifact_id)
        return self.copies.verified(
            card, self.client, key, max(2, self.settings.max_in_flight), progress
        )

    def _paths(self, card: ExperimentCardV1) -> tuple[str, str]:
        """The local paths of the card's object and chunk manifest."""
        artifact_id = card.typed_artifact_id
        object_path = self.layout.object_path(artifact_id)
        return self.local_path(object_path), self.local_path(self.layout.chunks_path(artifact_id))

    # -- cards ------------------------------------------------------------------------------

    def load_card(self, experiment_id: str) -> ExperimentCardV1:
        """Read and validate one card of this project.

        Raises:
            InvalidId, ExperimentNotFound, CardInvalid: as `ProjectStore.load_card`.
        """
        return self._cards.read(parse_experiment_id(experiment_id))[0]

    def load_cards(self, experiment_ids: Sequence[str]) -> list[ExperimentCardV1 | None]:
        """Read and validate several cards (one GET each); None for an absent or unusable one.

        Raises:
            InvalidId: an id is malformed.
        """
        exp_ids = [parse_experiment_id(experiment_id) for experiment_id in experiment_ids]
        return [self._usable(exp_id) for exp_id in exp_ids]

    def _usable(self, exp_id: ExperimentId) -> ExperimentCardV1 | None:
        try:
            return self._cards.read(exp_id)[0]
        except (ExperimentNotFound, CardInvalid):
            return None

    def scan_cards(self) -> CardScan:
        """Read every card; malformed, unsupported or misplaced ones are skipped and counted."""
        return CardScan.of(self.read_cards())

    def read_cards(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card, in name order, stamped (size, ETag) from one listing."""
        yield from self._cards.scan(unchanged)

    def cards_version(self) -> str | None:
        """None: a bucket gives no cheap token for "the cards changed"; callers list instead."""
        return None

    def update_index_status(
        self, experiment_id: str, decide: Callable[[ExperimentCardV1], IndexStatus | None]
    ) -> ExperimentCardV1:
        """Replace a card's index status with `decide(card)`, by `If-Match` on the version read.

        A concurrent writer makes the write lose; the card is read and decided again.

        Raises:
            ExperimentNotFound, CardInvalid: as `ProjectStore.update_index_status`.
            StoreIOError: the card could not be written, or kept changing (retryable).
        """
        exp_id = parse_experiment_id(experiment_id)
        check_writable(self.read_only)
        cards = self._cards

        def attempt() -> ExperimentCardV1 | None:
            card, etag = cards.read(exp_id)
            status = decide(card)
            if status is None or status == card.index:
                return card
            updated = with_index(card, status)
            return updated if cards.write(updated, etag) else None

        return retried(attempt)

    def set_index_status(self, experiment_id: str, status: IndexStatus) -> ExperimentCardV1:
        """Replace a card's index status (see `update_index_status`)."""
        return self.update_index_status(experiment_id, lambda card: status)

    def has_object(self, artifact_id: str) -> bool:
        """Whether the object is cached here or its key exists in the bucket (not a proof)."""
        aid = parse_artifact_id(artifact_id)
        if self.copies.has(aid):
            return True
        return self.client.head(self.keys.object(aid)) is not None

    def check(self, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
        """Hash every object, check every card, find leftovers (`cas.fsck`).

        Raises:
            StoreIOError: the bucket failed.
        """
        from cas._bucket._fsck import fsck_bucket

        return fsck_bucket(self, repair=repair, progress=progress)

    def read_changed_cards(
        self, since: LogMark | None, known: Mapping[str, CardStamp]
    ) -> CardChanges:
        """Every card, stamped (size, ETag): a bucket keeps no card log, so one listing says."""
        return CardChanges.scanned(self.read_cards(known), None)

    def usage(self) -> Usage:
        """Committed objects, their bytes, and cards of this project, from listings."""
        objects, total = self._stored()
        return Usage(objects=objects, bytes=total, cards=self._cards.count())

    def _stored(self) -> tuple[int, int]:
        """How many objects the bucket holds for this project, and their bytes (one listing)."""
        objects = total = 0
        for head in self.client.listing(self.keys.objects):
            if self.keys.object_of(head.key) is not None:
                objects += 1
                total += head.size
        return objects, total
