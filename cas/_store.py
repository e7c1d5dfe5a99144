"""`Store`: one project's store (record, resolve, locate, cards, usage, fsck), whatever holds it.

One class over any backend. A project's small keys (cards, manifests, audit lines, markers) go
through its `Room.keys`, the six-operation seam (`_backend`); cards are read, written and
decided on here, over the room's `cards` (`_cardfiles`): an update re-reads and decides again
when a conditional write lost (`retry_lost_writes`), which under the local commit lock never
happens. What only a backend knows is its `Objects` and their typed extensions (`_seam`):
`LocalObjects` (`_local_store`) or `BucketObjects` (`cas._bucket`); `ProjectStore` and
`BucketStore` only choose one. A `read_only` store (the notebook API) records nothing and
writes no card. This module imports no backend: naming `Store` costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from cards import parse_artifact_id, parse_experiment_id
from cards.errors import ArtifactTooLarge
from cas._room import Recording, Room, require_room, retry_lost_writes
from cas._seam import Copies, Objects, Summarised
from fsedge import utc_now

if TYPE_CHECKING:  # the card models and the rooms load with the first store
    from cards import (
        CardMetadata,
        ExperimentCardV1,
        ExperimentId,
        IndexState,
        IndexStatus,
        Limits,
        ProjectId,
    )
    from cas._card_log import LogMark
    from cas._cardfiles import CardChanges, CardRead, CardScan, CardStamp
    from cas._fsck import FsckReport
    from cas._hashing import Digests
    from cas._progress import Progress
    from cas._results import Committed, Located, Provenance, Recorded, Resolved, Usage
    from cas._verify import Clock, IntegrityMode, VerificationCache


class Store:
    """The content-addressed store of one project (see the module docstring)."""

    def __init__(
        self,
        objects: Callable[[Store], Objects],
        project_id: str,
        *,
        limits: Limits | None = None,
        integrity: IntegrityMode | None = None,
        initial_index_state: IndexState | None = None,
        clock: Clock = utc_now,
        cache: VerificationCache | None = None,
        require_owner: bool = True,
        read_only: bool = False,
    ) -> None:
        """Serve `project_id` over the backend `objects(store)` builds, with these settings.

        A `read_only` store (the notebook API) records nothing and writes no card.
        """
        from cards import IndexState, parse_project_id
        from cards.policy import DEFAULT_LIMITS
        from cas._layout import ProjectLayout
        from cas._verify import PROCESS_CACHE, IntegrityMode, Verifier

        self.layout = ProjectLayout.for_project(parse_project_id(project_id))
        self.limits = limits or DEFAULT_LIMITS
        self.integrity = integrity or IntegrityMode.CACHED
        self.require_owner = require_owner
        self.read_only = read_only
        self.initial_index_state = initial_index_state or IndexState.DISABLED
        self.clock = clock
        self.verifier = Verifier(self.layout.key, self.integrity, cache or PROCESS_CACHE, clock)
        self.objects = objects(self)

    @property
    def project_id(self) -> ProjectId:
        """The project this store serves."""
        return self.layout.project_id

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute local path of `parts` (a layout path) for this project."""
        return self.objects.local_path(parts)

    def cards_version(self) -> str | None:
        """A token that changes whenever a card changes; None: unknown, look at the cards."""
        with self._opened(create=False) as room:
            return None if room is None else room.cards.version()

    def _opened(self, *, create: bool) -> AbstractContextManager[Room | None]:
        """The project open for one call; None when it has recorded nothing (not `create`)."""
        return self.objects.opened(create=create)

    # -- record -----------------------------------------------------------------------------

    def record(
        self,
        rlm_root: str,
        provenance: Provenance,
        metadata: CardMetadata,
        source_path: str,
        progress: Progress | None = None,
    ) -> Recorded:
        """Store a kernel export's bytes and commit its card.

        Raises:
            InvalidInput: metadata exceeds the configured bounds.
            PathRejected: the source is outside the caller's exports, a symlink, not a regular
                file, hard-linked or foreign-owned (subclasses say which).
            SourceMissing: the source does not exist.
            SourceChanged: the source changed while it was read.
            ArtifactTooLarge: the source exceeds the per-artifact limit.
            QuotaExceeded: the project's byte or card quota would be exceeded.
            IntegrityError: other bytes took the content address meanwhile (a bucket).
            BackendUnsupported: the service lacks a conditional write the record needs.
            StoreIOError: the store could not be written, is open read-only, or the card kept
                changing under other writers (retryable).
        """
        from cas._ingest import open_export  # record-only rooms load with the first record
        from cas._results import check_writable

        check_writable(self.read_only)
        metadata.check(self.limits)
        with open_export(
            rlm_root, provenance.session_id, source_path, require_owner=self.require_owner
        ) as src:
            if src.size > self.limits.artifact_bytes:  # before the project is even created
                limit = self.limits.artifact_bytes
                raise ArtifactTooLarge(
                    f"the artifact is larger than the {limit}-byte limit", limit=limit
                )
            return self.objects.record(Recording(src, provenance, metadata, progress))

    def experiment_of(self, digests: Digests, metadata: CardMetadata) -> ExperimentId:
        """The experiment these bytes and this metadata name in this project."""
        from cards import QueryFingerprint, artifact_id_for_digest, experiment_id

        artifact_id = artifact_id_for_digest(digests.sha256)
        fingerprint = QueryFingerprint(metadata.query_fingerprint)
        return experiment_id(self.project_id, artifact_id, fingerprint, metadata.source_version)

    def commit(
        self,
        room: Room,
        recording: Committed,
        place: Callable[[], tuple[bool, bool]],
        seen: tuple[ExperimentCardV1 | None, str | None] | None = None,
    ) -> Recorded:
        """Commit a record's card once `place()` has stored its bytes, or found them stored.

        Under the room's commit lock (a bucket has none): the card as it is now decides, a new
        one must fit the card quota, `place()` says whether the bytes were stored already and
        whether a corrupt copy was healed, and the card is written. A conditional write that
        lost (a bucket) reads the card and decides again; under the local lock it never loses.
        `seen` is the card and its version as read just before, where card writes are
        conditional (a stale read only loses its condition); else it is read here.

        Raises:
            QuotaExceeded: a new card would exceed the card quota (or `place` the byte quota).
            StoreIOError: the card could not be written, or kept changing (retryable).
        """
        from cards import artifact_id_for_digest
        from cards.policy import check_card_quota
        from cas._results import Committing, commit_card

        digests, metadata, measured, provenance = recording
        exp_id = self.experiment_of(digests, metadata)
        with room.locked():
            first = seen or room.cards.find_versioned(exp_id)
            if first[0] is None:
                check_card_quota(room.cards.count(), self.limits)
            present, healed = place()
            commit = Committing(
                exp_id, self.project_id, artifact_id_for_digest(digests.sha256), digests,
                provenance, self.initial_index_state, present, healed,
            )  # fmt: skip

            reads = iter((first,))  # a write that lost reads the card again

            def attempt() -> Recorded | None:
                existing, version = next(reads, None) or room.cards.find_versioned(exp_id)
                completed, warnings = measured.complete(metadata, existing, self.limits)
                return commit_card(
                    commit, existing, completed, warnings, self.clock(),
                    lambda card: room.cards.write(card, version),
                )  # fmt: skip

            return retry_lost_writes(attempt)

    # -- resolve ----------------------------------------------------------------------------

    def resolve(
        self,
        experiment_id: str,
        current_source_version: str | None = None,
        progress: Progress | None = None,
    ) -> Resolved:
        """Prove an experiment's bytes intact and hand out a local path to them.

        Raises:
            InvalidId: `experiment_id` is malformed.
            InvalidInput: `current_source_version` is malformed.
            ExperimentNotFound: the project has no such card.
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
            ObjectMissing: the card's object is not in the store.
            IntegrityError: the object's size or SHA-256 differs from the card.
            StoreIOError: the store failed.
        """
        from cas._results import check_version, make_resolved

        exp_id = parse_experiment_id(experiment_id)
        check_version(current_source_version)
        with self._opened(create=False) as room:
            card = require_room(room).cards.read(exp_id)
            verified_at, hashed = self.objects.verified(require_room(room), card, progress)
        return make_resolved(card, self._paths(card), current_source_version, verified_at, hashed)

    def locate(self, experiment_id: str, current_source_version: str | None = None) -> Located:
        """A card, its freshness, and its bytes as a slice reads them (chunk by chunk, verified).

        Nothing is hashed whole: the manifest is proven to be the card's, and a slice proves
        each chunk it reads (from the local file, or by ranged reads of a bucket's object).

        Raises:
            InvalidId, InvalidInput, ExperimentNotFound, CardInvalid: see `resolve`.
            ObjectMissing: the card's object is not in the store.
            IntegrityError: the chunk manifest is missing or not the card's.
            StoreIOError: the store failed.
        """
        from cas._results import check_version, make_located

        exp_id = parse_experiment_id(experiment_id)
        check_version(current_source_version)
        with self._opened(create=False) as room:
            card = require_room(room).cards.read(exp_id)
            remote = self.objects.remote(require_room(room), card)
        return make_located(card, self._paths(card), current_source_version, remote)

    def _paths(self, card: ExperimentCardV1) -> tuple[str, str]:
        """The local paths of the card's object and chunk manifest."""
        artifact_id = card.typed_artifact_id
        object_path = self.layout.object_path(artifact_id)
        return self.local_path(object_path), self.local_path(self.layout.chunks_path(artifact_id))

    # -- cards ------------------------------------------------------------------------------

    def load_card(self, experiment_id: str) -> ExperimentCardV1:
        """Read and validate one card of this project.

        Raises:
            InvalidId: `experiment_id` is malformed.
            ExperimentNotFound: there is no such card.
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
        """
        exp_id = parse_experiment_id(experiment_id)
        with self._opened(create=False) as room:
            return require_room(room).cards.read(exp_id)

    def load_cards(self, experiment_ids: Sequence[str]) -> list[ExperimentCardV1 | None]:
        """Read and validate several cards, opening the project once (a search's hits).

        None for a card that is absent or unusable.

        Raises:
            InvalidId: an id is malformed.
        """
        exp_ids = [parse_experiment_id(experiment_id) for experiment_id in experiment_ids]
        with self._opened(create=False) as room:
            return [None] * len(exp_ids) if room is None else room.cards.read_many(exp_ids)

    def scan_cards(self) -> CardScan:
        """Read every card; malformed, unsupported or misplaced ones are skipped and counted."""
        from cas._cardfiles import CardScan

        return CardScan.of(self.read_cards())

    def read_cards(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card, in name order; cards whose stamp equals `unchanged[name]` are not read."""
        with self._opened(create=False) as room:
            if room is not None:
                yield from room.cards.scan(unchanged)

    def read_changed_cards(
        self, since: LogMark | None, known: Mapping[str, CardStamp]
    ) -> CardChanges:
        """The cards changed since the card log mark `since` (see `CardFiles.changes`).

        None for `since` (or a log that cannot say, or a bucket, which keeps none) reads every
        card as `read_cards(known)` does; the result carries the mark to pass next time.
        """
        from cas._cardfiles import CardChanges

        with self._opened(create=False) as room:
            if room is None:
                return CardChanges.scanned((), None)
            return room.cards.changes(since, known)

    def update_index_status(
        self, experiment_id: str, decide: Callable[[ExperimentCardV1], IndexStatus | None]
    ) -> ExperimentCardV1:
        """Replace a card's index status with `decide(card)`, deciding on the current card.

        `decide` sees the card as it is now and returns None to leave it unchanged: under the
        local commit lock no re-record slips in between; on a bucket a write that lost its
        condition reads and decides again. This is the indexer's only write to cards.

        Raises:
            ExperimentNotFound: there is no such card.
            CardInvalid: the stored card is invalid.
            BackendUnsupported: the bucket's service has no working conditional replace.
            StoreIOError: the card could not be written, or kept changing (retryable).
        """
        from cards.build import with_index
        from cas._results import check_writable

        exp_id = parse_experiment_id(experiment_id)
        check_writable(self.read_only)
        with self._opened(create=False) as opened:
            room = require_room(opened)

            def attempt() -> ExperimentCardV1 | None:
                with room.locked():
                    card, version = room.cards.read_versioned(exp_id)
                    status = decide(card)
                    if status is None or status == card.index:
                        return card
                    updated = with_index(card, status)
                    return updated if room.cards.write(updated, version) else None

            return retry_lost_writes(attempt)

    def check(self, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
        """Verify every object and card, find leftovers; with `repair`, fix what is safe.

        Raises:
            StoreIOError: the store failed.
        """
        from cas._fsck import FsckReport, check_project

        with self._opened(create=False) as room:
            if room is None:
                return FsckReport()
            checking = self.objects.checking(room)
            return check_project(checking, self.project_id, repair=repair, progress=progress)

    def has_object(self, artifact_id: str) -> bool:
        """Whether the object's name is stored, or a copy kept here (a stat, not a proof)."""
        aid = parse_artifact_id(artifact_id)
        if isinstance(self.objects, Copies) and self.objects.has_copy(aid):
            return True
        with self._opened(create=False) as room:
            key = "/".join(self.layout.object_path(aid))
            return room is not None and room.keys.stat(key) is not None

    def usage(self) -> Usage:
        """Committed objects, their bytes, and cards of this project."""
        from cas._layout import stored_objects
        from cas._results import Usage

        with self._opened(create=False) as room:
            if room is None:
                return Usage(objects=0, bytes=0, cards=0)
            if isinstance(self.objects, Summarised):
                objects, total = self.objects.stored(room)
            else:
                objects, total = stored_objects(room.keys)
            return Usage(objects=objects, bytes=total, cards=room.cards.count())
