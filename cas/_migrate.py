"""Copying a project from one store into another, whatever their backends: every object proven.

`artmem migrate --to s3` copies the local store into its bucket; the copy itself is written once
for any two stores (`Store`), each over its own backend. For each valid card of the source, in
name order, the object is first proven: resolved through a source store opened with
`integrity = "always"` (size and SHA-256 from a full hash, never from a verification record),
its chunk manifest checked against the card. It is then stored in the destination as that
store stores a record's bytes (`_adopt_object`: bytes the destination already holds
under their address, proven intact, are not copied again; a bucket's conditional creates, a
local stage hashed as written and linked). Only then is the card created
(`_adopt_card`: only if absent). So the destination never holds a migrated card before its
object; a crash or an interrupt leaves at most objects without cards, and running again
finishes the job, copying nothing twice.

A card the destination already holds is never overwritten: an equal one counts as present,
another one (recorded there meanwhile, or re-described there) as conflicting, reported for
the operator to look at. A corrupt card in the destination is replaced, as a record would.
Invalid source cards and objects that fail their proof are reported and skipped; the rest
goes on.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from cards import ExperimentCardV1, parse_artifact_id
from cards.errors import (
    ArtifactError,
    IntegrityError,
    InvalidInput,
    ObjectMissing,
    SourceChanged,
    StoreIOError,
)
from cas._hashing import Digests
from cas._results import check_writable
from cas._room import require_room, retry_lost_writes
from cas._verify import IntegrityMode
from cas.slicing import load_manifest

if TYPE_CHECKING:
    from cas._progress import Progress
    from cas._store import Store

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class MigrateReport(msgspec.Struct):
    """What a migration did, in store ids and counts only."""

    cards: int = 0  # valid source cards seen
    objects_sent: int = 0
    objects_present: int = 0  # already in the destination: nothing copied
    bytes_sent: int = 0
    cards_created: int = 0
    cards_present: int = 0
    cards_conflicting: list[str] = msgspec.field(default_factory=list)  # experiment ids
    skipped: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (card file, error code)

    @property
    def ok(self) -> bool:
        """Whether every source card is now in the destination as it is in the source."""
        return not self.cards_conflicting and not self.skipped


def migrate(source: Store, dest: Store, progress: Progress | None = None) -> MigrateReport:
    """Copy `source`'s cards and their proven objects into `dest` (see the module docstring).

    `progress` advances by each object's bytes once it is in the destination.

    Raises:
        InvalidInput: the two stores serve different projects, or `source` is not proving
            every object (`integrity = "always"`).
        StoreIOError: a store failed (retryable: running again resumes).
    """
    if source.project_id != dest.project_id:
        raise InvalidInput("a project migrates into the same project's place in the other store")
    if source.integrity is not IntegrityMode.ALWAYS:
        raise InvalidInput("migration proves every object: open the source store in 'always' mode")
    report = MigrateReport()
    done: set[str] = set()
    for read in source.read_cards():
        card = read.card
        if isinstance(card, ArtifactError):
            report.skipped.append((read.name, str(card.code)))
        if not isinstance(card, ExperimentCardV1):
            continue
        report.cards += 1
        try:
            if card.artifact.artifact_id not in done:
                _copy_object(source, dest, card, report)
                done.add(card.artifact.artifact_id)
                if progress is not None:
                    progress.advance(card.artifact.bytes)
        except (IntegrityError, ObjectMissing) as exc:
            report.skipped.append((read.name, str(exc.code)))
            continue
        _copy_card(dest, card, report)
    return report


def _copy_object(source: Store, dest: Store, card: ExperimentCardV1, report: MigrateReport) -> None:
    resolved = source.resolve(card.experiment_id)  # a full hash: size and SHA-256 proven
    manifest = load_manifest(source.locate(card.experiment_id).source)  # proven the card's
    digests = Digests(card.artifact.bytes, bytes.fromhex(card.artifact.sha256), manifest.digests)
    try:
        fd = os.open(resolved.path, _OPEN)
    except OSError as exc:
        raise StoreIOError(f"cannot open the source object: {exc.strerror}") from exc
    try:
        present = _adopt_object(dest, card.artifact.artifact_id, digests, fd)
    except SourceChanged as exc:  # the source object differs from what resolve just proved
        raise IntegrityError("the source object changed while it was migrated") from exc
    finally:
        os.close(fd)
    if present:
        report.objects_present += 1
    else:
        report.objects_sent += 1
        report.bytes_sent += digests.size


def _copy_card(dest: Store, card: ExperimentCardV1, report: MigrateReport) -> None:
    created = _adopt_card(dest, card)
    if created:
        report.cards_created += 1
    elif created is False:
        report.cards_present += 1
    else:
        report.cards_conflicting.append(card.experiment_id)


def _adopt_object(dest: Store, artifact_id: str, digests: Digests, source_fd: int) -> bool:
    """Store the bytes at `source_fd` (proven to be `digests`') at their address in `dest`.

    Nothing is stored when an intact copy is (proven, never by its name); a corrupt one is
    moved aside first. Returns whether one was.

    Raises:
        SourceChanged: the bytes read are not `digests`' (nothing is stored).
        BackendUnsupported: the service lacks a conditional create.
        StoreIOError: the store failed, or is open read-only.
    """
    check_writable(dest.read_only)
    return dest.objects.adopt(parse_artifact_id(artifact_id), digests, source_fd)


def _adopt_card(dest: Store, card: ExperimentCardV1) -> bool | None:
    """Create `card` in `dest` unless a usable card holds its id (a corrupt one is replaced).

    True: created; False: an equal card is there; None: another card is (never replaced).

    Raises:
        UnsupportedVersion: a card of a newer schema holds the id.
        StoreIOError: the store failed, or is open read-only.
    """
    check_writable(dest.read_only)
    exp_id = card.typed_experiment_id
    with dest._opened(create=True) as opened:
        room = require_room(opened)

        def attempt() -> tuple[bool | None] | None:
            with room.locked():
                existing, version = room.cards.find_versioned(exp_id)
                if existing is not None:
                    return (False if existing == card else None,)
                return (True,) if room.cards.write(card, version) else None

        return retry_lost_writes(attempt)[0]
