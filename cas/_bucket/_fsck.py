"""The bucket's check and repair: every object hashed, every card checked, leftovers found.

Crash leftovers in a bucket are staging keys (`tmp/`) and incomplete multipart uploads; both
are invisible to readers. Those older than `stale_after_s` are reported, and removed (aborted)
by `--repair`. A corrupt object is copied to `quarantine/` and only then removed from its
content address, so a later record can publish the right bytes. Cards are never touched.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cards import ArtifactId, artifact_id_for_digest
from cards.errors import IntegrityError, ObjectMissing
from cas._bucket._cache import download
from cas._bucket._publish import quarantine
from cas._bucket._store import BucketStore
from cas._cardfiles import CardScan
from cas._fsck import FsckReport, ObjectFinding, check_cards
from cas._layout import CHUNKS_SUFFIX
from cas._objects import MAX_MANIFEST_BYTES
from cas._progress import Progress


def fsck_bucket(
    store: BucketStore, *, repair: bool = False, progress: Progress | None = None
) -> FsckReport:
    """Check a bucket store's project (see the module docstring).

    Raises:
        StoreIOError: the bucket failed.
    """
    report = FsckReport()
    findings = _check_objects(store, report, progress)
    cards = CardScan.of(store.cards.scan())
    check_cards(cards, findings, report, lambda artifact_id: _manifest(store, artifact_id))
    stale = _check_staging(store, report)
    if repair:
        _repair(store, report, stale)
    return report


def _check_objects(
    store: BucketStore, report: FsckReport, progress: Progress | None
) -> dict[str, ObjectFinding]:
    keys, client = store.keys, store.client
    listed = list(client.listing(keys.objects))
    objects = [(h, keys.object_of(h.key)) for h in listed if not h.key.endswith(CHUNKS_SUFFIX)]
    if progress is not None:
        progress.start(sum(h.size for h, aid in objects if aid is not None))
    findings: dict[str, ObjectFinding] = {}
    for head, artifact_id in objects:
        if artifact_id is None:
            report.unknown_entries.append(head.key.removeprefix(keys.root))
            continue
        try:
            digests = download(client, head.key, None, head.size, 2, None)
        except (ObjectMissing, IntegrityError):
            findings[artifact_id] = ObjectFinding(artifact_id, head.size, False, None)
            report.invalid_objects.append(artifact_id)
            continue
        if progress is not None:
            progress.advance(head.size)
        valid = artifact_id_for_digest(digests.sha256) == artifact_id
        manifest = digests.manifest() if valid else None
        findings[artifact_id] = ObjectFinding(artifact_id, digests.size, valid, manifest)
        report.objects += 1
        report.bytes += digests.size
        if not valid:
            report.invalid_objects.append(artifact_id)
    return findings


def _manifest(store: BucketStore, artifact_id: ArtifactId) -> bytes | None:
    got = store.client.get(store.keys.chunks(artifact_id), MAX_MANIFEST_BYTES)
    return None if got is None else got[0]


def _check_staging(store: BucketStore, report: FsckReport) -> list[tuple[str, str | None]]:
    """Staging keys and incomplete uploads: (key, upload id or None) of the stale ones."""
    keys, client = store.keys, store.client
    older_than = datetime.now(UTC) - timedelta(seconds=store.settings.stale_after_s)
    stale: list[tuple[str, str | None]] = []
    for head in client.listing(keys.tmp):
        if head.modified <= older_than:
            stale.append((head.key, None))
            report.stale_stages.append(head.key.removeprefix(keys.root))
        else:
            report.live_stages += 1
    for upload in client.uploads(keys.root):
        if upload.initiated <= older_than:
            stale.append((upload.key, upload.upload_id))
            report.stale_stages.append("upload:" + upload.key.removeprefix(keys.root))
        else:
            report.live_stages += 1
    return stale


def _repair(store: BucketStore, report: FsckReport, stale: list[tuple[str, str | None]]) -> None:
    client, keys = store.client, store.keys
    for (key, upload_id), name in zip(stale, list(report.stale_stages), strict=True):
        if upload_id is None:
            client.delete(key)
        else:
            client.abort(key, upload_id)
        report.removed_stages.append(name)
    report.stale_stages.clear()
    for name in report.invalid_objects:
        quarantine(client, keys, ArtifactId(name))
        report.quarantined.append(name)
    report.invalid_objects.clear()
