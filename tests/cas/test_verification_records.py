"""Persisted verification records: a repeat resolve in a new process needs no rehash, safely."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cards.errors import IntegrityError
from cas import IntegrityMode


def _recorded(ws, store, name="r.bin", size=5000):
    ws.export(name, os.urandom(size))
    card = ws.record(store, name).card
    obj = ws.project_dir(store) / "objects" / card.artifact.artifact_id[4:6]
    return card, obj / card.artifact.artifact_id, obj / (card.artifact.artifact_id + ".verified")


def test_a_record_proves_the_bytes_as_written_and_a_new_process_trusts_it(ws):
    card, _, record = _recorded(ws, ws.store())
    assert record.is_file() and oct(record.stat().st_mode & 0o777) == "0o600"  # at publish
    assert not ws.store().resolve(card.experiment_id).hashed  # a fresh cache: the record
    record.unlink()
    assert ws.store().resolve(card.experiment_id).hashed  # no record: hashed, recorded again
    assert record.is_file()
    again = ws.store().resolve(card.experiment_id)  # another fresh cache: as a new process
    assert not again.hashed
    assert ws.store(integrity=IntegrityMode.ALWAYS).resolve(card.experiment_id).hashed


def test_any_change_to_the_object_voids_its_record(ws):
    card, path, _ = _recorded(ws, ws.store())
    ws.store().resolve(card.experiment_id)
    st = path.stat()
    path.chmod(0o600)
    with open(path, "r+b") as handle:
        first = handle.read(1)
        handle.seek(0)
        handle.write(bytes([first[0] ^ 1]))
    path.chmod(0o400)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime as before; ctime not
    with pytest.raises(IntegrityError):
        ws.store().resolve(card.experiment_id)


@pytest.mark.parametrize(
    "forged",
    [
        b"",
        b"not json",
        b"[]",
        b'{"v": 1}',
        b'{"v": 2, "identity": [], "sha256": "", "verified_at": "2026-01-01T00:00:00+00:00"}',
    ],
)
def test_a_garbled_record_means_a_rehash(ws, forged):
    card, _, record = _recorded(ws, ws.store())
    ws.store().resolve(card.experiment_id)
    record.write_bytes(forged)
    assert ws.store().resolve(card.experiment_id).hashed


def test_a_record_for_other_bytes_is_not_trusted(ws):
    card, _, record = _recorded(ws, ws.store())
    ws.store().resolve(card.experiment_id)
    document = json.loads(record.read_bytes())
    document["sha256"] = "0" * 64
    record.write_text(json.dumps(document))
    assert ws.store().resolve(card.experiment_id).hashed


def test_records_are_not_objects(ws):
    from cas import fsck

    card, _, _ = _recorded(ws, ws.store())
    store = ws.store()
    store.resolve(card.experiment_id)
    assert store.usage().objects == 1
    report = fsck(store)
    assert report.ok and not report.unknown_entries


def test_a_second_cli_process_resolves_without_hashing(tmp_path):
    from host_helpers import write_config

    config, root = write_config(tmp_path)
    exports = tmp_path / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    (exports / "r.bin").write_bytes(os.urandom(100_000))
    artmem = str(Path(sys.executable).parent / "artmem")
    env = {**os.environ, "ARTMEM_CONFIG": str(config)}

    def run(*argv: str) -> dict:
        done = subprocess.run([artmem, *argv, "--json"], env=env, cwd=root, capture_output=True,
                              text=True, check=True)  # fmt: skip
        return json.loads(done.stdout)

    experiment = run("record", "--session", "s1", "r.bin", "--title", "T", "--summary", "S",
                     "--query-fingerprint", "a" * 64, "--source", "w",
                     "--source-version", "v1")["experiment_id"]  # fmt: skip
    first, second = (run("resolve", experiment) for _ in range(2))
    assert first["path"] == second["path"]
    # The second process reused the first one's proof: the same verification time.
    assert second["verified_at"] == first["verified_at"]
    assert len(list((tmp_path / "artifacts").rglob("*.verified"))) == 1
