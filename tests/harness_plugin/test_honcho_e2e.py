"""Local first, Honcho behind: outages, sync, a crash after a remote commit, a bad key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fingerprint
from host_helpers import write_config

from harness_plugin.cli import main
from indexer.testing import FakeHoncho

KEY = "e2e-key-8d1f"
WORKER = str(Path(__file__).parent.parent / "_sync_worker.py")


@pytest.fixture
def fake():
    return FakeHoncho(api_key=KEY)


@pytest.fixture
def env(tmp_path, monkeypatch, fake):
    with fake.serve() as base_url:
        config, project_root = write_config(
            tmp_path,
            "[honcho]\nenabled = true\n"
            f'base_url = "{base_url}"\nworkspace_id = "artmem-dev"\n'
            'user_peer_id = "alice"\nassistant_peer_id = "artmem-assistant"\n'
            'api_key_env = "ARTMEM_TEST_HONCHO_KEY"\ntimeout_s = 2\ncreate_workspace = true\n',
        )
        monkeypatch.setenv("ARTMEM_CONFIG", str(config))
        monkeypatch.setenv("ARTMEM_TEST_HONCHO_KEY", KEY)
        monkeypatch.chdir(project_root)
        exports = tmp_path / "rlm" / "sessions" / "s1" / "exports"
        exports.mkdir(parents=True)
        yield tmp_path


def _cli(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _record(capsys, env, name: str, data: bytes):
    (env / "rlm" / "sessions" / "s1" / "exports" / name).write_bytes(data)
    return _cli(
        capsys,
        "record", "--session", "s1", name, "--title", f"Result {name}",
        "--summary", "Per-cohort response table.", "--query-fingerprint", fingerprint(name),
        "--source", "warehouse", "--source-version", "v1",
    )  # fmt: skip


def _states(capsys):
    _, status = _cli(capsys, "status")
    return status["projects"][0]["index_states"], status["honcho"]


def test_record_queues_and_sync_indexes_with_only_the_projection_sent(env, fake, capsys):
    code, recorded = _record(capsys, env, "a.parquet", b"PAR1 secret rows PAR1")
    assert code == 0 and recorded["honcho_queued"] and recorded["index_state"] == "queued"
    assert fake.requests == []  # nothing on the caller's path touched the network
    code, synced = _cli(capsys, "sync")
    assert code == 0 and synced["delivered"] == 1 and synced["pending"] == 0
    states, _ = _states(capsys)
    assert states == {"indexed": 1}
    sent = b"".join(r.raw_body for r in fake.requests)
    for forbidden in (b"secret rows", str(env).encode(), KEY.encode()):
        assert forbidden not in sent
    (message,) = fake.messages("artmem-dev")
    assert message.metadata["experiment_id"] == recorded["experiment_id"]


def test_honcho_down_then_back(env, fake, capsys):
    fake.down = True
    ids = [_record(capsys, env, f"r{n}.bin", os.urandom(100))[1]["experiment_id"] for n in range(3)]
    code, found = _cli(capsys, "search", "cohort response")
    assert code == 0 and len(found["hits"]) == 3  # local search works with Honcho down
    code, resolved = _cli(capsys, "resolve", ids[0])
    assert code == 0 and resolved["path"]
    code, synced = _cli(capsys, "sync", "--deadline", "1")
    assert code == 1 and synced["pending"] == 3 and synced["delivered"] == 0
    assert synced["last_error"] == "indexer.remote_unavailable"
    states, honcho = _states(capsys)
    assert states == {"queued": 3} and honcho["outbox"]["pending"] == 3
    fake.down = False
    code, synced = _cli(capsys, "sync")
    assert code == 0 and synced["pending"] == 0
    states, _ = _states(capsys)
    assert states == {"indexed": 3}
    delivered = [m.metadata["experiment_id"] for m in fake.messages("artmem-dev")]
    assert sorted(delivered) == sorted(ids)  # each exactly once


def test_a_crash_after_the_remote_commit_leaves_exactly_one_copy(env, fake, capsys):
    _, recorded = _record(capsys, env, "a.bin", b"data")
    proc = subprocess.run(
        [sys.executable, WORKER, "die-on-ack", "sync", "--json"],
        env={**os.environ},
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -9  # killed after Honcho committed, before the local ack
    assert len(fake.messages("artmem-dev")) == 1
    states, honcho = _states(capsys)
    assert honcho["outbox"]["pending"] == 1
    proc = subprocess.run(
        [sys.executable, WORKER, "normal", "sync", "--json"], capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout
    synced = json.loads(proc.stdout)
    assert synced["deduplicated"] == 1 and synced["pending"] == 0
    assert len(fake.messages("artmem-dev")) == 1
    states, _ = _states(capsys)
    assert states == {"indexed": 1}


def test_a_bad_key_opens_the_circuit_after_one_attempt(env, fake, capsys, monkeypatch):
    for n in range(3):
        _record(capsys, env, f"r{n}.bin", os.urandom(50))
    monkeypatch.setenv("ARTMEM_TEST_HONCHO_KEY", "not-the-key-3b7a")
    code, synced = _cli(capsys, "sync", "--deadline", "2")
    assert code == 1 and synced["circuit"] == "open"
    assert synced["last_error"] == "indexer.remote_unauthorized"
    assert len(fake.requests) == 1  # one 401, then the open circuit sent nothing more
    _, honcho = _states(capsys)
    assert honcho["circuit"] == "open" and honcho["last_error"] == "indexer.remote_unauthorized"
    everything = json.dumps(honcho) + "".join(
        p.read_text(errors="replace") for p in (env / "state").rglob("*") if p.is_file()
    )
    assert "not-the-key-3b7a" not in everything and KEY not in everything


def test_unset_key_variable_fails_at_start(env, capsys, monkeypatch):
    monkeypatch.delenv("ARTMEM_TEST_HONCHO_KEY")
    code, out = _record(capsys, env, "a.bin", b"x")
    assert code == 1 and out["error"]["code"] == "config.invalid"
    assert "ARTMEM_TEST_HONCHO_KEY" in out["error"]["message"]
    code, status = _cli(capsys, "status")  # status still works, and says what is wrong
    assert code == 0 and status["honcho"]["api_key_present"] is False


def test_two_syncs_on_one_state_root(env, fake, capsys):
    from indexer import Ownership

    _record(capsys, env, "a.bin", b"x")
    holder = Ownership(str(env / "state"))
    assert holder.acquire()
    try:
        code, out = _cli(capsys, "sync")
        assert code == 1 and out["error"]["code"] == "indexer.not_owner"
        assert fake.requests == []
    finally:
        holder.release()
