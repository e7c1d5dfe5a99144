"""Copying a project from one store into another, whatever their backends: every object proven.

`artmem migrate --to s3` copies the local store into its bucket; the copy itself is written once
for any two stores (`Store`), each over its own backend. For each valid card of the source, in
name order, the object is first proven: resolved through a source store opened with
`integrity = "always"` (size and SHA-256 from a full hash, never from a verification record),
its chunk manifest checked against the card. It is then stored in the destination as that
store stores a record's bytes (`Store.adopt_object`: bytes the destination already holds
under their address, proven intact, are not copied again; a bucket's conditional creates, a
local stage hashed as written and linked). Only then is the card created
(`Store.adopt_card`: only if absent). So the destination never holds a migrated card before its
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

from cards import ExperimentCardV1
from cards.errors import (
    ArtifactError,
    IntegrityError,
    InvalidInput,
    ObjectMissing,
    SourceChanged,
    StoreIOError,
)
from cas._hashing import Digests
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
        present = dest.adopt_object(card.artifact.artifact_id, digests, fd)
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
    created = dest.adopt_card(card)
    if created:
        report.cards_created += 1
    elif created is False:
        report.cards_present += 1
    else:
        report.cards_conflicting.append(card.experiment_id)
