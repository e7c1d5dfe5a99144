"""`artmem list` and `artmem export`, end to end through the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fingerprint
from host_helpers import write_config

from cards.errors import IntegrityError
from fsedge import write_new
from harness_plugin.cli._listing import _checked_chunks

EXE = shutil.which("artmem", path=str(Path(sys.executable).parent))


@pytest.fixture
def env(tmp_path):
    config, project_root = write_config(tmp_path)
    (tmp_path / "rlm" / "sessions" / "s1" / "exports").mkdir(parents=True)
    return tmp_path, {**os.environ, "ARTMEM_CONFIG": str(config)}, project_root


def _artmem(env, *argv: str) -> subprocess.CompletedProcess[str]:
    _, environ, cwd = env
    assert EXE is not None
    return subprocess.run(
        [EXE, *argv], capture_output=True, text=True, env=environ, cwd=cwd, timeout=60
    )


def _json(env, *argv: str) -> tuple[int, dict]:
    proc = _artmem(env, *argv, "--json")
    return proc.returncode, json.loads(proc.stdout)


def _record(env, name: str, data: bytes, title: str, *extra: str) -> dict:
    tmp, _, _ = env
    (tmp / "rlm" / "sessions" / "s1" / "exports" / name).write_bytes(data)
    code, out = _json(
        env,
        "record", "--session", "s1", name, "--title", title, "--summary", "A result.",
        "--query-fingerprint", fingerprint(name), "--source-version", "v1", *extra,
    )  # fmt: skip
    assert code == 0, out
    return out


@pytest.fixture
def three(env):
    """Three experiments, oldest first: two share a title."""
    first = _record(
        env, "a.csv", b"x,y\n1,2\n", "Dose curve",
        "--source", "warehouse", "--media-type", "text/csv", "--tag", "dose", "--tag", "pk",
    )  # fmt: skip
    second = _record(
        env, "b.bin", os.urandom(3000), "Cohort sizes",
        "--source", "lake", "--media-type", "application/octet-stream", "--tag", "dose",
    )  # fmt: skip
    third = _record(
        env, "c.csv", b"x,y\n3,4\n5,6\n", "Dose curve",
        "--source", "warehouse", "--media-type", "text/csv", "--tag", "pk",
    )  # fmt: skip
    return [first["experiment_id"], second["experiment_id"], third["experiment_id"]]


def _ids(env, *argv: str) -> list[str]:
    code, out = _json(env, "list", *argv)
    assert code == 0, out
    return [e["experiment_id"] for e in out["experiments"]]


def test_list_is_newest_first_with_filters(env, three):
    first, second, third = three
    code, out = _json(env, "list")
    assert code == 0 and out["skipped_cards"] == 0
    assert [e["experiment_id"] for e in out["experiments"]] == [third, second, first]
    newest = out["experiments"][0]
    assert newest["media_type"] == "text/csv" and newest["bytes"] == 12
    assert newest["available_locally"] is True and newest["created_at"].endswith("Z")
    assert _ids(env, "--tag", "dose") == [second, first]
    assert _ids(env, "--tag", "dose", "--tag", "pk") == [first]  # all tags must match
    assert _ids(env, "--tag", "DOSE") == [second, first]  # by casefold, as search matches tags
    assert _ids(env, "--source", "warehouse") == [third, first]
    assert _ids(env, "--media-type", "application/octet-stream") == [second]
    assert _ids(env, "--since", "2000-01-01") == [third, second, first]
    assert _ids(env, "--since", "2999-01-01") == []
    code, out = _json(env, "list", "--since", "yesterday")
    assert code == 1 and out["error"]["code"] == "input.invalid"


def test_list_for_people_tells_same_titles_apart(env, three):
    first, second, third = three
    proc = _artmem(env, "ls")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3
    assert third[4:16] in lines[0] and "'Dose curve' (newest)" in lines[0]
    assert "text/csv" in lines[0] and "12 B" in lines[0]
    assert second[4:16] in lines[1] and "'Cohort sizes'" in lines[1]
    assert "(newest)" not in lines[1]  # a unique title needs no mark
    assert first[4:16] in lines[2] and lines[2].endswith("'Dose curve'")


def test_list_shows_missing_bytes(env, three):
    first = three[0]
    code, resolved = _json(env, "resolve", first)
    os.unlink(resolved["path"])
    code, out = _json(env, "list", "--tag", "dose", "--tag", "pk")
    assert [e["available_locally"] for e in out["experiments"]] == [False]
    assert "[not available locally]" in _artmem(env, "list", "--tag", "pk").stdout


def test_export_round_trip_refuses_overwrite_and_forces(env):
    tmp, _, _ = env
    data = os.urandom(3 << 20)  # several 1 MiB chunks
    recorded = _record(env, "big.bin", data, "Big", "--source", "lake")
    dest = tmp / "out" / "copy.bin"
    dest.parent.mkdir()
    short = recorded["experiment_id"][:16]
    code, out = _json(env, "export", short, str(dest))
    assert code == 0, out
    assert out == {
        "experiment_id": recorded["experiment_id"],
        "path": str(dest),
        "bytes": len(data),
        "sha256": recorded["sha256"],
    }
    assert dest.read_bytes() == data

    dest.write_bytes(b"mine")
    code, out = _json(env, "export", recorded["experiment_id"], str(dest))
    assert code == 1 and out["error"]["code"] == "input.invalid"
    assert dest.read_bytes() == b"mine"

    proc = _artmem(env, "export", recorded["experiment_id"], str(dest), "--force")
    assert proc.returncode == 0, proc.stderr
    assert "exported" in proc.stdout
    assert dest.read_bytes() == data
    assert sorted(p.name for p in dest.parent.iterdir()) == ["copy.bin"]  # no temp left


def test_export_of_corrupt_object_fails_and_writes_nothing(env):
    tmp, _, _ = env
    recorded = _record(env, "r.bin", os.urandom(5000), "R", "--source", "lake")
    code, resolved = _json(env, "resolve", recorded["experiment_id"])
    path = Path(resolved["path"])
    path.chmod(0o600)
    corrupt = bytearray(path.read_bytes())
    corrupt[100] ^= 0xFF
    path.write_bytes(bytes(corrupt))
    dest = tmp / "out.bin"
    code, out = _json(env, "export", recorded["experiment_id"], str(dest))
    assert code == 1 and out["error"]["code"] == "cas.integrity"
    assert not dest.exists()
    assert [p.name for p in tmp.iterdir() if p.name.startswith(".")] == []


def test_bytes_that_change_while_copied_leave_no_file(tmp_path):
    source = tmp_path / "object"
    source.write_bytes(b"y" * ((1 << 20) + 5))
    expected = "0" * 64  # not the bytes' digest: as if they changed after verification
    dest = tmp_path / "out" / "copy.bin"
    dest.parent.mkdir()
    with pytest.raises(IntegrityError):
        write_new(str(dest), _checked_chunks(str(source), expected, (1 << 20) + 5))
    assert list(dest.parent.iterdir()) == []


@pytest.mark.parametrize("target", ["object", "card", "lock", "state", "symlinked parent"])
def test_export_force_never_replaces_anything_the_store_holds(env, target):
    # Issue 30: `export A <B's object path> --force` replaced B's object.
    tmp, _, _ = env
    a = _record(env, "a.bin", b"A" * 100, "A", "--source", "lake")
    b = _record(env, "b.bin", b"B" * 100, "B", "--source", "lake")
    code, resolved = _json(env, "resolve", b["experiment_id"])
    assert code == 0, resolved
    artifacts, state = tmp / "artifacts", tmp / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    (state / "keep.json").write_bytes(b"{}")
    link = tmp / "elsewhere"
    link.symlink_to(Path(resolved["path"]).parent)
    dest = {
        "object": Path(resolved["path"]),
        "card": next(p for p in artifacts.rglob("*") if p.is_file() and "cards" in p.parts),
        "lock": next(artifacts.rglob("lock")),
        "state": state / "keep.json",
        "symlinked parent": link / Path(resolved["path"]).name,
    }[target]
    held = {p: p.read_bytes() for p in (*artifacts.rglob("*"), *state.rglob("*")) if p.is_file()}
    code, out = _json(env, "export", a["experiment_id"], str(dest), "--force")
    assert code == 1 and out["error"]["code"] == "cas.path_rejected", out
    after = {p: p.read_bytes() for p in (*artifacts.rglob("*"), *state.rglob("*")) if p.is_file()}
    assert after == held
    code, resolved = _json(env, "resolve", b["experiment_id"])
    assert code == 0 and Path(resolved["path"]).read_bytes() == b"B" * 100


def test_a_destination_that_names_a_directory_is_refused_and_nothing_is_written(env):
    """`out/` for a directory that does not exist once wrote a file named `out`."""
    tmp, _, _ = env
    exp = _record(env, "d.csv", b"x,y\n1,2\n", "Dirs", "--source", "lab")["experiment_id"]
    existing = tmp / "existing"
    existing.mkdir()
    refused = [
        ("export", exp, str(tmp / "missing") + "/"),
        ("slice", exp, "--out", str(tmp / "missing") + "/"),
        ("slice", exp, "--out", str(tmp / "missing") + "/", "--format", "csv"),
        ("slice", exp, "--out", str(existing)),
        ("slice", exp, "--out", str(existing), "--format", "csv"),
        ("slice", exp, "--out", str(existing / ".")),
    ]
    for argv in refused:
        code, out = _json(env, *argv)
        assert code == 1 and out["error"]["code"] == "input.invalid", (argv, out)
        assert "directory" in out["error"]["message"], argv
    assert not (tmp / "missing").exists()
    assert list(existing.iterdir()) == []
    # A directory that exists keeps the experiment's name, as before.
    code, out = _json(env, "export", exp, str(existing) + "/")
    assert code == 0 and Path(out["path"]).parent == existing, out
