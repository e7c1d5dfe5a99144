"""Copying a local project store into its bucket: every object proven, idempotent, resumable.

For each valid card of the local project, in name order, the object is first proven: resolved
through a local store opened with `integrity = "always"` (size and SHA-256 from a full hash,
never from a verification record), its chunk manifest checked against the card. It is then
published by the same conditional creates a record uses (`_publish`): bytes the bucket already
holds under their address, with our size and SHA-256, are not sent again. Only then is the card
created, with `If-None-Match: *`. So the bucket never holds a migrated card before its object;
a crash or an interrupt leaves at most objects without cards, and running again finishes the
job, sending nothing twice.

A card the bucket already holds is never overwritten: an equal one counts as present, another
one (recorded in the bucket meanwhile, or re-described there) as conflicting, reported for the
operator to look at. A corrupt card object in the bucket is replaced (`If-Match` on exactly
that version), as a record would. Invalid local cards and objects that fail their proof are
reported and skipped; the rest goes on.
"""

from __future__ import annotations

import hashlib
import os

import msgspec

from cards import ExperimentCardV1
from cards.errors import (
    ArtifactError,
    IntegrityError,
    InvalidInput,
    ObjectMissing,
    SourceChanged,
    StoreIOError,
)
from cas import _fs
from cas._bucket._cards import BucketCards
from cas._bucket._store import BucketStore
from cas._chunks import parse_manifest
from cas._hashing import Digests
from cas._local_store import ProjectStore
from cas._objects import MAX_MANIFEST_BYTES
from cas._progress import Progress
from cas._verify import IntegrityMode

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class MigrateReport(msgspec.Struct):
    """What a migration did, in store ids and counts only."""

    cards: int = 0  # valid local cards seen
    objects_sent: int = 0
    objects_present: int = 0  # already in the bucket: nothing sent
    bytes_sent: int = 0
    cards_created: int = 0
    cards_present: int = 0
    cards_conflicting: list[str] = msgspec.field(default_factory=list)  # experiment ids
    skipped: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (card file, error code)

    @property
    def ok(self) -> bool:
        """Whether every local card is now in the bucket as it is here."""
        return not self.cards_conflicting and not self.skipped


def migrate(
    local: ProjectStore, bucket: BucketStore, progress: Progress | None = None
) -> MigrateReport:
    """Copy `local`'s cards and their proven objects into `bucket` (see the module docstring).

    `progress` advances by each object's bytes once it is in the bucket.

    Raises:
        InvalidInput: the two stores serve different projects, or `local` is not proving
            every object (`integrity = "always"`).
        StoreIOError: the bucket failed (retryable: running again resumes).
    """
    if local.project_id != bucket.project_id:
        raise InvalidInput("a project migrates into the same project's place in the bucket")
    if local.integrity is not IntegrityMode.ALWAYS:
        raise InvalidInput("migration proves every object: open the local store in 'always' mode")
    report = MigrateReport()
    cards = bucket.cards
    done: set[str] = set()
    for read in local.read_cards():
        card = read.card
        if isinstance(card, ArtifactError):
            report.skipped.append((read.name, str(card.code)))
        if not isinstance(card, ExperimentCardV1):
            continue
        report.cards += 1
        try:
            if card.artifact.artifact_id not in done:
                _copy_object(local, bucket, card, report)
                done.add(card.artifact.artifact_id)
                if progress is not None:
                    progress.advance(card.artifact.bytes)
        except (IntegrityError, ObjectMissing) as exc:
            report.skipped.append((read.name, str(exc.code)))
            continue
        _copy_card(cards, card, report)
    return report


def _copy_object(
    local: ProjectStore, bucket: BucketStore, card: ExperimentCardV1, report: MigrateReport
) -> None:
    resolved = local.resolve(card.experiment_id)  # a full hash: size and SHA-256 proven
    digests = Digests(
        card.artifact.bytes,
        bytes.fromhex(card.artifact.sha256),
        _manifest_digests(resolved.manifest_path, card),
    )
    try:
        fd = os.open(resolved.path, _OPEN)
    except OSError as exc:
        raise StoreIOError(f"cannot open the local object: {exc.strerror}") from exc
    try:
        present, _ = bucket.publisher().publish(card.typed_artifact_id, digests, fd)
    except SourceChanged as exc:  # the local object differs from what resolve just proved
        raise IntegrityError("the local object changed while it was migrated") from exc
    finally:
        os.close(fd)
    if present:
        report.objects_present += 1
    else:
        report.objects_sent += 1
        report.bytes_sent += digests.size


def _manifest_digests(path: str, card: ExperimentCardV1) -> tuple[bytes, ...]:
    """The chunk digests of the manifest the card binds.

    Raises:
        IntegrityError: the manifest is missing, unreadable, or not the card's.
    """
    try:
        fd = os.open(path, _OPEN)
    except OSError:
        raise IntegrityError("the object's chunk manifest is missing") from None
    try:
        raw = _fs.read_small(fd, MAX_MANIFEST_BYTES)
    except (OSError, StoreIOError):
        raise IntegrityError("the object's chunk manifest cannot be read") from None
    finally:
        os.close(fd)
    if hashlib.sha256(raw).hexdigest() != card.chunk_manifest_sha256:
        raise IntegrityError("the chunk manifest differs from the one its card binds")
    return parse_manifest(raw).digests


def _copy_card(cards: BucketCards, card: ExperimentCardV1, report: MigrateReport) -> None:
    existing, etag = cards.find_versioned(card.typed_experiment_id)
    if existing is None and cards.write(card, etag):  # absent, or corrupt: replaced
        report.cards_created += 1
        return
    if existing is None:  # created by another writer meanwhile: look again
        existing, _ = cards.find_versioned(card.typed_experiment_id)
    if existing == card:
        report.cards_present += 1
    else:
        report.cards_conflicting.append(card.experiment_id)
