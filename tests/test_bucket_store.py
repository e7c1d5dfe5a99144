"""The same store behaviours against every backend: a local directory, an S3 bucket (moto), and a
bucket with a real service's quirks (`bucket_helpers.Quirks`: a quoted ETag refused in
`If-Match`, multipart completion ignoring `If-None-Match`, checksums ignored).

"Another host" of a bucket store is a store with its own state root (its own cache) over the
same bucket.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from bucket_helpers import (
    Host,
    bucket,
    keys_below,
    open_uploads,
    quirky_bucket,
    raw_client,
    s3_endpoint,
)
from conftest import PROJECT, SESSION, Workspace, fingerprint, make_metadata

from cards import IndexState, IndexStatus, InvalidId
from cards.errors import ExperimentNotFound, IntegrityError, QuotaExceeded
from cas import Provenance, Store, VerificationCache, fsck

__all__ = ["bucket", "quirky_bucket", "s3_endpoint"]  # fixtures, imported for pytest


@dataclass
class Backend:
    """Builds stores of one backend; `other_host` shares the bytes but not the local state."""

    name: str
    ws: Workspace
    host: Host | None

    def store(self, **kwargs: object) -> Store:
        if self.host is None:
            return self.ws.store(**kwargs)
        return self.host.store(PROJECT, **kwargs)

    def other_host(self, **kwargs: object) -> Store:
        if self.host is None:
            return self.ws.store(**kwargs)
        other = Host(self.host.endpoint, self.host.bucket, self.ws.root / "other-state")
        return other.store(PROJECT, **kwargs)

    def record(self, store: Store, name: str, data: bytes | None = None, **meta: object):
        if data is not None:
            self.ws.export(name, data)
        return store.record(
            str(self.ws.rlm_root), Provenance(session_id=SESSION), make_metadata(**meta), name
        )

    def corrupt(self, store: Store, artifact_id: str, size: int) -> None:
        """Replace the stored object's bytes by others of the same size, keeping its label."""
        other = bytes(size)
        if self.host is None:
            path = Path(store.local_path(store.layout.object_path(artifact_id)))  # type: ignore[arg-type]
            path.chmod(0o600)
            path.write_bytes(other)
            return
        key = store.objects.keys.object(artifact_id)  # type: ignore[attr-defined]
        s3 = raw_client(self.host.endpoint)
        label = s3.head_object(Bucket=self.host.bucket, Key=key)["Metadata"]
        s3.put_object(Bucket=self.host.bucket, Key=key, Body=other, Metadata=label)


@pytest.fixture(params=["local", "s3", "s3-quirky"])
def backend(request: pytest.FixtureRequest, ws: Workspace) -> Backend:
    if request.param == "local":
        return Backend("local", ws, None)
    endpoint = request.getfixturevalue("s3_endpoint")
    name = request.getfixturevalue("bucket" if request.param == "s3" else "quirky_bucket")
    return Backend(request.param, ws, Host(endpoint, name, ws.root / "state"))


def test_record_then_resolve_on_another_host(backend: Backend):
    data = os.urandom(100_000)
    recorded = backend.record(backend.store(), "a.bin", data)
    assert recorded.card_created and not recorded.deduplicated
    resolved = backend.other_host().resolve(recorded.card.experiment_id)
    assert Path(resolved.path).read_bytes() == data
    assert resolved.card == recorded.card
    assert resolved.hashed is (backend.host is not None)  # downloaded and hashed on host B


def test_multipart_record_resolves_and_leaves_no_staging(backend: Backend):
    data = os.urandom(9 * 1024 * 1024 + 12_345)  # past one 8 MiB part: multipart and copy
    recorded = backend.record(backend.store(), "big.bin", data)
    resolved = backend.other_host().resolve(recorded.card.experiment_id)
    assert Path(resolved.path).read_bytes() == data
    if backend.host is not None:
        root = backend.store().objects.keys.root  # type: ignore[attr-defined]
        assert [
            k for k in keys_below(backend.host.endpoint, backend.host.bucket, root + "tmp/")
        ] == []
        assert open_uploads(backend.host.endpoint, backend.host.bucket) == []


