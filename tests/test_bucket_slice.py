"""Slices of a bucket store's objects fetch only the chunks they touch, each proven first.

Host A records; host B, with its own state root, has no local copy, so its slices read the
bucket by ranged GETs until a resolve leaves it one. The moto server counts the body bytes it
sends per key (`bucket_helpers.ServedBytes`): what the slice's child fetched, whichever process
it was.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from bucket_helpers import Host, bucket, raw_client, s3_endpoint
from conftest import PROJECT, SESSION, Workspace, make_metadata

from cards.errors import IntegrityError, ObjectMissing
from cas import Provenance
from fsedge import CHUNK_BYTES

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from cas.slicing import SliceRequest, describe, export_slice, read_slice  # noqa: E402
from cas.slicing._reader import load_manifest, verified_object  # noqa: E402

__all__ = ["bucket", "s3_endpoint"]  # fixtures, imported for pytest

PARQUET = "application/vnd.apache.parquet"
GROUP_ROWS = 4096
GROUPS = 8
# Row group 4 (k 16384-20479) alone holds these rows: statistics prune every other group.
NARROW = SliceRequest(columns=("k", "n"), where="k >= 17000 and k < 17100")


def _table_bytes() -> bytes:
    """~34 MiB of Parquet: 8 row groups of ~4.2 MiB (incompressible payload), k sorted."""
    rows = GROUP_ROWS * GROUPS
    table = pa.table(
        {
            "k": pa.array(range(rows), pa.int64()),
            "n": pa.array([i % 97 for i in range(rows)], pa.int32()),
            "payload": pa.array([os.urandom(1024) for _ in range(rows)], pa.binary()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=GROUP_ROWS, compression="none")
    return sink.getvalue()


@pytest.fixture(scope="module")
def table_bytes() -> bytes:
    return _table_bytes()


class Hosts:
    """A local store and two bucket hosts over one bucket, each holding the same table."""

    def __init__(self, ws: Workspace, endpoint: str, bucket: str, data: bytes) -> None:
        self.ws, self.endpoint, self.bucket = ws, endpoint, bucket
        ws.export("t.parquet", data)
        self.local = ws.store()
        self.local_exp = ws.record(self.local, "t.parquet").card.experiment_id
        self.a = Host(endpoint, bucket, ws.root / "host-a").store(PROJECT)
        meta = make_metadata()
        card = self.a.record(str(ws.rlm_root), Provenance(session_id=SESSION), meta, "t.parquet")
        self.card = card.card
        self.key = self.a.objects.keys.object(self.card.typed_artifact_id)

    def host(self, name: str = "host-b"):  # type: ignore[no-untyped-def]
        return Host(self.endpoint, self.bucket, self.ws.root / name).store(PROJECT)

    def served(self) -> int:
        from bucket_helpers import SERVED

        assert SERVED is not None
        return SERVED.of(self.bucket, self.key)

    def replace_object(self, data: bytes) -> None:
        raw_client(self.endpoint).put_object(Bucket=self.bucket, Key=self.key, Body=data)


@pytest.fixture
def hosts(ws: Workspace, s3_endpoint: str, bucket: str, table_bytes: bytes) -> Hosts:
    return Hosts(ws, s3_endpoint, bucket, table_bytes)


def _flip(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :]


def test_a_slice_fetches_only_the_chunks_it_needs_and_matches_the_local_backend(
    hosts: Hosts, table_bytes: bytes
):
    size = len(table_bytes)
    assert size > 7 * CHUNK_BYTES
    expected = read_slice(hosts.local.locate(hosts.local_exp).source, NARROW)
    assert expected.rows == 100

    located = hosts.host().locate(hosts.card.experiment_id)
    assert located.source.remote is not None and not Path(located.source.path).exists()
    before = hosts.served()
    result = read_slice(located.source, NARROW)
    fetched = hosts.served() - before

    assert result.table.equals(expected.table)
    assert 0 < fetched < size / 2  # the footer's chunk and row group 4's, not the file
    assert fetched == result.bytes_read and fetched % CHUNK_BYTES in (0, size % CHUNK_BYTES)
    assert result.chunks_verified == -(-fetched // CHUNK_BYTES) >= 2  # each proven once


def test_every_reader_of_a_remote_source_agrees_with_the_local_one(hosts: Hosts, tmp_path: Path):
    local = hosts.local.locate(hosts.local_exp).source
    remote = hosts.host().locate(hosts.card.experiment_id).source
    assert describe(remote).num_rows == describe(local).num_rows == GROUP_ROWS * GROUPS
    wide = SliceRequest(where="n = 3", columns=("k",), limit=50)
    assert read_slice(remote, wide).table.equals(read_slice(local, wide).table)
    out = tmp_path / "rows.parquet"
    export_slice(remote, NARROW, str(out), "parquet")
    expected = read_slice(local, NARROW).table
    assert pq.read_table(out).equals(expected)


def test_a_host_with_a_verified_copy_reads_it_and_fetches_nothing(hosts: Hosts):
    b = hosts.host()
    b.resolve(hosts.card.experiment_id)  # downloads and proves a local copy
    located = b.locate(hosts.card.experiment_id)
    assert located.source.remote is None and Path(located.source.path).exists()
    before = hosts.served()
    assert read_slice(located.source, NARROW).rows == 100
    assert hosts.served() == before


def test_a_corrupt_chunk_in_the_bucket_fails_and_an_untouched_one_is_never_read(
    hosts: Hosts, table_bytes: bytes
):
    footer_chunk = (len(table_bytes) - 1) // CHUNK_BYTES
    hosts.replace_object(_flip(table_bytes, footer_chunk * CHUNK_BYTES + 10))
    with pytest.raises(IntegrityError, match="chunk"):
        read_slice(hosts.host().locate(hosts.card.experiment_id).source, NARROW)

    hosts.replace_object(_flip(table_bytes, 100))  # chunk 0: row group 0, pruned
    result = read_slice(hosts.host("host-c").locate(hosts.card.experiment_id).source, NARROW)
    assert result.rows == 100  # what was read was proven; the damage lies elsewhere
    with pytest.raises(IntegrityError, match="SHA-256"):
        hosts.host("host-d").resolve(hosts.card.experiment_id)


def test_an_object_replaced_after_it_was_located_fails_cleanly(hosts: Hosts, table_bytes: bytes):
    located = hosts.host().locate(hosts.card.experiment_id)
    hosts.replace_object(_flip(table_bytes, 5))  # same size, another version (ETag)
    with pytest.raises(IntegrityError, match="changed"):
        read_slice(located.source, NARROW)


def test_an_object_replaced_between_two_reads_fails_the_second(hosts: Hosts, table_bytes: bytes):
    source = hosts.host().locate(hosts.card.experiment_id).source
    last = len(table_bytes) - 8
    with verified_object(source, load_manifest(source), max_read_bytes=1 << 24) as reader:
        assert bytes(reader.peek(last, 8))[4:] == b"PAR1"
        hosts.replace_object(_flip(table_bytes, 5))
        with pytest.raises(IntegrityError, match="changed"):
            reader.peek(0, 8)


def test_a_remote_object_gone_after_locate_is_missing(hosts: Hosts):
    located = hosts.host().locate(hosts.card.experiment_id)
    raw_client(hosts.endpoint).delete_object(Bucket=hosts.bucket, Key=hosts.key)
    with pytest.raises(ObjectMissing):
        read_slice(located.source, NARROW)
    with pytest.raises(ObjectMissing):
        hosts.host("host-c").locate(hosts.card.experiment_id)


def test_a_replaced_manifest_is_refused_at_locate(hosts: Hosts):
    manifest_key = hosts.a.objects.keys.chunks(hosts.card.typed_artifact_id)
    s3 = raw_client(hosts.endpoint)
    s3.put_object(Bucket=hosts.bucket, Key=manifest_key, Body=b'{"schema_version":1}')
    with pytest.raises(IntegrityError, match="manifest"):
        hosts.host().locate(hosts.card.experiment_id)
    s3.put_object(Bucket=hosts.bucket, Key=manifest_key, Body=b"x" * (1 << 16))
    with pytest.raises(IntegrityError, match="larger"):
        hosts.host().locate(hosts.card.experiment_id)
    s3.delete_object(Bucket=hosts.bucket, Key=manifest_key)
    with pytest.raises(IntegrityError, match="missing"):
        hosts.host().locate(hosts.card.experiment_id)
