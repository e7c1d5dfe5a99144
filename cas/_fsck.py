"""Operator checks: verify every object and card of a project; repair only what is safe.

`--repair` removes recognised crash leftovers in `tmp/` and moves corrupt objects into
`quarantine/`. It never deletes an object, valid or not, and never touches a card.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import dataclass, field

import xxhash

from cards import ArtifactId, ExperimentCardV1, artifact_id_for_digest, parse_artifact_id
from cards.errors import InvalidId, PathEscape, SourceMissing
from cas import _fs
from cas._chunks import CHUNK_BYTES, ChunkManifest
from cas._layout import CHUNKS_SUFFIX, OBJECTS, ProjectLayout
from cas._progress import Progress
from cas._store import MAX_CARD_BYTES, CardProblem, ProjectStore

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


def fsck(
    store: ProjectStore, *, repair: bool = False, progress: Progress | None = None
) -> FsckReport:
    """Check every object, manifest, card and staging file of `store`'s project.

    With `repair`, stale staging files are removed and corrupt objects quarantined; the report
    then describes the state after repair.
    """
    report = FsckReport()
    root_fd = _project_fd(store)
    if root_fd is None:
        return report
    try:
        objects = _check_objects(root_fd, report, progress)
        _check_cards(root_fd, store, objects, report)
        _check_stages(root_fd, store.layout, report)
        if repair:
            _repair(root_fd, store.layout, report)
    finally:
        os.close(root_fd)
    return report


def _project_fd(store: ProjectStore) -> int | None:
    try:
        artifact_fd = _fs.open_dir(store.artifact_root)
    except SourceMissing:
        return None
    try:
        return _fs.open_dir_beneath(artifact_fd, store.layout.root)
    except SourceMissing:
        return None
    finally:
        os.close(artifact_fd)


def _object_sizes(root_fd: int, report: FsckReport) -> dict[str, int]:
    """The size of every entry named like an object; anything else is reported as unknown."""
    sizes: dict[str, int] = {}
    for shard in sorted(_fs.list_dir_beneath(root_fd, (OBJECTS,))):
        try:
            shard_fd = _fs.open_dir_beneath(root_fd, (OBJECTS, shard))
        except (SourceMissing, PathEscape):
            report.unknown_entries.append(f"{OBJECTS}/{shard}")
            continue
        try:
            for name in os.listdir(shard_fd):
                if name.endswith(CHUNKS_SUFFIX):
                    continue
                if _is_object_name(name, shard):
                    sizes[name] = os.stat(name, dir_fd=shard_fd, follow_symlinks=False).st_size
                else:
                    report.unknown_entries.append(f"{OBJECTS}/{shard}/{name}")
        finally:
            os.close(shard_fd)
    return sizes


def _is_object_name(name: str, shard: str) -> bool:
    try:
        return ProjectLayout.shard(parse_artifact_id(name)) == shard
    except InvalidId:
        return False


def _check_objects(
    root_fd: int, report: FsckReport, progress: Progress | None
) -> dict[str, ObjectFinding]:
    sizes = _object_sizes(root_fd, report)
    if progress is not None:
        progress.start(sum(sizes.values()))
    findings: dict[str, ObjectFinding] = {}
    for name in sorted(sizes):
        finding = _check_object(root_fd, ArtifactId(name), progress)
        findings[name] = finding
        report.objects += 1
        report.bytes += finding.size
        if not finding.valid:
            report.invalid_objects.append(name)
    return findings


def _check_object(
    root_fd: int, artifact_id: ArtifactId, progress: Progress | None
) -> ObjectFinding:
    shard = ProjectLayout.shard(artifact_id)
    try:
        fd = _fs.open_file_beneath(root_fd, (OBJECTS, shard, artifact_id))
    except (SourceMissing, PathEscape):
        return ObjectFinding(artifact_id, 0, False, None)
    try:
        st = os.fstat(fd)
        sha = hashlib.sha256()
        chunks = []
        offset = 0
        while chunk := os.pread(fd, CHUNK_BYTES, offset):
            sha.update(chunk)
            chunks.append(xxhash.xxh3_128_digest(chunk))
            offset += len(chunk)
            if progress is not None:
                progress.advance(len(chunk))
    finally:
        os.close(fd)
    valid = stat.S_ISREG(st.st_mode) and artifact_id_for_digest(sha.digest()) == artifact_id
    manifest = ChunkManifest(offset, CHUNK_BYTES, tuple(chunks)).encode() if valid else None
    return ObjectFinding(artifact_id, offset, valid, manifest)


def _check_cards(
    root_fd: int, store: ProjectStore, objects: dict[str, ObjectFinding], report: FsckReport
) -> None:
    scan = store.scan_cards()
    report.cards = len(scan.cards)
    report.invalid_cards.extend(scan.problems)
    referenced: set[str] = set()
    for card in scan.cards:
        artifact_id = card.artifact.artifact_id
        referenced.add(artifact_id)
        finding = objects.get(artifact_id)
        if finding is None or not finding.valid or finding.size != card.artifact.bytes:
            report.dangling_cards.append(card.experiment_id)
        elif not _manifest_matches(root_fd, store.layout, card, finding):
            report.manifest_mismatches.append(card.experiment_id)
    report.orphans.extend(
        name for name, f in sorted(objects.items()) if f.valid and name not in referenced
    )


def _manifest_matches(
    root_fd: int, layout: ProjectLayout, card: ExperimentCardV1, finding: ObjectFinding
) -> bool:
    """The stored manifest is the one the card binds, and it describes these exact bytes."""
    try:
        fd = _fs.open_file_beneath(root_fd, layout.chunks_path(card.typed_artifact_id))
    except (SourceMissing, PathEscape):
        return False
    try:
        raw = _fs.read_small(fd, MAX_CARD_BYTES)
    finally:
        os.close(fd)
    return raw == finding.manifest and hashlib.sha256(raw).hexdigest() == card.chunk_manifest_sha256


def _check_stages(root_fd: int, layout: ProjectLayout, report: FsckReport) -> None:
    try:
        tmp_fd = _fs.open_dir_beneath(root_fd, layout.tmp_dir)
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


def _repair(root_fd: int, layout: ProjectLayout, report: FsckReport) -> None:
    if report.stale_stages:
        tmp_fd = _fs.open_dir_beneath(root_fd, layout.tmp_dir)
        try:
            for name in report.stale_stages:
                os.unlink(name, dir_fd=tmp_fd)
                report.removed_stages.append(name)
            _fs.fsync_dir(tmp_fd)
        finally:
            os.close(tmp_fd)
        report.stale_stages.clear()
    if report.invalid_objects:
        _quarantine(root_fd, layout, report)


def _quarantine(root_fd: int, layout: ProjectLayout, report: FsckReport) -> None:
    quarantine_fd = _fs.make_dirs(root_fd, layout.quarantine_dir)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        for name in report.invalid_objects:
            shard_fd = _fs.open_dir_beneath(root_fd, layout.object_dir(ArtifactId(name)))
            try:
                os.rename(name, f"{name}.{stamp}", src_dir_fd=shard_fd, dst_dir_fd=quarantine_fd)
                _fs.fsync_dir(shard_fd)
            finally:
                os.close(shard_fd)
            report.quarantined.append(name)
        _fs.fsync_dir(quarantine_fd)
    finally:
        os.close(quarantine_fd)
    report.invalid_objects.clear()
