"""Garbage collection of a bucket store, where no lock spans hosts.

The same reclaimable things as locally (`cas._gc`), in object-storage terms: objects no card names
(with their manifests), staging keys and incomplete uploads, quarantined objects, each only
once older than its expiry. A record on another host takes no lock this sweep could share, and
may adopt an old unreferenced object (deduplication) at any instant, so deleting is made
reversible and checked afterwards:

1. read every card (the referenced set), list the objects;
2. each unreferenced object older than the grace period is first copied to `trash/` (a
   server-side copy), then deleted from its content address;
3. every card is read again: an object deleted in step 2 that a card names now (a record
   adopted it meanwhile) is copied back from `trash/` at once;
4. a trash copy is deleted only by a later collection, once older than the grace period and
   named by no card (a card naming it has its object copied back first).

The record's side (`BucketObjects._commit`): after writing its card it looks at the object
again and sends it once more if it is gone. Between them every order is covered: a card
written before step 3 reads is seen there; a card written after it is followed by that
record's look, which comes after the delete. Bytes are never lost; for the instant between
a delete and step 3 a resolve of an adopting card may fail and succeed when tried again.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from cards import ArtifactId
from cas._gc import GcReport, Reclaimable, Retention, sweep
from cas._gc import referenced as referenced_by
from cas._layout import CHUNKS_SUFFIX, QUARANTINE, TMP
from cas._progress import Progress

if TYPE_CHECKING:
    from cas._bucket._client import BucketClient, Head
    from cas._bucket._store import BucketObjects, BucketStore

TRASH = "trash/"


def collect_bucket_garbage(
    bucket: BucketStore,
    retention: Retention,
    *,
    apply: bool,
    progress: Progress | None = None,
    now: float | None = None,
) -> GcReport:
    """Collect a bucket project's garbage (see the module docstring); a dry run unless `apply`.

    Raises:
        StoreIOError: the bucket failed.
    """
    store = bucket.objects
    report = GcReport(applied=apply)
    clock = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    referenced, unreadable = referenced_by(store.cards)
    report.unreadable_cards = unreadable
    client, keys = store.client, store.keys
    listed = list(client.listing(keys.objects))
    manifests = {h.key for h in listed if h.key.endswith(CHUNKS_SUFFIX)}
    objects = [(h, aid) for h in listed if (aid := keys.object_of(h.key)) is not None]
    if progress is not None:
        progress.start(sum(h.size for h, _ in objects))  # bytes looked at
    deleted: dict[ArtifactId, Head] = {}
    for head, aid in objects:
        if progress is not None:
            progress.advance(head.size)
        if aid in referenced:
            report.referenced += 1
        elif unreadable:  # a card we cannot read may name it
            continue
        elif head.modified > clock - timedelta(seconds=retention.grace_s):
            report.young += 1
        else:
            report.reclaimed.append(Reclaimable("object", _rel(store, head.key), head.size))
            if apply:
                _trash(client, store, head.key, head.key + CHUNKS_SUFFIX in manifests)
                deleted[aid] = head
    if apply:
        referenced, unreadable = referenced_by(store.cards)
        for gone in sorted(set(deleted) & referenced):
            _restore(client, store, keys.object(ArtifactId(gone)))
            report.restored += 1
    if not unreadable:  # a card we cannot read may name what is in trash
        _sweep_trash(store, referenced, set(deleted), retention, report, clock)
    _sweep_staging(store, retention, report, clock)
    quarantine_before = clock.timestamp() - retention.quarantine_s
    sweep(store.backend, f"{QUARANTINE}/", "quarantined", quarantine_before, report)
    return report


def _rel(store: BucketObjects, key: str) -> str:
    return key.removeprefix(store.keys.root)


def _trash_key(store: BucketObjects, key: str) -> str:
    return f"{store.keys.root}{TRASH}{key.rpartition('/')[2]}"


def _trash(client: BucketClient, store: BucketObjects, key: str, has_manifest: bool) -> None:
    """Copy the object (and its manifest) to `trash/`, then delete them from their address."""
    names = [key, key + CHUNKS_SUFFIX] if has_manifest else [key]
    for name in names:
        client.copy(name, _trash_key(store, name))
    for name in names:
        client.delete(name)


def _restore(client: BucketClient, store: BucketObjects, key: str) -> None:
    """Copy an object (and its manifest) back from `trash/` (the same bytes, by address)."""
    for name in (key + CHUNKS_SUFFIX, key):
        if client.head(_trash_key(store, name)) is not None:
            client.copy(_trash_key(store, name), name)


def _sweep_trash(
    store: BucketObjects,
    named: set[str],
    just_moved: set[ArtifactId],
    retention: Retention,
    report: GcReport,
    clock: datetime,
) -> None:
    """Delete old trash no card names; put back what a card names and is missing.

    What this run moved to trash (`just_moved`) stays until a later run; a dry run only counts.
    """
    client, keys = store.client, store.keys
    for head in client.listing(f"{keys.root}{TRASH}"):
        aid = ArtifactId(head.key.rpartition("/")[2].removesuffix(CHUNKS_SUFFIX))
        if aid in just_moved:
            continue
        if aid in named:
            if report.applied and client.head(keys.object(aid)) is None:
                _restore(client, store, keys.object(aid))
                report.restored += 1
        elif head.modified <= clock - timedelta(seconds=retention.grace_s):
            report.reclaimed.append(Reclaimable("trash", _rel(store, head.key), head.size))
            if report.applied:
                client.delete(head.key)


def _sweep_staging(
    store: BucketObjects, retention: Retention, report: GcReport, clock: datetime
) -> None:
    """Staging keys and incomplete uploads older than the grace period and fsck's bound."""
    keep = max(retention.grace_s, store.settings.stale_after_s)
    sweep(store.backend, f"{TMP}/", "stage", clock.timestamp() - keep, report)
    older_than = clock - timedelta(seconds=keep)
    for upload in store.client.uploads(store.keys.root):
        if upload.initiated <= older_than:
            report.reclaimed.append(Reclaimable("stage", "upload:" + _rel(store, upload.key), 0))
            if report.applied:
                store.client.abort(upload.key, upload.upload_id)
