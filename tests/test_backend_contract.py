"""The storage seam's contract (`cas._backend`), against every backend.

A local directory (`LocalBackend`), moto as it is, and moto with a real service's quirks
(`bucket_helpers.Quirks`: a quoted ETag refused in `If-Match`, multipart completion ignoring
`If-None-Match`): the same six operations must behave the same way on each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bucket_helpers import Host, bucket, quirky_bucket, s3_endpoint
from conftest import PROJECT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cards.errors import IntegrityError, ObjectMissing, PathEscape
from cas._backend import Backend
from cas._local_backend import LocalBackend

__all__ = ["bucket", "quirky_bucket", "s3_endpoint"]  # fixtures, imported for pytest

ROOT = Path(__file__).parent.parent


@pytest.fixture(params=["local", "s3", "s3-quirky"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "local":
        project = tmp_path / "project"
        project.mkdir()
        fd = os.open(project, os.O_RDONLY | os.O_DIRECTORY)
        try:
            yield LocalBackend(fd)
        finally:
            os.close(fd)
        return
    endpoint = request.getfixturevalue("s3_endpoint")
    name = request.getfixturevalue("bucket" if request.param == "s3" else "quirky_bucket")
    yield Host(endpoint, name, tmp_path / "state").store(PROJECT).objects.backend


def test_create_only_if_absent(backend: Backend):
    made = backend.create("cards/a.json", b"first")
    assert made is not None and made.size == 5
    assert backend.create("cards/a.json", b"second") is None
    got = backend.read("cards/a.json")
    assert got.data == b"first" and got.version == made.version
    entry = backend.stat("cards/a.json")
    assert entry is not None and (entry.size, entry.version) == (5, made.version)


def test_replace_only_over_the_version_read(backend: Backend):
    first = backend.create("cards/a.json", b"one")
    assert first is not None
    second = backend.replace("cards/a.json", b"two!", first.version)
    assert second is not None and second.version != first.version
    assert backend.replace("cards/a.json", b"lost", first.version) is None
    assert backend.read("cards/a.json").data == b"two!"
    assert backend.replace("cards/absent.json", b"x", first.version) is None
    assert backend.stat("cards/absent.json") is None


def test_ranged_reads_pinned_to_a_version(backend: Backend):
    data = os.urandom(100_000)
    made = backend.create("objects/ab/obj", data)
    assert made is not None
    assert backend.read("objects/ab/obj", 10, 20).data == data[10:20]
    assert backend.read("objects/ab/obj", 99_990, 200_000).data == data[99_990:]
    assert backend.read("objects/ab/obj", 5, 9, version=made.version).data == data[5:9]
    assert backend.read("objects/ab/obj", 5, version=made.version).data == data[5:]
    backend.delete("objects/ab/obj")
    backend.create("objects/ab/obj", bytes(100_000))
    with pytest.raises(IntegrityError):
        backend.read("objects/ab/obj", 0, 10, version=made.version)
    with pytest.raises(ObjectMissing):
        backend.read("objects/ab/absent")


def test_list_in_key_order_and_delete(backend: Backend):
    keys = ["cards/b.json", "cards/a/x", "cards/a.json", "objects/ab/y", "tmp/claim-1", "tmp/z"]
    for key in keys:
        assert backend.create(key, key.encode()) is not None
    assert [e.key for e in backend.list("cards/")] == ["cards/a.json", "cards/a/x", "cards/b.json"]
    assert [e.key for e in backend.list("tmp/claim-")] == ["tmp/claim-1"]
    assert [e.key for e in backend.list("")] == sorted(keys)
    assert [e.size for e in backend.list("objects/")] == [len("objects/ab/y")]
    backend.delete("tmp/z")
    backend.delete("tmp/z")  # absent: nothing to do
    assert backend.stat("tmp/z") is None
    assert [e.key for e in backend.list("tmp/")] == ["tmp/claim-1"]


@pytest.mark.parametrize("key", ["../x", "cards/../../x", "cards//x", "/cards/x", "cards/.", ""])
def test_keys_never_leave_the_project(backend: Backend, key: str):
    with pytest.raises(PathEscape):
        backend.create(key, b"x")
    with pytest.raises(PathEscape):
        backend.stat(key)


_KEYS = st.sampled_from(["cards/a.json", "cards/b.json", "objects/ab/c"])
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["create", "replace", "stale", "delete"]), _KEYS, st.binary(max_size=64)
    ),
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_local_backend_behaves_as_a_dict_of_versions(tmp_path: Path, ops):  # type: ignore[no-untyped-def]
    """Any sequence of writes leaves exactly what a dict with version checks would hold."""
    project = tmp_path / f"p{os.urandom(6).hex()}"
    project.mkdir()
    fd = os.open(project, os.O_RDONLY | os.O_DIRECTORY)
    try:
        backend = LocalBackend(fd)
        model: dict[str, tuple[bytes, str]] = {}
        retired: dict[str, str] = {}
        for op, key, body in ops:
            if op == "create":
                made = backend.create(key, body)
                assert (made is None) == (key in model)
                if made is not None:
                    model[key] = (body, made.version)
            elif op in ("replace", "stale"):
                version = model[key][1] if op == "replace" and key in model else retired.get(key)
                if version is None:
                    continue
                made = backend.replace(key, body, version)
                assert (made is not None) == (key in model and model[key][1] == version)
                if made is not None:
                    retired[key] = version
                    model[key] = (body, made.version)
            else:
                backend.delete(key)
                if key in model:
                    retired[key] = model.pop(key)[1]
            for name, (data, version) in model.items():
                got = backend.read(name)
                assert (got.data, got.version) == (data, version)
        assert {e.key for e in backend.list("")} == set(model)
    finally:
        os.close(fd)


_RACER = """
import os, sys
from cas._local_backend import LocalBackend
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
made = LocalBackend(fd).replace("cards/a.json", sys.argv[2].encode(), sys.argv[3])
print("won" if made is not None else "lost")
"""


def test_processes_racing_to_replace_one_version_let_exactly_one_win(tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    fd = os.open(project, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first = LocalBackend(fd).create("cards/a.json", b"v0")
        assert first is not None
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, str(project), f"body-{i}", first.version],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )  # fmt: skip
            for i in range(8)
        ]
        outcomes = [proc.communicate(timeout=60)[0].strip() for proc in procs]
        assert sorted(outcomes) == ["lost"] * 7 + ["won"]
        winner = outcomes.index("won")
        assert LocalBackend(fd).read("cards/a.json").data == f"body-{winner}".encode()
        assert [e.key for e in LocalBackend(fd).list("tmp/")] == []  # no stage left behind
    finally:
        os.close(fd)


def test_a_local_key_held_by_no_regular_file_is_missing(tmp_path: Path):
    (tmp_path / "cards").mkdir()
    os.mkfifo(tmp_path / "cards" / "fifo.json")  # no writer: a blocking open would hang
    (tmp_path / "cards" / "dir.json").mkdir()
    (tmp_path / "cards" / "link.json").symlink_to(tmp_path / "elsewhere")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        backend = LocalBackend(fd)
        for name in ("fifo", "dir", "link"):
            assert backend.stat(f"cards/{name}.json") is None
            with pytest.raises(ObjectMissing):
                backend.read(f"cards/{name}.json")
    finally:
        os.close(fd)


def test_a_local_key_removed_while_listed_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A writer's stage that finishes between the directory read and its stat (gc's sweep)."""
    from cas import _local_backend

    (tmp_path / "tmp").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "tmp" / name).write_bytes(name.encode())
    real = os.scandir

    def scandir_then_remove(fd: int):  # type: ignore[no-untyped-def]
        with real(fd) as scan:
            entries = list(scan)
        os.unlink("b", dir_fd=fd)  # gone once read, before its stat
        return _Entries(entries)

    monkeypatch.setattr(_local_backend.os, "scandir", scandir_then_remove)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert [entry.key for entry in LocalBackend(fd).list("tmp/")] == ["tmp/a", "tmp/c"]
    finally:
        os.close(fd)


class _Entries(list):  # type: ignore[type-arg]
    """Directory entries already read, as `os.scandir`'s context manager yields them."""

    def __enter__(self) -> _Entries:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
