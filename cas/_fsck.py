"""Operator checks: verify every object and card of a project; repair only what is safe.

`--repair` removes recognised crash leftovers in `tmp/` and moves corrupt objects into
`quarantine/`. It never deletes an object, valid or not, and never touches a card. Each store
checks itself (`Store.check`): a local one here (`check_local`), a bucket one in
`cas._bucket._fsck` (the same report, in object-storage terms); neither module imports the other.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import fsedge as _fs
from cards import ArtifactId, artifact_id_for_digest
from cards.errors import ObjectMissing, PathEscape, SourceMissing
from cas._cardfiles import CardProblem, CardScan
from cas._progress import Progress
from cas._project import Project, open_project

if TYPE_CHECKING:
    from cas._local_store import ProjectStore
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


def fsck(store: Store, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
    """Check every object, manifest, card and staging file of `store`'s project.

    With `repair`, stale staging files are removed and corrupt objects quarantined; the report
    then describes the state after repair.
    """
    return store.check(repair=repair, progress=progress)


def check_local(
    store: ProjectStore, *, repair: bool = False, progress: Progress | None = None
) -> FsckReport:
    """`fsck` of a local store."""
    report = FsckReport()
    with open_project(store.artifact_root, store.layout, create=False) as project:
        if project is None:
            return report
        objects = _check_objects(project, report, progress)
        check_cards(
            CardScan.of(project.cards.scan()), objects, report, project.objects.read_manifest
        )
        _check_stages(project, report)
        if repair:
            _repair(project, report)
    return report


def _check_objects(
    project: Project, report: FsckReport, progress: Progress | None
) -> dict[str, ObjectFinding]:
    entries = list(project.objects.walk())
    if progress is not None:
        progress.start(sum(e.size for e in entries if e.artifact_id is not None))
    findings: dict[str, ObjectFinding] = {}
    for entry in entries:
        if entry.artifact_id is None:
            report.unknown_entries.append(entry.path)
            continue
        finding = _check_object(project, entry.artifact_id, progress)
        findings[entry.artifact_id] = finding
        report.objects += 1
        report.bytes += finding.size
        if not finding.valid:
            report.invalid_objects.append(entry.artifact_id)
    return findings


def _check_object(
    project: Project, artifact_id: ArtifactId, progress: Progress | None
) -> ObjectFinding:
    try:
        digests = project.objects.digests(artifact_id, progress)
    except ObjectMissing:  # a symlink, directory or other non-file holds the name
        return ObjectFinding(artifact_id, 0, False, None)
    valid = artifact_id_for_digest(digests.sha256) == artifact_id
    return ObjectFinding(artifact_id, digests.size, valid, digests.manifest() if valid else None)


def check_cards(
    scan: CardScan,
    objects: dict[str, ObjectFinding],
    report: FsckReport,
    read_manifest: Callable[[ArtifactId], bytes | None],
) -> None:
    """Report the scanned cards against the object findings (either backend's).

    A card is dangling unless its object is valid and of its size; its manifest must be the
    one it binds and describe those exact bytes; a valid object no card names is an orphan.
    """
    report.cards = len(scan.cards)
    report.invalid_cards.extend(scan.problems)
    referenced: set[str] = set()
    for card in scan.cards:
        artifact_id = card.artifact.artifact_id
        referenced.add(artifact_id)
        finding = objects.get(artifact_id)
        if finding is None or not finding.valid or finding.size != card.artifact.bytes:
            report.dangling_cards.append(card.experiment_id)
            continue
        raw = read_manifest(card.typed_artifact_id)
        if (
            raw is None
            or raw != finding.manifest
            or hashlib.sha256(raw).hexdigest() != card.chunk_manifest_sha256
        ):
            report.manifest_mismatches.append(card.experiment_id)
    report.orphans.extend(
        name for name, f in sorted(objects.items()) if f.valid and name not in referenced
    )


def _check_stages(project: Project, report: FsckReport) -> None:
    try:
        tmp_fd = _fs.open_dir_beneath(project.fd, project.layout.tmp_dir)
    except (SourceMissing, PathEscape):
        return
    older_than = time.time_ns() - STALE_STAGE_AGE_S * 1_000_000_000
    try:
        for name in sorted(os.listdir(tmp_fd)):
            if not (name.startswith(_fs.STAGE_PREFIX) and name.endswith(_fs.STAGE_SUFFIX)):
                report.unknown_entries.append(f"tmp/{name}")
            elif _fs.is_stale_stage(tmp_fd, name, older_than_ns=older_than):
                report.stale_stages.append(name)
            else:
                report.live_stages += 1
    finally:
        os.close(tmp_fd)


def _repair(project: Project, report: FsckReport) -> None:
    if report.stale_stages:
        with project.staging() as tmp_fd:
            for name in report.stale_stages:
                os.unlink(name, dir_fd=tmp_fd)
                report.removed_stages.append(name)
            _fs.fsync_dir(tmp_fd)
        report.stale_stages.clear()
    for name in report.invalid_objects:
        project.objects.quarantine(ArtifactId(name))
        report.quarantined.append(name)
    report.invalid_objects.clear()