def test_same_bytes_are_stored_once(backend: Backend):
    store = backend.store()
    data = os.urandom(50_000)
    first = backend.record(store, "a.bin", data)
    second = backend.record(store, "a.bin", query_fingerprint=fingerprint("other"))
    assert second.deduplicated and second.card_created
    assert second.card.artifact.artifact_id == first.card.artifact.artifact_id
    usage = store.usage()
    assert (usage.objects, usage.bytes, usage.cards) == (1, len(data), 2)


def test_re_record_is_idempotent_and_updates_descriptions(backend: Backend):
    store = backend.store()
    backend.record(store, "a.bin", b"x" * 1000)
    again = backend.record(store, "a.bin")
    assert not again.card_created and not again.card_updated
    retitled = backend.record(store, "a.bin", title="A better title")
    assert retitled.card_updated and retitled.changed == ("title",)
    assert store.load_card(retitled.card.experiment_id).title == "A better title"
    assert len(store.scan_cards().cards) == 1


def test_repeat_resolve_trusts_the_verification_record(backend: Backend):
    recorded = backend.record(backend.store(), "a.bin", os.urandom(10_000))
    exp = recorded.card.experiment_id
    backend.other_host().resolve(exp)
    fresh_process = backend.other_host(cache=VerificationCache())
    assert not fresh_process.resolve(exp).hashed
    from cas import IntegrityMode

    always = backend.other_host(integrity=IntegrityMode.ALWAYS)
    assert always.resolve(exp).hashed


def test_corruption_is_an_integrity_error(backend: Backend):
    data = os.urandom(20_000)
    store = backend.store()
    recorded = backend.record(store, "a.bin", data)
    backend.corrupt(store, recorded.card.artifact.artifact_id, len(data))
    with pytest.raises(IntegrityError):
        backend.other_host(cache=VerificationCache()).resolve(recorded.card.experiment_id)


def test_freshness_verdicts(backend: Backend):
    recorded = backend.record(backend.store(), "a.bin", b"abc")
    exp = recorded.card.experiment_id
    store = backend.other_host()
    assert str(store.resolve(exp, recorded.card.source_version).freshness) == "fresh"
    assert str(store.resolve(exp, "snapshot-later").freshness) == "stale"


def test_unknown_experiment(backend: Backend):
    store = backend.store()
    backend.record(store, "a.bin", b"abc")
    with pytest.raises(ExperimentNotFound):
        store.resolve("exp_" + "a" * 52)


def test_load_cards_reads_each_card_in_order_and_none_for_an_unknown_one(backend: Backend):
    store = backend.store()
    assert store.load_cards(["exp_" + "a" * 52]) == [None]  # nothing recorded yet
    a = backend.record(store, "a.bin", b"abc").card
    b = backend.record(store, "b.bin", b"abd").card
    unknown = "exp_" + "a" * 52
    assert store.load_cards([b.experiment_id, unknown, a.experiment_id, b.experiment_id]) == [
        b,
        None,
        a,
        b,
    ]
    assert store.load_cards([]) == []
    with pytest.raises(InvalidId):
        store.load_cards([a.experiment_id, "exp_../../etc/passwd"])


def test_byte_quota(backend: Backend):
    from cards.policy import DEFAULT_LIMITS

    store = backend.store(limits=DEFAULT_LIMITS.lowered(project_bytes=15_000))
    backend.record(store, "a.bin", os.urandom(10_000))
    with pytest.raises(QuotaExceeded):
        backend.record(store, "b.bin", os.urandom(10_000))
    assert store.usage().objects == 1


def test_card_quota(backend: Backend):
    from cards.policy import DEFAULT_LIMITS

    store = backend.store(limits=DEFAULT_LIMITS.lowered(cards_per_project=1))
    backend.record(store, "a.bin", b"abc")
    with pytest.raises(QuotaExceeded):
        backend.record(store, "a.bin", query_fingerprint=fingerprint("second"))


