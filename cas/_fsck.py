"""Operator checks: verify every object and card of a project; repair only what is safe.

One check for every backend (`Store.check`), in one walk of the project's keys (`Backend.list`):
the cards are read and validated as they are listed, every object is hashed whole, every
manifest compared with the bytes it describes, and every stage judged a crash leftover or a
live writer's. What differs between backends is asked of the open project (`FsckRoom`): how an
object is hashed (a local file descriptor; a bucket's ranged GETs pinned to one version), when a
stage is stale (unlocked and old; old), what else a crash leaves (a bucket's incomplete uploads)
and how a corrupt object is moved aside.

`--repair` removes recognised crash leftovers and moves corrupt objects into `quarantine/`. It
never deletes an object, valid or not, and never touches a card.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cards import ArtifactId, ExperimentCardV1, artifact_id_for_digest, parse_experiment_id
from cards.errors import CardInvalid, InvalidInput, ObjectMissing
from cas._backend import Backend, Entry
from cas._cardfiles import MAX_CARD_BYTES, CardProblem, checked_card
from cas._layout import (
    CARD_SUFFIX,
    CARDS,
    CHUNKS_SUFFIX,
    MAX_MANIFEST_BYTES,
    OBJECTS,
    TMP,
    VERIFIED_SUFFIX,
    object_name,
)

if TYPE_CHECKING:
    from cards import ProjectId
    from cas._hashing import Digests
    from cas._progress import Progress
    from cas._store import Store

# A stage younger than this may belong to a writer between its create and its lock.
STALE_STAGE_AGE_S = 60


@dataclass(frozen=True, slots=True)
class ObjectFinding:
    """One object fsck looked at, by artifact id: its size and whether its bytes hold."""

    artifact_id: ArtifactId
    size: int
    valid: bool
    manifest: bytes | None


@dataclass(slots=True)
class FsckReport:
    """What fsck found (names are store ids, never card text) and what repair did."""

    objects: int = 0
    bytes: int = 0
    cards: int = 0
    invalid_objects: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    dangling_cards: list[str] = field(default_factory=list)
    invalid_cards: list[CardProblem] = field(default_factory=list)
    manifest_mismatches: list[str] = field(default_factory=list)
    stale_stages: list[str] = field(default_factory=list)
    live_stages: int = 0
    unknown_entries: list[str] = field(default_factory=list)
    removed_stages: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)

    @property
    def problems(self) -> int:
        """How many findings need an operator (orphans are valid bytes, kept for inspection)."""
        return (
            len(self.invalid_objects)
            + len(self.dangling_cards)
            + len(self.invalid_cards)
            + len(self.manifest_mismatches)
            + len(self.stale_stages)
            + len(self.unknown_entries)
        )

    @property
    def ok(self) -> bool:
        """Whether nothing needs an operator."""
        return self.problems == 0


# A crash leftover outside the project's keys (a bucket's incomplete upload): its name in the
# report, whether it is stale, and how to remove it.
Leftover = tuple[str, bool, Callable[[], None]]


class FsckRoom(Protocol):
    """What the check asks of an open project, beyond its keys (see the module docstring)."""

    @property
    def backend(self) -> Backend:
        """The project's keys."""
        ...

    def digests(self, entry: Entry, progress: Progress | None) -> Digests | None:
        """The object's bytes hashed whole; None when no intact regular file or key holds them."""
        ...

    def stale(self, entry: Entry) -> bool | None:
        """Whether a key below `tmp/` is a crash leftover (None: it is no stage of ours)."""
        ...

    def leftovers(self) -> Iterator[Leftover]:
        """Other crash leftovers, stale or not."""
        ...

    def quarantine(self, artifact_id: ArtifactId) -> None:
        """Move a corrupt object into `quarantine/` (never delete it)."""
        ...


