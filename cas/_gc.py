"""Garbage collection of a local store: what no card names, crash leftovers, old quarantine.

What is reclaimed (`collect_garbage`), each only once older than its expiry (git's anchor:
prune only what is older than the grace period, so a write in flight never loses what it made):

- objects no card names (with their chunk manifest and verification record);
- staging files in `tmp/` that no live writer holds (`_fs.is_stale_stage`);
- objects in `quarantine/` kept past the quarantine period.

Why a concurrent record never loses its object: a record publishes its object and writes its
card under the project's commit lock, and a deduplicating record checks the object is still
there under that lock (`_record`). The sweep takes the same lock, reads every card and only
then unlinks, so an object is either named by a card it read or not yet adopted by anyone; a
record that comes after finds it gone and copies its bytes afresh. The grace period is the
second fence (a young object is never touched), for writers that take no lock: a crash
between publishing and the card, or another host on a shared filesystem.

A card that cannot be read could name any object: with one, no object is collected (fsck
says which). A dry run (`apply=False`) reads the same and deletes nothing.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from cards import ArtifactId
from cards.errors import InvalidInput
from cas._backend import Backend, Entry
from cas._layout import CHUNKS_SUFFIX, QUARANTINE, TMP, VERIFIED_SUFFIX, listed_objects
from cas._progress import Progress

if TYPE_CHECKING:
    from cas._cardfiles import CardReads
    from cas._project import Project
    from cas._store import Store


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    """How long what gc may reclaim is kept first (seconds)."""

    grace_s: float = 86_400.0
    quarantine_s: float = 30 * 86_400.0


class Reclaimable(msgspec.Struct, frozen=True):
    """One thing gc reclaims (or would): its kind, its key below the project, its bytes."""

    kind: str  # "object", "stage", "quarantined", "trash"
    key: str
    bytes: int


class GcReport(msgspec.Struct, kw_only=True):
    """What a collection found and (with `applied`) reclaimed; names are store keys only."""

    applied: bool
    reclaimed: list[Reclaimable] = msgspec.field(default_factory=list)
    young: int = 0  # unreferenced objects inside the grace period, kept
    referenced: int = 0  # objects some card names
    unreadable_cards: int = 0  # with any, no object is collected
    restored: int = 0  # a bucket's: objects put back because a card named them meanwhile

    @property
    def bytes(self) -> int:
        """The bytes reclaimed (or, in a dry run, that would be)."""
        return sum(item.bytes for item in self.reclaimed)


def collect_garbage(
    store: Store,
    retention: Retention,
    *,
    apply: bool,
    progress: Progress | None = None,
    now: float | None = None,
) -> GcReport:
    """Collect a local project's garbage (see the module docstring); a dry run unless `apply`.

    Raises:
        InvalidInput: `store` is not a local store.
        StoreIOError: the store failed (what was reclaimed before stays reclaimed).
    """
    from cas._local_store import ProjectStore
    from cas._project import open_project

    now = time.time() if now is None else now
    if not isinstance(store, ProjectStore):  # a bucket's: `cas._bucket._gc`
        raise InvalidInput(
            "collect_garbage collects a local store; a bucket's is collected by "
            "collect_bucket_garbage"
        )
    report = GcReport(applied=apply)
    with open_project(store.artifact_root, store.layout, create=False) as project:
        if project is None:
            return report
        entries = listed_objects(project.keys)
        if progress is not None:
            progress.start(sum(e.size for e, _ in entries))  # bytes looked at
        with project.locked() if apply else contextlib.nullcontext():  # a dry run: no lock
            named, unreadable = referenced(project.cards)
            report.unreadable_cards = unreadable
            for entry, aid in entries:
                _sweep_object(project, aid, named, retention, report, now)
                if progress is not None:
                    progress.advance(entry.size)
        stale = functools.partial(_stale_stage, project, now - retention.grace_s, now)
        sweep(project.keys, f"{TMP}/", "stage", now, report, stale)  # aged by its lock's file
        sweep(project.keys, f"{QUARANTINE}/", "quarantined", now - retention.quarantine_s, report)
    return report


def sweep(
    keys: Backend,
    prefix: str,
    kind: str,
    older_than: float,
    report: GcReport,
    reclaimable: Callable[[Entry], bool] = lambda entry: True,
) -> None:
    """Reclaim the keys below `prefix` last changed before `older_than` (and `reclaimable`)."""
    for entry in keys.list(prefix):
        if entry.modified <= older_than and reclaimable(entry):
            report.reclaimed.append(Reclaimable(kind, entry.key, entry.size))
            if report.applied:
                keys.delete(entry.key)


def referenced(cards: CardReads) -> tuple[set[str], int]:
    """The artifact ids every readable card names, and how many cards could not be read."""
    named: set[str] = set()
    unreadable = 0
    for read in cards.scan():
        if isinstance(read.card, Exception) or read.card is None:
            unreadable += 1
        else:
            named.add(read.card.artifact.artifact_id)
    return named, unreadable


def _sweep_object(
    project: Project,
    artifact_id: ArtifactId,
    referenced: set[str],
    retention: Retention,
    report: GcReport,
    now: float,
) -> None:
    if artifact_id in referenced:
        report.referenced += 1
        return
    key = "/".join(project.layout.object_path(artifact_id))
    entry = project.keys.stat(key)  # again, under the commit lock: a record may have linked it
    if entry is None or report.unreadable_cards:  # a card we cannot read may name it
        return
    if now - entry.modified < retention.grace_s:  # last written or linked
        report.young += 1
        return
    report.reclaimed.append(Reclaimable("object", key, entry.size))
    if report.applied:  # the object, then what only describes it
        for suffix in ("", CHUNKS_SUFFIX, VERIFIED_SUFFIX):
            project.keys.delete(key + suffix)


def _stale_stage(project: Project, older_than: float, now: float, entry: Entry) -> bool:
    """Whether a key below `tmp/` is a stage of ours, older than that, that no writer holds."""
    from cas._fsck import STALE_STAGE_AGE_S  # a younger stage may be before its writer's lock

    older_than_ns = int(min(older_than, now - STALE_STAGE_AGE_S) * 1e9)
    return project.stale_stage(entry.key, older_than_ns) is True
