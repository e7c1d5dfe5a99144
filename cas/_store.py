"""One project's store: record, resolve and locate, over the project's rooms and lock.

The rooms: `_objects` (object files), `_cardfiles` (card files), `_hashing` (the digests),
`_ingest` (opening a kernel's export safely), `_record` (the commit protocol of a record,
deduplication and quotas), `_sniff` (the media type), `_verify` (proofs of intactness and their
records), `_fs` (the filesystem edge). This module only orchestrates them. The record-only rooms
load with the first record, so a reader never imports them. A `read_only` store (the notebook
API) writes nothing at all: not even a verification record.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cards import (
    ArtifactId,
    IndexState,
    Limits,
    ProjectId,
    parse_artifact_id,
    parse_experiment_id,
    parse_project_id,
)
from cards.errors import (
    ArtifactTooLarge,
    InvalidInput,
    ObjectMissing,
)
from cards.policy import DEFAULT_LIMITS
from cas._cardfiles import CardChanges, CardRead, CardScan, CardStamp
from cas._layout import ProjectLayout
from cas._objects import ObjectStore
from cas._progress import Progress
from cas._project import Project, open_project, recorded
from cas._results import (
    Located,
    Provenance,
    Recorded,
    Resolved,
    Usage,
    check_version,
    check_writable,
    located,
    resolved,
)
from cas._verify import PROCESS_CACHE, Clock, IntegrityMode, VerificationCache, Verifier

if TYPE_CHECKING:  # the card models load with the first card read or written
    from cards import CardMetadata, ExperimentCardV1, IndexStatus
    from cas._card_log import LogMark
    from cas._fsck import FsckReport


# A cards directory changed less than this long ago has no trustworthy version yet (it exceeds
# the coarse clock tick that stamps directory mtimes, with room for a clock step).
RACY_NS = 2_000_000_000


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class ProjectStore:
    """The content-addressed store of one project below the configured artifact root."""

    def __init__(
        self,
        artifact_root: str,
        project_id: str,
        *,
        limits: Limits = DEFAULT_LIMITS,
        integrity: IntegrityMode = IntegrityMode.CACHED,
        initial_index_state: IndexState = IndexState.DISABLED,
        clock: Clock = utc_now,
        cache: VerificationCache = PROCESS_CACHE,
        require_owner: bool = True,
        read_only: bool = False,
    ) -> None:
        if not os.path.isabs(artifact_root):
            raise InvalidInput("the artifact root must be an absolute path")
        self.artifact_root = artifact_root
        self.layout = ProjectLayout.for_project(parse_project_id(project_id))
        self.limits = limits
        self.integrity = integrity
        self.require_owner = require_owner
        self.read_only = read_only
        self._initial_index_state = initial_index_state
        self._clock = clock
        self._verifier = Verifier(self.layout.key, integrity, cache, clock)

    @property
    def project_id(self) -> ProjectId:
        """The project this store serves."""
        return self.layout.project_id

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute path of `parts` (a layout path) below this project's directory."""
        return os.path.join(self.artifact_root, *self.layout.root, *parts)

    # -- record -----------------------------------------------------------------------------

    def record(
        self,
        rlm_root: str,
        provenance: Provenance,
        metadata: CardMetadata,
        source_path: str,
        progress: Progress | None = None,
    ) -> Recorded:
        """Copy a kernel export into the store and commit its card (spec §29.1 steps 1–4).

        Raises:
            InvalidInput: metadata exceeds the configured bounds.
            PathRejected: the source is outside the caller's exports, a symlink, not a regular
                file, hard-linked or foreign-owned (subclasses say which).
            SourceMissing: the source does not exist.
            SourceChanged: the source changed while it was streamed.
            ArtifactTooLarge: the source exceeds the per-artifact limit.
            QuotaExceeded: the project's byte or card quota would be exceeded.
            StoreIOError: the store could not be written, or is open read-only.
        """
        check_writable(self.read_only)
        from cas._ingest import open_export  # record-only rooms (see the module docstring)
        from cas._record import Recorder

        metadata.check(self.limits)
        recorder = Recorder(
            self.project_id, self.limits, self._verifier, self._clock, self._initial_index_state
        )
        with open_export(
            rlm_root, provenance.session_id, source_path, require_owner=self.require_owner
        ) as src:
            if src.size > self.limits.artifact_bytes:  # before the project is even created
                limit = self.limits.artifact_bytes
                raise ArtifactTooLarge(
                    f"the artifact is larger than the {limit}-byte limit", limit=limit
                )
            with self._open(create=True) as opened:
                return recorder.record(src, recorded(opened), provenance, metadata, progress)

    # -- resolve ----------------------------------------------------------------------------

    def resolve(
        self,
        experiment_id: str,
        current_source_version: str | None = None,
        progress: Progress | None = None,
    ) -> Resolved:
        """Prove an experiment's bytes intact and hand out their path (spec §30.2).

        Raises:
            InvalidId: `experiment_id` is malformed.
            InvalidInput: `current_source_version` is malformed.
            ExperimentNotFound: the project has no such card.
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
            ObjectMissing: the card's object is not in the store.
            IntegrityError: the object's size or SHA-256 differs from the card.
        """
        exp_id = parse_experiment_id(experiment_id)
        check_version(current_source_version)
        with self._open(create=False) as opened:
            project = recorded(opened)
            card = project.cards.read(exp_id)
            objects = _UnrecordedProofs(project.fd, self.layout) if self.read_only else None
            verified_at, hashed = self._verifier.verify(objects or project.objects, card, progress)
        return resolved(card, self._paths(card), current_source_version, verified_at, hashed)

    def locate(self, experiment_id: str, current_source_version: str | None = None) -> Located:
        """A card, its freshness, and its bytes as a slice reads them (chunk by chunk, verified).

        Nothing is hashed whole: the manifest is proven to be the card's, and a slice proves each
        chunk it reads.

        Raises:
            InvalidId: `experiment_id` is malformed.
            InvalidInput: `current_source_version` is malformed.
            ExperimentNotFound: the project has no such card.
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
            ObjectMissing: the card's object is not in the store.
            IntegrityError: the chunk manifest is missing or not the card's.
            StoreIOError: the manifest could not be read.
        """
        exp_id = parse_experiment_id(experiment_id)
        check_version(current_source_version)
        with self._open(create=False) as opened:
            project = recorded(opened)
            card = project.cards.read(exp_id)
            if project.objects.lstat(card.typed_artifact_id) is None:
                raise ObjectMissing("the experiment's artifact is missing from the store")
        return located(card, self._paths(card), current_source_version)

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
        with self._open(create=False) as opened:
            return recorded(opened).cards.read(exp_id)

    def load_cards(self, experiment_ids: Sequence[str]) -> list[ExperimentCardV1 | None]:
        """Read and validate several cards of this project, opening it once (a search's hits).

        None for a card that is absent or unusable.

        Raises:
            InvalidId: an id is malformed.
        """
        exp_ids = [parse_experiment_id(experiment_id) for experiment_id in experiment_ids]
        with self._open(create=False) as opened:
            return [None] * len(exp_ids) if opened is None else opened.cards.read_many(exp_ids)

    def scan_cards(self) -> CardScan:
        """Read every card; malformed, unsupported or misplaced ones are skipped and counted."""
        return CardScan.of(self.read_cards())

    def cards_version(self) -> str | None:
        """A token that changes whenever a card file is added, replaced or removed.

        Locally the cards directory's (inode, mtime_ns): every card publication renames into
        it. None when there are no cards, or when the directory changed within the last
        `RACY_NS`: a later change in the same tick of the filesystem's coarse clock could leave
        the mtime as it is (Git's "racily clean" case), so such a token proves nothing and the
        caller must look at the files. Compared for equality only; a bucket backend may use
        another token.
        """
        try:
            st = os.lstat(self.local_path(self.layout.cards_dir))
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode) or st.st_mtime_ns > time.time_ns() - RACY_NS:
            return None
        return f"{st.st_ino}:{st.st_mtime_ns}"

    def read_cards(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card file, in name order (see `CardFiles.scan`); none before the first record."""
        with self._open(create=False) as project:
            if project is not None:
                yield from project.cards.scan(unchanged)

    def read_changed_cards(
        self, since: LogMark | None, known: Mapping[str, CardStamp]
    ) -> CardChanges:
        """The card files changed since the card log mark `since` (see `CardFiles.changes`).

        None for `since` (or a log that cannot say) lists and stats every file, as
        `read_cards(known)` does; the result carries the mark to pass next time.
        """
        with self._open(create=False) as project:
            if project is None:
                return CardChanges.scanned((), None)
            return project.cards.changes(since, known)

    def update_index_status(
        self, experiment_id: str, decide: Callable[[ExperimentCardV1], IndexStatus | None]
    ) -> ExperimentCardV1:
        """Read a card under the commit lock and replace its index status with `decide(card)`.

        `decide` sees the card as it is now (a concurrent re-record cannot slip in between) and
        returns None to leave it unchanged. This is the indexer's only write to cards.

        Raises:
            ExperimentNotFound: there is no such card.
            CardInvalid: the stored card is invalid.
            StoreIOError: the card could not be written.
        """
        exp_id = parse_experiment_id(experiment_id)
        check_writable(self.read_only)
        with self._open(create=False) as opened:
            project = recorded(opened)
            with project.locked():
                card = project.cards.read(exp_id)
                status = decide(card)
                if status is None or status == card.index:
                    return card
                from cards.build import with_index

                updated = with_index(card, status)
                with project.staging() as tmp_fd:
                    project.cards.write(updated, tmp_fd)
                return updated

    def set_index_status(self, experiment_id: str, status: IndexStatus) -> ExperimentCardV1:
        """Atomically replace a card's index status (see `update_index_status`)."""
        return self.update_index_status(experiment_id, lambda card: status)

    def has_object(self, artifact_id: str) -> bool:
        """Whether a regular file holds the object's name (a stat, not a verification)."""
        with self._open(create=False) as project:
            if project is None:
                return False
            st = project.objects.lstat(parse_artifact_id(artifact_id))
            return st is not None and stat.S_ISREG(st.st_mode)

    def usage(self) -> Usage:
        """Committed objects, their bytes, and cards of this project."""
        with self._open(create=False) as project:
            if project is None:
                return Usage(objects=0, bytes=0, cards=0)
            objects, total = project.objects.usage()
            return Usage(objects=objects, bytes=total, cards=project.cards.count())

    def check(self, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
        """Verify every object, manifest, card and staging file (`cas.fsck`)."""
        from cas._fsck import check_local

        return check_local(self, repair=repair, progress=progress)

    # -- internals --------------------------------------------------------------------------

    def _open(self, *, create: bool) -> contextlib.AbstractContextManager[Project | None]:
        return open_project(self.artifact_root, self.layout, create=create)


class _UnrecordedProofs(ObjectStore):
    """A read-only store's objects: a proof stays in the process's cache, never on disk."""

    def write_record(self, artifact_id: ArtifactId, data: bytes) -> bool:
        """Write nothing (the record only spares a later rehash)."""
        return False