def fsck(store: Store, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
    """Check every object, manifest, card and staging file of `store`'s project.

    With `repair`, stale staging files are removed and corrupt objects quarantined; the report
    then describes the state after repair.
    """
    return store.check(repair=repair, progress=progress)


def check_project(
    room: FsckRoom, project_id: ProjectId, *, repair: bool, progress: Progress | None
) -> FsckReport:
    """`fsck` of one open project (see the module docstring)."""
    report = FsckReport()
    cards: list[ExperimentCardV1] = []
    objects: list[tuple[Entry, ArtifactId]] = []
    manifests: set[str] = set()
    stale: list[Callable[[], None]] = []
    backend = room.backend
    for entry in backend.list(""):
        area, _, rest = entry.key.partition("/")
        if area == CARDS and rest.endswith(CARD_SUFFIX):
            _check_card(backend, entry, rest, project_id, cards, report)
        elif area == OBJECTS and rest.endswith(CHUNKS_SUFFIX):
            manifests.add(entry.key)
        elif area == OBJECTS and not rest.endswith(VERIFIED_SUFFIX):
            shard, _, name = rest.partition("/")
            artifact_id = object_name(name, shard)
            if artifact_id is None:
                report.unknown_entries.append(entry.key)
            else:
                objects.append((entry, artifact_id))
        elif area == TMP:
            is_stale = room.stale(entry)
            if is_stale is None:
                report.unknown_entries.append(entry.key)
            elif is_stale:
                report.stale_stages.append(rest)
                stale.append(functools.partial(backend.delete, entry.key))
            else:
                report.live_stages += 1
    for name, is_stale, remove in room.leftovers():
        if is_stale:
            report.stale_stages.append(name)
            stale.append(remove)
        else:
            report.live_stages += 1
    findings = _check_objects(room, objects, report, progress)
    _check_references(backend, cards, findings, manifests, report)
    if repair:
        _repair(room, report, stale)
    return report


def _check_card(
    backend: Backend,
    entry: Entry,
    name: str,
    project_id: ProjectId,
    cards: list[ExperimentCardV1],
    report: FsckReport,
) -> None:
    from cards import parse_card

    try:
        exp_id = parse_experiment_id(name.removesuffix(CARD_SUFFIX))
        if entry.size > MAX_CARD_BYTES:
            raise CardInvalid("the card file is larger than a card may be")
        raw = backend.read(entry.key, 0, MAX_CARD_BYTES + 1).data
        cards.append(checked_card(parse_card(raw), exp_id, project_id))
    except ObjectMissing:
        return  # removed since the listing
    except (InvalidInput, CardInvalid) as exc:
        report.invalid_cards.append(CardProblem(name=name, code=str(exc.code)))


def _check_objects(
    room: FsckRoom,
    objects: list[tuple[Entry, ArtifactId]],
    report: FsckReport,
    progress: Progress | None,
) -> dict[str, ObjectFinding]:
    if progress is not None:
        progress.start(sum(entry.size for entry, _ in objects))
    findings: dict[str, ObjectFinding] = {}
    for entry, artifact_id in objects:
        digests = room.digests(entry, progress)
        valid = digests is not None and artifact_id_for_digest(digests.sha256) == artifact_id
        size = entry.size if digests is None else digests.size
        manifest = digests.manifest() if valid and digests is not None else None
        findings[artifact_id] = ObjectFinding(artifact_id, size, valid, manifest)
        report.objects += 1
        report.bytes += size
        if not valid:
            report.invalid_objects.append(artifact_id)
    return findings


def _check_references(
    backend: Backend,
    cards: list[ExperimentCardV1],
    objects: dict[str, ObjectFinding],
    manifests: set[str],
    report: FsckReport,
) -> None:
    """Report the cards against the object findings.

    A card is dangling unless its object is valid and of its size; its manifest must be the
    one it binds and describe those exact bytes; a valid object no card names is an orphan.
    """
    report.cards = len(cards)
    referenced: set[str] = set()
    for card in cards:  # in name order, as listed
        artifact_id = card.artifact.artifact_id
        referenced.add(artifact_id)
        finding = objects.get(artifact_id)
        if finding is None or not finding.valid or finding.size != card.artifact.bytes:
            report.dangling_cards.append(card.experiment_id)
            continue
        raw = _manifest(backend, manifests, card.typed_artifact_id)
        if (
            raw is None
            or raw != finding.manifest
            or hashlib.sha256(raw).hexdigest() != card.chunk_manifest_sha256
        ):
            report.manifest_mismatches.append(card.experiment_id)
    report.orphans.extend(
        name for name, f in sorted(objects.items()) if f.valid and name not in referenced
    )


def _manifest(backend: Backend, listed: set[str], artifact_id: ArtifactId) -> bytes | None:
    key = f"{OBJECTS}/{artifact_id[4:6]}/{artifact_id}{CHUNKS_SUFFIX}"
    if key not in listed:
        return None
    try:
        return backend.read(key, 0, MAX_MANIFEST_BYTES).data
    except ObjectMissing:
        return None


def _repair(room: FsckRoom, report: FsckReport, stale: list[Callable[[], None]]) -> None:
    for remove in stale:
        remove()
    report.removed_stages.extend(report.stale_stages)
    report.stale_stages.clear()
    for name in report.invalid_objects:
        room.quarantine(ArtifactId(name))
        report.quarantined.append(name)
    report.invalid_objects.clear()
