"""Files for people outside the store: unnamed stages, and a new file written beside a path.

An operator's `--out` and `export` write here: staged unnamed where the system allows (a killed
process leaves no file), fsynced, then linked into place (never over an existing file) or,
when asked, renamed over it. The store's own files use the named stages of `_fs`.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator, Sequence

import msgspec

from cards.errors import StoreIOError
from fsedge._fs import (
    FILE_MODE,
    STAGE_PREFIX,
    STAGE_SUFFIX,
    Staged,
    fsync_dir,
    staged,
    write_all,
)
from fsedge._outside import refuse_inside


class Unnamed(msgspec.Struct, frozen=True):
    """A file with no name until it is published (`O_TMPFILE`): a crash leaves nothing behind.

    It is linked into place through `/proc/self/fd`, the one way an unprivileged process can
    name an open file; `open_unnamed` falls back to a named stage where either is missing.
    """

    dir_fd: int
    fd: int

    def commit_link(self, dest_dir_fd: int, dest_name: str) -> bool:
        """Publish by hard link, never replacing; False when `dest_name` already existed."""
        try:
            os.link(_proc_fd(self.fd), dest_name, dst_dir_fd=dest_dir_fd, follow_symlinks=True)
        except FileExistsError:
            return False
        fsync_dir(dest_dir_fd)
        return True

    def commit_replace(self, dest_dir_fd: int, dest_name: str) -> None:
        """Publish by atomic rename over `dest_name`: linked under a temp name first.

        Only a crash between that link and the rename (two system calls) leaves a named stage.
        """
        temp = f"{STAGE_PREFIX}out-{os.getpid()}-{os.urandom(8).hex()}{STAGE_SUFFIX}"
        os.link(_proc_fd(self.fd), temp, dst_dir_fd=dest_dir_fd, follow_symlinks=True)
        try:
            os.replace(temp, dest_name, src_dir_fd=dest_dir_fd, dst_dir_fd=dest_dir_fd)
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dest_dir_fd)
            raise
        fsync_dir(dest_dir_fd)


def _proc_fd(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


@contextlib.contextmanager
def open_unnamed(dir_fd: int, kind: str, mode: int = FILE_MODE) -> Iterator[Unnamed | Staged]:
    """An unnamed file in `dir_fd`, or a named, locked stage where the system has none.

    `mode` is the file's mode before the umask.
    """
    try:
        fd = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except (AttributeError, OSError):  # no O_TMPFILE (not Linux, or the filesystem lacks it)
        fd = -1
    if fd >= 0 and not os.path.exists(_proc_fd(fd)):
        os.close(fd)
        fd = -1
    if fd < 0:
        with staged(dir_fd, kind, mode) as stage:
            yield stage
        return
    try:
        yield Unnamed(dir_fd, fd)
    finally:
        os.close(fd)


class StagedBeside(msgspec.Struct, frozen=True):
    """A staged file in the directory of `path` (same filesystem), published by `publish`."""

    stage: Unnamed | Staged
    dir_fd: int
    name: str
    path: str

    def publish(self, *, replace: bool = False) -> None:
        """Fsync the staged bytes, then hard-link them to `path` (or, with `replace`, rename).

        Raises:
            FileExistsError: `path` appeared meanwhile and `replace` is not set.
            StoreIOError: the file could not be made durable or published.
        """
        try:
            os.fsync(self.stage.fd)
            if replace:
                self.stage.commit_replace(self.dir_fd, self.name)
                return
            linked = self.stage.commit_link(self.dir_fd, self.name)
        except OSError as exc:
            raise StoreIOError(f"cannot write the output file: {exc.strerror}") from exc
        if not linked:
            raise FileExistsError(errno.EEXIST, "the file exists", self.path)


def _refuse_directory(path: str) -> None:
    """Refuse an output path that names a directory (`abspath` would drop a trailing `/`)."""
    if os.path.isdir(path):
        why = f"{path} is a directory; name a new file inside it instead"
        raise IsADirectoryError(errno.EISDIR, why, path)
    if path.endswith(("/", os.sep)) or os.path.basename(path) in ("", ".", ".."):
        why = f"{path} names a directory, and none exists there; create it first, or name a file"
        raise IsADirectoryError(errno.EISDIR, why, path)


@contextlib.contextmanager
def staged_beside(
    path: str, *, replace: bool = False, outside: Sequence[str] = (), mode: int = FILE_MODE
) -> Iterator[StagedBeside]:
    """A staged file beside `path`, gone on exit whether or not it was published.

    For files outside the store (an operator's `--out`, an export), named by a plain path. The
    stage is unnamed where the system allows (`open_unnamed`): a killed process leaves no file.
    `path`'s directory, as opened, must lie outside every directory in `outside`. The file is
    created with `mode` less the umask (`SHARED_FILE_MODE` for a file a person shares).

    Raises:
        IsADirectoryError: `path` names a directory (one that exists, or any path ending in
            `/`); its `strerror` says so, for a person.
        FileExistsError: `path` exists and `replace` is not set.
        PathRejected: `path`'s directory is inside one of `outside`.
        StoreIOError: its directory cannot be opened, or the staged file created.
    """
    _refuse_directory(path)
    directory, name = os.path.split(os.path.abspath(path))
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise StoreIOError(f"cannot open the output directory: {exc.strerror}") from exc
    try:
        refuse_inside(dir_fd, outside)
        if not replace and os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "the file exists", path)
        with open_unnamed(dir_fd, "out", mode) as stage:
            yield StagedBeside(stage, dir_fd, name, path)
    finally:
        os.close(dir_fd)


def write_new(
    path: str,
    chunks: Iterable[bytes],
    *,
    replace: bool = False,
    outside: Sequence[str] = (),
    mode: int = FILE_MODE,
) -> None:
    """Create the file `path` with `chunks`, atomically; an existing file only with `replace`.

    The bytes are staged beside `path` and fsynced, then hard-linked into place (which fails if
    the name exists) or, with `replace`, renamed over it; the directory is fsynced: `path`
    appears complete or not at all, and a failure (including one raised by `chunks`) leaves no
    staged file.

    Raises:
        FileExistsError: `path` exists (or appeared meanwhile) and `replace` is not set.
        PathRejected: `path`'s directory is inside one of `outside` (see `staged_beside`).
        StoreIOError: the file could not be written.
    """
    with staged_beside(path, replace=replace, outside=outside, mode=mode) as out:
        try:
            for chunk in chunks:
                write_all(out.stage.fd, chunk)
        except OSError as exc:
            raise StoreIOError(f"cannot write the output file: {exc.strerror}") from exc
        out.publish(replace=replace)
