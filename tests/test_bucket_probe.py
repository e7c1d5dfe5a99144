"""What the store learns of a bucket's service before its first write, and what it does with it.

moto as it is, moto with a real service's quirks (`bucket_helpers.Quirks`), and a service with
no conditional replace at all. The quirky double's three behaviours are asserted first, so the
probe is measured against a double known to misbehave as the real service did.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import pytest
from bucket_helpers import (
    BLIND,
    CARELESS,
    Host,
    bucket,
    keys_below,
    open_uploads,
    quirky_bucket,
    race,
    raw_client,
    s3_endpoint,
)
from conftest import PROJECT, SESSION, Workspace, make_metadata

from cards import IndexState, IndexStatus, artifact_id_for_digest
from cards.errors import BackendUnsupported, StoreIOError
from cas import Provenance, fsck
from cas._bucket import _probe, _publish

__all__ = ["bucket", "quirky_bucket", "s3_endpoint"]  # fixtures, imported for pytest


def _record(ws: Workspace, store, name: str, data: bytes | None = None, **meta: object):  # type: ignore[no-untyped-def]
    if data is not None:
        ws.export(name, data)
    provenance = Provenance(session_id=SESSION)
    return store.record(str(ws.rlm_root), provenance, make_metadata(**meta), name)


def test_the_quirky_double_misbehaves_as_the_real_service_did(s3_endpoint: str, quirky_bucket: str):
    s3 = raw_client(s3_endpoint)
    etag = s3.put_object(Bucket=quirky_bucket, Key="k", Body=b"one")["ETag"]
    assert etag.startswith('"')
    with pytest.raises(s3.exceptions.ClientError, match="PreconditionFailed"):
        s3.put_object(Bucket=quirky_bucket, Key="k", Body=b"two", IfMatch=etag)
    s3.put_object(Bucket=quirky_bucket, Key="k", Body=b"two", IfMatch=etag.strip('"'))
    upload = s3.create_multipart_upload(Bucket=quirky_bucket, Key="k")["UploadId"]
    part = s3.upload_part(Bucket=quirky_bucket, Key="k", UploadId=upload, PartNumber=1, Body=b"3")
    s3.complete_multipart_upload(
        Bucket=quirky_bucket, Key="k", UploadId=upload, IfNoneMatch="*",
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )  # fmt: skip
    assert s3.get_object(Bucket=quirky_bucket, Key="k")["Body"].read() == b"3"
    wrong = "A" * 43 + "="
    s3.put_object(Bucket=quirky_bucket, Key="w", Body=b"body", ChecksumSHA256=wrong)
    assert s3.get_object(Bucket=quirky_bucket, Key="w")["Body"].read() == b"body"


def test_probe_reports_moto_and_the_quirky_double(
    ws: Workspace, s3_endpoint: str, bucket: str, quirky_bucket: str
):
    plain = Host(s3_endpoint, bucket, ws.root / "a").store(PROJECT).capabilities()
    assert (plain.create_if_absent, plain.complete_if_absent) == (True, True)
    assert (plain.replace_etag, plain.checksums_enforced) == ("quoted", False)
    quirky = Host(s3_endpoint, quirky_bucket, ws.root / "b").store(PROJECT).capabilities()
    assert (quirky.create_if_absent, quirky.complete_if_absent) == (True, False)
    assert (quirky.replace_etag, quirky.checksums_enforced) == ("unquoted", False)
    for name in (bucket, quirky_bucket):  # the probe's scratch keys are gone
        assert keys_below(s3_endpoint, name) == {}


def test_capabilities_are_remembered_per_bucket_and_refreshed_on_a_surprise(
    ws: Workspace, s3_endpoint: str, quirky_bucket: str
):
    host = Host(s3_endpoint, quirky_bucket, ws.root / "h")
    store = host.store(PROJECT)
    recorded = _record(ws, store, "a.bin", b"abc" * 50)
    cache_root = host.settings().cache_root
    remembered = _probe.cached(cache_root, s3_endpoint, quirky_bucket)
    assert remembered is not None and remembered.replace_etag == "unquoted"
    # A stale memory (as if the service changed): the first update meets a 412 on the version
    # it holds, probes again, and succeeds instead of retrying as if it had lost a race.
    wrong = _probe.Capabilities(True, False, "quoted", False, "then")
    _probe._KNOWN[(s3_endpoint, quirky_bucket)] = wrong
    status = IndexStatus(state=IndexState.PENDING)
    assert store.update_index_status(recorded.card.experiment_id, lambda _: status).index == status
    again = _probe.cached(cache_root, s3_endpoint, quirky_bucket)
    assert again is not None and again.replace_etag == "unquoted" and again.probed_at != "then"


def test_no_conditional_replace_refuses_card_updates_and_loses_nothing(
    ws: Workspace, s3_endpoint: str
):
    name = f"{BLIND}{secrets.token_hex(6)}"
    raw_client(s3_endpoint).create_bucket(Bucket=name)
    store = Host(s3_endpoint, name, ws.root / "h").store(PROJECT)
    recorded = _record(ws, store, "a.bin", b"abc" * 50)  # a new card needs only a create
    assert store.capabilities().replace_etag is None
    with pytest.raises(BackendUnsupported) as refused:
        _record(ws, store, "a.bin", title="A new title")
    assert refused.value.capability == "replace_if_version"
    assert "If-Match" in refused.value.message
    exp = recorded.card.experiment_id
    with pytest.raises(BackendUnsupported):
        store.update_index_status(exp, lambda _: IndexStatus(state=IndexState.PENDING))
    assert store.load_card(exp) == recorded.card


def test_no_conditional_create_refuses_records_and_writes_no_object(
    ws: Workspace, s3_endpoint: str
):
    name = f"{CARELESS}{secrets.token_hex(6)}"
    raw_client(s3_endpoint).create_bucket(Bucket=name)
    store = Host(s3_endpoint, name, ws.root / "h").store(PROJECT)
    with pytest.raises(BackendUnsupported) as refused:
        _record(ws, store, "a.bin", b"abc" * 50)
    assert refused.value.capability == "create_if_absent"
    assert keys_below(s3_endpoint, name) == {}  # the probe's keys are gone, nothing else written


@pytest.mark.parametrize("content", [b"", b"not json", b"\x00" * 5000, b'{"create_if_absent": 1}'])
def test_a_damaged_capabilities_file_means_probing_again(
    ws: Workspace, s3_endpoint: str, quirky_bucket: str, content: bytes
):
    host = Host(s3_endpoint, quirky_bucket, ws.root / "h")
    cache_root = host.settings().cache_root
    path = Path(_probe._path(cache_root, (s3_endpoint, quirky_bucket)))
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    _probe._KNOWN.pop((s3_endpoint, quirky_bucket), None)
    assert host.store(PROJECT).capabilities().replace_etag == "unquoted"


def test_a_crashed_hosts_claim_is_taken_over_once_stale(
    ws: Workspace, s3_endpoint: str, quirky_bucket: str, monkeypatch: pytest.MonkeyPatch
):
    data = os.urandom(9 << 20)  # multipart: completion is where the claim is taken
    artifact_id = artifact_id_for_digest(hashlib.sha256(data).digest())
    store = Host(s3_endpoint, quirky_bucket, ws.root / "h").store(PROJECT)
    claim = store.objects.keys.claim(store.objects.keys.object(artifact_id))
    raw_client(s3_endpoint).put_object(Bucket=quirky_bucket, Key=claim, Body=b"")
    monkeypatch.setattr(_publish, "CLAIM_WAIT_S", 0.0)
    with pytest.raises(StoreIOError, match="another host is still completing") as waited:
        _record(ws, store, "a.bin", data)
    assert waited.value.retryable
    assert open_uploads(s3_endpoint, quirky_bucket) == []
    assert not [k for k in keys_below(s3_endpoint, quirky_bucket, store.objects.keys.objects)
                if not k.endswith(".chunks")]  # fmt: skip
    monkeypatch.setattr(_publish, "CLAIM_STALE_S", -1)  # as if its holder died long ago
    recorded = _record(ws, store, "a.bin")
    assert not recorded.deduplicated
    assert keys_below(s3_endpoint, quirky_bucket, store.objects.keys.tmp) == {}


@pytest.mark.parametrize(
    "mib", [pytest.param(17, id="17MiB"), pytest.param(100, id="100MiB", marks=pytest.mark.slow)]
)
def test_hosts_racing_over_unconditional_completion_store_once_and_say_so(
    ws: Workspace, s3_endpoint: str, quirky_bucket: str, mib: int
):
    data = os.urandom(mib << 20)
    ws.export("same.bin", data)
    hosts = [Host(s3_endpoint, quirky_bucket, ws.root / f"host{i}") for i in range(2)]
    outcomes = race(ws, hosts, "same.bin")
    assert sorted(o["deduplicated"] for o in outcomes) == [False, True]
    artifact_id = artifact_id_for_digest(hashlib.sha256(data).digest())
    store = hosts[0].store(PROJECT, settings={"stale_after_s": 0})
    objects = [
        key for key in keys_below(s3_endpoint, quirky_bucket, store.objects.keys.objects)
        if not key.endswith(".chunks")
    ]  # fmt: skip
    assert objects == [store.objects.keys.object(artifact_id)]
    assert keys_below(s3_endpoint, quirky_bucket, store.objects.keys.tmp) == {}  # no claim left
    assert fsck(store).ok
