"""Opening one project's directory: its rooms (objects, cards) and its commit lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

import msgspec

import fsedge as _fs
from cards.errors import SourceMissing, StoreIOError
from cas._layout import LOCK, TMP, ProjectLayout
from cas._local_backend import LocalBackend
from cas._local_cards import CardFiles
from cas._objects import ObjectStore


class Project(msgspec.Struct, frozen=True):
    """A project's rooms, open through one directory descriptor (valid inside `open_project`)."""

    fd: int
    layout: ProjectLayout
    objects: ObjectStore
    cards: CardFiles

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The commit lock: serialises quota checks, publication and card writes."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(LOCK, flags, _fs.FILE_MODE, dir_fd=self.fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits for the holder; EINTR is retried by Python
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    @property
    def keys(self) -> LocalBackend:
        """The project's keys (`Backend`): its files, below its directory."""
        return LocalBackend(self.fd)

    def stale_stage(self, key: str, older_than_ns: int) -> bool | None:
        """Whether a key below `tmp/` is an old stage no writer holds (None: no stage of ours)."""
        name = key.removeprefix(f"{TMP}/")
        ours = name.startswith(_fs.STAGE_PREFIX) and name.endswith(_fs.STAGE_SUFFIX)
        if "/" in name or not ours:
            return None
        with self.staging() as tmp_fd:
            return _fs.is_stale_stage(tmp_fd, name, older_than_ns=older_than_ns)

    @contextlib.contextmanager
    def staging(self) -> Iterator[int]:
        """The staging directory `tmp/` (created if needed), open for the block."""
        tmp_fd = _fs.make_dirs(self.fd, self.layout.tmp_dir)
        try:
            yield tmp_fd
        finally:
            os.close(tmp_fd)


@contextlib.contextmanager
def open_project(
    artifact_root: str, layout: ProjectLayout, *, create: bool
) -> Iterator[Project | None]:
    """Open a project below `artifact_root`; None when it has recorded nothing (and not `create`).

    Raises:
        StoreIOError: with `create`, the directories could not be created.
        PathEscape: a component of the project's path is a symlink.
    """
    if create:
        try:
            _fs.make_root(artifact_root)
        except OSError as exc:
            raise StoreIOError(f"cannot create the artifact root: {exc.strerror}") from exc
    fd = _project_fd(artifact_root, layout, create=create)
    if fd is None:
        yield None
        return
    try:
        yield Project(fd, layout, ObjectStore(fd, layout), CardFiles(fd, layout))
    finally:
        os.close(fd)


def _project_fd(artifact_root: str, layout: ProjectLayout, *, create: bool) -> int | None:
    try:
        root_fd = _fs.open_dir(artifact_root)
    except SourceMissing:
        return None
    try:
        if create:
            return _fs.make_dirs(root_fd, layout.root)
        try:
            return _fs.open_dir_beneath(root_fd, layout.root)
        except SourceMissing:
            return None
    finally:
        os.close(root_fd)
