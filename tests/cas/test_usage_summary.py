"""The objects' summary (`cas._usage`): always what a full walk finds, however it is kept."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas._usage as usage_module
from cards import ProjectId, artifact_id_for_digest
from cas._layout import USAGE, ProjectLayout
from cas._objects import ObjectStore, object_name

LAYOUT = ProjectLayout.for_project(ProjectId("p"))
PAST = 1_000_000_000_000_000_000  # 2001, long settled


class Tree:
    """A bare project directory with object files written directly into their shards."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        self.objects = ObjectStore(self.fd, LAYOUT)
        self.settled = 0

    def close(self) -> None:
        os.close(self.fd)

    def path(self, seed: int) -> Path:
        artifact_id = artifact_id_for_digest(hashlib.sha256(str(seed).encode()).digest())
        return self.root.joinpath(*LAYOUT.object_path(artifact_id))

    def add(self, seed: int, size: int) -> Path:
        path = self.path(seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        path.with_name(path.name + ".chunks").write_bytes(b"manifest")  # never counted
        return path

    def settle(self) -> None:
        """Date every shard directory long ago, as if the store were old (time still moves on)."""
        self.settled += 1
        for shard in (self.root / "objects").iterdir():
            os.utime(shard, ns=(PAST + self.settled, PAST + self.settled))

    def summary(self, persist: bool = True):
        if not persist:
            return self.objects.summary()
        tmp_fd = os.open(self.root / "tmp", os.O_RDONLY | os.O_DIRECTORY)
        try:
            return self.objects.summary(tmp_fd)
        finally:
            os.close(tmp_fd)

    def walked(self) -> tuple[int, int, frozenset[int]]:
        """The oracle: every object-named entry below `objects/`, found by a plain walk."""
        sizes = []
        objects = self.root / "objects"
        for shard in objects.iterdir() if objects.is_dir() else ():
            if shard.is_dir() and not shard.is_symlink():
                sizes.extend(
                    entry.stat(follow_symlinks=False).st_size
                    for entry in os.scandir(shard)
                    if object_name(entry.name, shard.name) is not None
                )
        return len(sizes), sum(sizes), frozenset(sizes)


@pytest.fixture
def tree(tmp_path):
    made = Tree(tmp_path / "project")
    yield made
    made.close()


def _as_tuple(summary) -> tuple[int, int, frozenset[int]]:
    return summary.objects, summary.bytes, summary.sizes


def test_a_settled_unchanged_store_is_not_listed_again(tree, monkeypatch):
    for seed in range(40):
        tree.add(seed, seed)
    tree.settle()
    first = tree.summary()  # lists everything (no summary yet) and persists it
    assert _as_tuple(first) == tree.walked()
    assert (tree.root / USAGE).exists()

    def no_listing(*args):
        raise AssertionError("a settled, unchanged shard was listed again")

    monkeypatch.setattr("cas._objects._object_sizes", no_listing)
    assert tree.summary() == first  # every shard trusted: one stat per shard


def test_a_changed_shard_is_listed_again(tree):
    for seed in range(20):
        tree.add(seed, 100 + seed)
    tree.settle()
    tree.summary()
    tree.add(1000, 7)  # its shard's mtime moves
    tree.path(3).unlink()
    assert _as_tuple(tree.summary()) == tree.walked()


def test_a_racy_shard_is_never_trusted(tree, monkeypatch):
    """A change in the same clock tick as the listing keeps the directory's mtime."""
    shard = tree.add(1, 10).parent
    tick = shard.stat().st_mtime_ns
    # Every listing starts in the tick the shard changed in, however slowly this runs.
    monkeypatch.setattr(usage_module, "time", SimpleNamespace(time_ns=lambda: tick))
    tree.summary()  # the shard was changed just now: racy, so not trusted next time
    before = shard.stat()
    seed = next(s for s in range(2, 100_000) if tree.path(s).parent == shard)
    tree.add(seed, 33)
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))  # as if in the same tick
    assert _as_tuple(tree.summary()) == tree.walked()
    assert tree.summary().objects == 2


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b'{"version": 99, "started_ns": 0, "shards": {}}',
        b'{"version": 1, "started_ns": "x", "shards": {}}',
        b'{"version": 1, "started_ns": 0, "shards": {"aa": [1, 2]}}',
        b'{"version": 1, "started_ns": 0, "shards": {"aa": [1, 2, [-5]]}}',
        b'{"version": 1, "started_ns": 0, "shards": {"aa": [1, 2, ["x"]]}}',
        b"[1, 2, 3]",
        b"[" * 50_000 + b"]" * 50_000,  # nesting past the decoder's recursion limit
    ],
)
def test_a_torn_or_foreign_summary_is_rebuilt(tree, content):
    for seed in range(10):
        tree.add(seed, seed * 3)
    tree.settle()
    (tree.root / USAGE).write_bytes(content)
    assert _as_tuple(tree.summary()) == tree.walked()


def test_a_lying_summary_with_a_stale_stamp_is_not_believed(tree):
    tree.add(1, 10)
    tree.settle()
    tree.summary()
    tree.add(2, 20)  # moves a stamp: the lie below names the old one
    document = (tree.root / USAGE).read_text().replace("10", "999999")
    (tree.root / USAGE).write_text(document)
    assert _as_tuple(tree.summary()) == tree.walked()


def test_a_summary_that_is_not_a_file_is_ignored(tree):
    tree.add(1, 10)
    (tree.root / USAGE).mkdir()
    assert _as_tuple(tree.summary()) == tree.walked()
    (tree.root / USAGE).rmdir()
    (tree.root / USAGE).symlink_to("/dev/zero")
    assert _as_tuple(tree.summary()) == tree.walked()


def test_an_oversized_summary_is_not_read(tree, monkeypatch):
    tree.add(1, 10)
    monkeypatch.setattr(usage_module, "MAX_SUMMARY_BYTES", 16)
    (tree.root / USAGE).write_bytes(b" " * 1024)
    assert _as_tuple(tree.summary()) == tree.walked()


def test_without_a_staging_directory_nothing_is_written(tree):
    tree.add(1, 10)
    assert _as_tuple(tree.summary(persist=False)) == tree.walked()
    assert not (tree.root / USAGE).exists()


_operations = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "settle", "summary"]), st.integers(0, 30)),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=_operations)
def test_the_summary_always_equals_a_walk(tmp_path_factory, operations):
    tree = Tree(tmp_path_factory.mktemp("project"))
    try:
        for op, seed in operations:
            if op == "add":
                tree.add(seed, seed * 11 % 17)
            elif op == "remove":
                with contextlib.suppress(FileNotFoundError):
                    tree.path(seed).unlink()
            elif op == "settle" and (tree.root / "objects").exists():
                tree.settle()
            else:
                assert _as_tuple(tree.summary()) == tree.walked()
        assert _as_tuple(tree.summary()) == tree.walked()
    finally:
        tree.close()


def test_an_object_collected_while_its_shard_is_read_no_longer_counts(tree):
    from cas._objects import _object_sizes

    seed = next(n for n in range(2, 100_000) if tree.path(n).parent == tree.path(1).parent)
    first, second = tree.add(1, 3), tree.add(seed, 5)  # two objects in one shard
    shard = first.parent
    shard_fd = os.open(shard, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sizes = _object_sizes(shard_fd, shard.name)
        counted = next(sizes)
        (second if counted == 3 else first).unlink()  # gc removes the other meanwhile
        assert list(sizes) == []
    finally:
        os.close(shard_fd)