def test_index_status_update_re_decides_after_a_concurrent_write(backend: Backend):
    store = backend.store()
    recorded = backend.record(store, "a.bin", b"abc")
    exp = recorded.card.experiment_id
    other = backend.other_host()
    seen: list[IndexState] = []

    def decide(card):  # another host writes the card between our read and our write
        seen.append(card.index.state)
        if len(seen) == 1 and backend.host is not None:  # locally, the lock serialises them
            other.update_index_status(exp, lambda _: IndexStatus(state=IndexState.FAILED))
        return IndexStatus(state=IndexState.PENDING)

    updated = store.update_index_status(exp, decide)
    assert updated.index.state is IndexState.PENDING
    if backend.host is not None:  # the lost write was decided again, on the new card
        assert seen == [IndexState.DISABLED, IndexState.FAILED]
    else:
        assert seen == [IndexState.DISABLED]
    assert store.load_card(exp).index.state is IndexState.PENDING


def test_read_cards_skips_unchanged_stamps(backend: Backend):
    store = backend.store()
    backend.record(store, "a.bin", b"abc")
    backend.record(store, "b.bin", b"def")
    first = list(store.read_cards())
    assert [read.card is not None for read in first] == [True, True]
    stamps = {read.name: read.stamp for read in first if read.stamp is not None}
    assert [read.card for read in store.read_cards(stamps)] == [None, None]
    seen_elsewhere = backend.record(backend.other_host(), "c.bin", b"ghi")
    changed = [read.card for read in store.read_cards(stamps) if read.card is not None]
    assert changed == [seen_elsewhere.card]


