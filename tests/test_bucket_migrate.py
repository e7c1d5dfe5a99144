"""`artmem migrate --to s3`: a local store copied into its bucket, proven, idempotent, resumable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bucket_helpers import Host, bucket, keys_below, s3_endpoint
from conftest import make_metadata
from host_helpers import export, write_config

import cas._migrate as migrate_module
from cards import ProjectId
from cas import BucketStore, IntegrityMode, ProjectStore, Provenance, migrate
from cas._layout import ProjectLayout
from harness_plugin import build_store
from harness_plugin.config import load_config

__all__ = ["bucket", "s3_endpoint"]  # fixtures, imported for pytest

ROOT = Path(__file__).parent.parent
_MAIN = "import sys; from harness_plugin.cli import main; sys.exit(main())"
PROJECT = "trial-analysis"
BIG = 9 << 20  # over one 8 MiB part: a multipart upload


def _storage(endpoint: str, bucket_name: str) -> str:
    return (
        f'[storage]\nbackend = "s3"\nbucket = "{bucket_name}"\nprefix = "lab"\n'
        f'endpoint_url = "{endpoint}"\nregion = "us-east-1"\n'
    )


def _artmem(config: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARTMEM_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _MAIN, *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _record_locally(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, Path, list[str]]:
    """A local store holding `files`, recorded through the CLI with the local backend."""
    config, project = write_config(tmp_path / "local")
    ids = []
    for name, data in files.items():
        export(tmp_path / "local", name, data)
        done = _artmem(
            config, project, "record", "--json", "--session", "s1", "--title", f"Result {name}",
            "--summary", "A result.", "--query-fingerprint", "0" * 64, "--source", "warehouse",
            "--source-version", "v1", name,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        ids.append(json.loads(done.stdout)["experiment_id"])
    return config, project, ids


def _with_bucket(config: Path, endpoint: str, bucket_name: str) -> Path:
    """The same configuration, now with the bucket as its storage."""
    text = config.read_text(encoding="utf-8") + "\n" + _storage(endpoint, bucket_name)
    moved = config.with_name("artmem-s3.toml")
    moved.write_text(text, encoding="utf-8")
    return moved


def test_migrate_copies_every_card_and_object_and_a_second_run_sends_nothing(
    tmp_path: Path, s3_endpoint: str, bucket: str
):
    files = {"a.bin": os.urandom(BIG), "b.csv": b"x,y\n1,2\n", "c.bin": b"same"}
    local_config, project, ids = _record_locally(tmp_path, files)
    config = _with_bucket(local_config, s3_endpoint, bucket)
    first = _artmem(config, project, "migrate", "--to", "s3", "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads(first.stdout)
    assert report["cards_created"] == 3 and report["objects_sent"] == 3
    assert report["bytes_sent"] == sum(len(d) for d in files.values()) and report["ok"]
    again = json.loads(_artmem(config, project, "migrate", "--to", "s3", "--json").stdout)
    assert again["objects_sent"] == 0 and again["objects_present"] == 3
    assert again["cards_created"] == 0 and again["cards_present"] == 3 and again["ok"]
    # Another host (its own state root, no local store) resolves every result from the bucket.
    other = build_store(load_config(str(config)), PROJECT)
    assert isinstance(other, BucketStore)
    by_title = {f"Result {name}": data for name, data in files.items()}
    for exp in ids:
        resolved = other.resolve(exp)
        assert Path(resolved.path).read_bytes() == by_title[resolved.card.title]


def test_an_interrupted_migration_resumes_and_never_leaves_a_card_without_its_object(
    tmp_path: Path, s3_endpoint: str, bucket: str, monkeypatch
):
    files = {f"r{i}.bin": os.urandom(1024 + i) for i in range(4)}
    local_config, _, _ = _record_locally(tmp_path, files)
    config = load_config(str(_with_bucket(local_config, s3_endpoint, bucket)))
    target = build_store(config, PROJECT)
    assert isinstance(target, BucketStore)
    local = ProjectStore(
        config.artifact_root, PROJECT, integrity=IntegrityMode.ALWAYS, read_only=True
    )
    real, calls = migrate_module._copy_card, []

    def dies_at_the_third_card(cards, card, report):
        calls.append(card.experiment_id)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the operator's ^C, between an object and its card
        real(cards, card, report)

    monkeypatch.setattr(migrate_module, "_copy_card", dies_at_the_third_card)
    with pytest.raises(KeyboardInterrupt):
        migrate(local, target)
    keys = keys_below(s3_endpoint, bucket, target.objects.keys.root)
    cards = [k for k in keys if "/cards/" in k]
    objects = [k for k in keys if "/objects/" in k and not k.endswith(".chunks")]
    assert len(cards) == 2 and len(objects) == 3  # the third object went first: no card yet
    monkeypatch.setattr(migrate_module, "_copy_card", real)
    resumed = migrate(local, target)
    assert resumed.ok and resumed.cards_created == 2 and resumed.cards_present == 2
    assert resumed.objects_present == 3 and resumed.objects_sent == 1


def test_a_corrupt_local_object_is_not_migrated_and_says_so(
    tmp_path: Path, s3_endpoint: str, bucket: str
):
    local_config, project, (good, bad) = _record_locally(
        tmp_path, {"good.bin": b"good bytes", "bad.bin": b"bytes to flip"}
    )
    config = load_config(str(local_config))
    layout = ProjectLayout.for_project(ProjectId(PROJECT))
    card = ProjectStore(config.artifact_root, PROJECT).load_card(bad)
    path = Path(config.artifact_root, *layout.root, *layout.object_path(card.typed_artifact_id))
    path.chmod(0o600)
    path.write_bytes(b"bytes to flop")  # same size, other bytes, no verification record used
    done = _artmem(_with_bucket(local_config, s3_endpoint, bucket), project, "migrate",
                   "--to", "s3", "--json")  # fmt: skip
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["cards_created"] == 1 and report["objects_sent"] == 1
    assert [item["code"] for item in report["skipped"]] == ["cas.integrity"]
    keys = keys_below(s3_endpoint, bucket)
    assert not any(bad in key for key in keys) and any(good in key for key in keys)


def test_a_card_the_bucket_holds_otherwise_is_reported_never_overwritten(
    tmp_path: Path, s3_endpoint: str, bucket: str
):
    local_config, project, (exp,) = _record_locally(tmp_path, {"a.csv": b"k\n1\n"})
    config = _with_bucket(local_config, s3_endpoint, bucket)
    assert _artmem(config, project, "migrate", "--to", "s3").returncode == 0
    host = Host(s3_endpoint, bucket, tmp_path / "host-b")
    retitled = host.store(PROJECT)
    export(tmp_path / "local", "a2.csv", b"k\n1\n")
    retitled.record(
        str(tmp_path / "local" / "rlm"), Provenance(session_id="s1"),
        make_metadata(title="Renamed in the bucket", source="warehouse", source_version="v1",
                      query_fingerprint="0" * 64),
        "a2.csv",
    )  # fmt: skip
    done = _artmem(config, project, "migrate", "--to", "s3", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["cards_conflicting"] == [exp]
    assert retitled.load_card(exp).title == "Renamed in the bucket"


def test_migrate_needs_a_bucket_in_the_configuration(tmp_path: Path):
    config, project = write_config(tmp_path)
    done = _artmem(config, project, "migrate", "--to", "s3", "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["code"] == "input.invalid"
