"""`[storage]`: the backend choice, credentials kept out of the file, out of every output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bucket_helpers import ACCESS_KEY, SECRET_KEY, bucket, refused_port, s3_endpoint
from host_helpers import export, write_config

from cards import ConfigError, IndexState, IndexStatus
from cards.errors import StoreIOError
from cas import BucketStore, ProjectStore
from harness_plugin import build_store
from harness_plugin.config import load_config

__all__ = ["bucket", "s3_endpoint"]  # fixtures, imported for pytest

ROOT = Path(__file__).parent.parent
_MAIN = "import sys; from harness_plugin.cli import main; sys.exit(main())"
SECRET_VALUE = "very-" + "secret-value"  # assembled: the repository holds no secret shape


def test_the_default_backend_is_local(tmp_path: Path):
    config, _ = write_config(tmp_path)
    assert isinstance(build_store(load_config(str(config)), "trial-analysis"), ProjectStore)


def test_an_s3_backend_builds_a_bucket_store_with_its_cache_under_the_state_root(tmp_path: Path):
    config, _ = write_config(
        tmp_path,
        '[storage]\nbackend = "s3"\nbucket = "lab-artifacts"\nprefix = "artmem"\n'
        'endpoint_url = "http://127.0.0.1:9000"\nregion = "us-east-1"\n',
    )
    store = build_store(load_config(str(config)), "trial-analysis")
    assert isinstance(store, BucketStore)
    assert store.objects.settings.cache_root == str(tmp_path / "state" / "bucket-cache")
    assert store.objects.keys.root.startswith("artmem/projects/prj_")


@pytest.mark.parametrize(
    "line",
    [
        'aws_access_key_id = "' + "AKIA" + 'EXAMPLE"',
        'aws_secret_access_key = "' + SECRET_VALUE + '"',
        'session_token = "' + SECRET_VALUE + '"',
        'password = "' + SECRET_VALUE + '"',
    ],
)
def test_credentials_in_the_file_are_refused_clearly(tmp_path: Path, line: str):
    config, _ = write_config(tmp_path, f'[storage]\nbackend = "s3"\nbucket = "lab-x"\n{line}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(str(config))
    assert "standard AWS chain" in caught.value.message
    assert SECRET_VALUE not in caught.value.message
    assert "AKIA" + "EXAMPLE" not in caught.value.message


@pytest.mark.parametrize(
    "storage",
    [
        '[storage]\nbackend = "s3"\n',  # no bucket
        '[storage]\nbackend = "ftp"\nbucket = "lab-x"\n',
        '[storage]\nbackend = "s3"\nbucket = "Lab_X"\n',
        '[storage]\nbackend = "s3"\nbucket = "lab-x"\nendpoint_url = "http://u:p@host:9000"\n',
        '[storage]\nbackend = "s3"\nbucket = "lab-x"\nprefix = "/abs"\n',
    ],
)
def test_invalid_storage_sections_fail_at_start(tmp_path: Path, storage: str):
    config, _ = write_config(tmp_path, storage)
    with pytest.raises(ConfigError):
        load_config(str(config))


def _artmem(config: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARTMEM_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _MAIN, *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _storage(endpoint: str, bucket_name: str) -> str:
    return (
        f'[storage]\nbackend = "s3"\nbucket = "{bucket_name}"\nprefix = "lab"\n'
        f'endpoint_url = "{endpoint}"\nregion = "us-east-1"\n'
    )


def _record_csv(tmp_path: Path, config: Path, project: Path, data: bytes, title: str) -> str:
    """`artmem record` of `r.csv` holding `data`; its experiment id."""
    export(tmp_path, "r.csv", data)
    recorded = _artmem(
        config, project, "record", "--json", "--session", "s1", "--title", title,
        "--summary", "A table.", "--query-fingerprint", "0" * 64, "--source", "warehouse",
        "--source-version", "v1", "r.csv",
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    return str(json.loads(recorded.stdout)["experiment_id"])


def test_cli_records_searches_and_resolves_through_a_bucket(
    tmp_path: Path, s3_endpoint: str, bucket: str
):
    config, project = write_config(tmp_path, _storage(s3_endpoint, bucket))
    exp = _record_csv(tmp_path, config, project, b"a,b\n1,2\n", "Result table")
    found = _artmem(config, project, "search", "--json", "Result")
    assert exp in found.stdout
    resolved = _artmem(config, project, "resolve", "--json", exp)
    assert resolved.returncode == 0, resolved.stderr
    path = json.loads(resolved.stdout)["path"]
    assert path.startswith(str(tmp_path / "state" / "bucket-cache"))
    assert Path(path).read_bytes() == b"a,b\n1,2\n"
    status = _artmem(config, project, "status", "--json")
    caps = json.loads(status.stdout)["bucket_capabilities"]
    assert caps["create_if_absent"] and caps["replace_if_version"]
    assert caps["etag_form"] == "quoted" and caps["checksums_enforced"] is False
    human = _artmem(config, project, "status").stdout
    assert "bucket: conditional create, conditional completion" in human
    assert "checksums not enforced" in human


@pytest.mark.parametrize("failure", ["no-such-bucket", "unreachable"])
def test_credentials_never_appear_in_any_output(tmp_path: Path, s3_endpoint: str, failure: str):
    with refused_port() as port:  # held for the whole test: nothing else can listen on it
        endpoint = s3_endpoint if failure == "no-such-bucket" else f"http://127.0.0.1:{port}"
        config, project = write_config(tmp_path, _storage(endpoint, "artmem-missing-bucket"))
        export(tmp_path, "r.bin", b"abc")
        outputs = []
        for argv in (
            ("status",), ("status", "--json"), ("search", "x"), ("search", "--json", "x"),
            ("resolve", "--json", "exp_" + "a" * 52), ("fsck", "--json"),
        ):  # fmt: skip
            done = _artmem(config, project, *argv)
            outputs.append(done.stdout + done.stderr)
            assert done.returncode != 0, argv
    for output in outputs:
        assert SECRET_KEY not in output and ACCESS_KEY not in output
    assert any("cas.io" in output for output in outputs), outputs


def test_the_notebook_api_reads_a_bucket_store_and_writes_nothing_to_it(
    tmp_path: Path, s3_endpoint: str, bucket: str
):
    from bucket_helpers import keys_below

    from harness_plugin.notebook import open_store

    config, project = write_config(tmp_path, _storage(s3_endpoint, bucket))
    exp = _record_csv(tmp_path, config, project, b"k,v\n1,a\n2,b\n3,c\n", "Cohort table")
    before = keys_below(s3_endpoint, bucket)
    store = open_store(config=str(config), cwd=str(project))
    assert [hit.card.experiment_id for hit in store.search("cohort")] == [exp]
    shown = store.show(exp)
    assert shown.available_locally and shown.table is not None
    assert [field.name for field in shown.table.fields] == ["k", "v"]
    table = store.read_slice(exp, columns=["v"], where="k > 1")
    assert table.column("v").to_pylist() == ["b", "c"]
    assert Path(store.resolve(exp).path).read_bytes() == b"k,v\n1,a\n2,b\n3,c\n"
    assert keys_below(s3_endpoint, bucket) == before  # nothing written to the bucket
    with pytest.raises(StoreIOError, match="read-only"):
        store._store.update_index_status(exp, lambda _: IndexStatus(state=IndexState.PENDING))


def test_status_says_when_the_bucket_could_not_be_probed(
    tmp_path: Path, s3_endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch
):
    from harness_plugin._status import status_lines, status_view

    def denied(self: BucketStore, *, refresh: bool = False) -> None:
        raise StoreIOError("the bucket refused put (AccessDenied)")

    config, _ = write_config(tmp_path, _storage(s3_endpoint, bucket))
    monkeypatch.setattr(BucketStore, "capabilities", denied)
    view = status_view(load_config(str(config)), {})
    assert view.bucket_capabilities == {"unknown": "cas.io"}
    assert "bucket: capabilities unknown (cas.io)" in "\n".join(status_lines(view))