def test_slice_through_locate(backend: Backend):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from cas.slicing import SliceRequest, read_slice

    table = pa.table({"k": list(range(1000)), "v": [f"row{i}" for i in range(1000)]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    recorded = backend.record(backend.store(), "t.parquet", sink.getvalue())
    located = backend.other_host().locate(recorded.card.experiment_id)
    result = read_slice(located.source, SliceRequest(columns=("v",), where="k = 5"))
    assert result.table.column("v").to_pylist() == ["row5"]


def test_has_object(backend: Backend):
    store = backend.store()
    recorded = backend.record(store, "a.bin", b"abc")
    assert backend.other_host().has_object(recorded.card.artifact.artifact_id)
    assert not store.has_object("art_" + "a" * 52)


def test_fsck_reports_then_removes_staging_leftovers(backend: Backend):
    store = backend.store()
    recorded = backend.record(store, "a.bin", os.urandom(1000))
    if backend.host is None:
        project = backend.ws.project_dir(store)  # type: ignore[arg-type]
        (project / "tmp").mkdir(exist_ok=True)
        leftover = project / "tmp" / "stage-object-1-00.tmp"
        leftover.write_bytes(b"partial")
        os.utime(leftover, (0, 0))
    else:
        s3 = raw_client(backend.host.endpoint)
        root = store.objects.keys.root  # type: ignore[attr-defined]
        s3.put_object(Bucket=backend.host.bucket, Key=root + "tmp/stage-crashed", Body=b"x")
        s3.create_multipart_upload(Bucket=backend.host.bucket, Key=root + "objects/zz/art_x")
        store = backend.host.store(PROJECT, settings={"stale_after_s": 0})
    report = fsck(store)
    assert report.objects == 1 and report.cards == 1 and report.stale_stages
    repaired = fsck(store, repair=True)
    assert repaired.removed_stages and repaired.ok
    assert fsck(store).ok
    assert backend.other_host().resolve(recorded.card.experiment_id).card == recorded.card


def test_fsck_finds_and_quarantines_a_corrupt_object(backend: Backend):
    store = backend.store()
    data = os.urandom(5000)
    recorded = backend.record(store, "a.bin", data)
    backend.corrupt(store, recorded.card.artifact.artifact_id, len(data))
    report = fsck(store)
    assert report.invalid_objects == [recorded.card.artifact.artifact_id]
    assert report.dangling_cards == [recorded.card.experiment_id]
    repaired = fsck(store, repair=True)
    assert repaired.quarantined == [recorded.card.artifact.artifact_id]
    healed = backend.record(backend.store(), "a.bin")
    assert healed.card.artifact.artifact_id == recorded.card.artifact.artifact_id
    assert fsck(store).ok


def test_dedup_heals_a_corrupt_object_that_kept_its_label(backend: Backend):
    store = backend.store()
    data = os.urandom(30_000)
    recorded = backend.record(store, "a.bin", data)
    backend.corrupt(store, recorded.card.artifact.artifact_id, len(data))
    again = backend.record(backend.store(), "a.bin", query_fingerprint=fingerprint("again"))
    assert not again.deduplicated
    assert any("healed" in warning for warning in again.warnings)
    fresh = backend.other_host(cache=VerificationCache())
    assert Path(fresh.resolve(recorded.card.experiment_id).path).read_bytes() == data
    assert fsck(store).ok


def test_card_update_on_a_second_host(backend: Backend):
    store = backend.store()
    recorded = backend.record(store, "a.bin", b"abc" * 100)
    other = backend.other_host()
    retitled = backend.record(other, "a.bin", title="Retitled elsewhere")
    assert retitled.card_updated and retitled.deduplicated
    assert store.load_card(recorded.card.experiment_id).title == "Retitled elsewhere"
    status = IndexStatus(state=IndexState.PENDING)
    assert store.update_index_status(recorded.card.experiment_id, lambda _: status).index == status


def _local_elsewhere(backend: Backend, **kwargs: object) -> Store:
    from cas import ProjectStore

    return ProjectStore(str(backend.ws.root / "elsewhere"), PROJECT, **kwargs)  # type: ignore[arg-type]


def test_migrate_copies_between_any_two_backends_and_heals_a_corrupt_copy(backend: Backend):
    from cas import IntegrityMode, migrate

    data = os.urandom(300_000)
    source = backend.store(integrity=IntegrityMode.ALWAYS)
    recorded = backend.record(source, "a.bin", data)
    backend.record(source, "b.bin", b"small bytes")
    into = _local_elsewhere(backend)
    first = migrate(source, into)
    assert first.ok and first.cards_created == 2 and first.objects_sent == 2
    assert Path(into.resolve(recorded.card.experiment_id).path).read_bytes() == data
    again = migrate(source, into)
    assert again.ok and again.objects_sent == 0 and again.cards_present == 2
    # Out of the local copy and back into this backend: a corrupt stored copy is replaced.
    backend.corrupt(source, recorded.card.artifact.artifact_id, len(data))
    back = migrate(_local_elsewhere(backend, integrity=IntegrityMode.ALWAYS), backend.store())
    assert back.ok and back.objects_sent == 1 and back.objects_present == 1
    assert back.cards_present == 2
    fresh = backend.other_host(cache=VerificationCache(), integrity=IntegrityMode.ALWAYS)
    assert Path(fresh.resolve(recorded.card.experiment_id).path).read_bytes() == data
    assert fsck(backend.store()).ok


def test_fsck_reports_a_bad_card_and_a_stray_key_on_every_backend(backend: Backend):
    store = backend.store()
    recorded = backend.record(store, "a.bin", os.urandom(2000))
    bad_card = f"cards/exp_{'a' * 52}.json"
    stray = "objects/99/not-an-object"  # never a shard: shards are base32 (a-z, 2-7)
    if backend.host is None:
        project = backend.ws.project_dir(store)  # type: ignore[arg-type]
        (project / bad_card).write_text("{}")
        (project / "objects" / "99").mkdir()
        (project / stray).write_bytes(b"x")
    else:
        s3 = raw_client(backend.host.endpoint)
        root = store.objects.keys.root  # type: ignore[attr-defined]
        s3.put_object(Bucket=backend.host.bucket, Key=root + bad_card, Body=b"{}")
        s3.put_object(Bucket=backend.host.bucket, Key=root + stray, Body=b"x")
    report = fsck(store, repair=True)
    assert [problem.name for problem in report.invalid_cards] == [bad_card.removeprefix("cards/")]
    assert report.unknown_entries == [stray] and report.cards == 1 and report.objects == 1
    assert report.quarantined == [] and report.orphans == [] and not report.ok
    assert backend.other_host().resolve(recorded.card.experiment_id).card == recorded.card
