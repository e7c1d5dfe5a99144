"""The filesystem edge: descriptor-relative opens, staged files and atomic publication.

Containment is proved by holding directory descriptors and opening one component at a time with
`O_NOFOLLOW`, never by comparing resolved path strings (the path can change between a check and
an open).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from typing import cast

import msgspec

from cards.errors import PathEscape, SourceMissing, StoreIOError

DIR_MODE = 0o700
FILE_MODE = 0o600
# A file a person writes for others to read (an export, `slice --out`): what their umask allows,
# as any tool creates one. The store's own files stay FILE_MODE.
SHARED_FILE_MODE = 0o666
OBJECT_MODE = 0o400
STAGE_PREFIX = "stage-"
STAGE_SUFFIX = ".tmp"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def check_name(name: str) -> None:
    """Reject a path component that is empty, '.', '..', or holds a separator or NUL.

    Raises:
        PathEscape: `name` is not a single plain component.
    """
    if name in ("", ".", "..") or "/" in name or "\x00" in name:
        raise PathEscape("a path component is empty, '.', '..' or holds a separator")


def open_dir(path: str) -> int:
    """Open a configured (trusted) root directory; symlinks in the root itself are allowed.

    Raises:
        SourceMissing: the directory does not exist.
    """
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise SourceMissing("a configured root directory does not exist") from exc


def make_root(path: str) -> None:
    """Create the configured root `path` and any missing parent, each 0700 (unlike `makedirs`).

    `os.makedirs` gives the parents it creates the default mode (0755 under the usual umask):
    a bucket host's cache below the state root left the state root open to every user.

    Raises:
        OSError: a directory could not be created.
    """
    parent = os.path.dirname(path)
    if parent and parent != path and not os.path.isdir(parent):
        make_root(parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIR_MODE)


def open_dir_beneath(root_fd: int, parts: Sequence[str]) -> int:
    """Open the directory `parts` below `root_fd` one component at a time, following nothing.

    Raises:
        PathEscape: a component is a symlink, or is not a plain name.
        SourceMissing: a component does not exist, or is not a directory.
    """
    fd = os.dup(root_fd)
    try:
        for name in parts:
            check_name(name)
            next_fd = _open_component(name, _DIR_FLAGS, fd)
            os.close(fd)
            fd = next_fd
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_file_beneath(root_fd: int, parts: Sequence[str], flags: int = os.O_RDONLY) -> int:
    """Open the file `parts` below `root_fd`, refusing symlinks at every component.

    `O_NONBLOCK` keeps a FIFO planted in place of a file from blocking the open; callers must
    `fstat` what they opened before trusting it.

    Raises:
        PathEscape: a component is a symlink, or is not a plain name.
        SourceMissing: a component does not exist.
    """
    if not parts:
        raise PathEscape("an empty path names no file")
    dir_fd = open_dir_beneath(root_fd, parts[:-1])
    try:
        check_name(parts[-1])
        return _open_component(
            parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd
        )
    finally:
        os.close(dir_fd)


def _open_component(name: str, flags: int, dir_fd: int) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError as exc:
        raise SourceMissing("a path component does not exist") from exc
    except NotADirectoryError as exc:
        # O_DIRECTORY | O_NOFOLLOW on a symlink fails with ENOTDIR, not ELOOP.
        if _is_symlink(name, dir_fd):
            raise PathEscape("a path component is a symbolic link") from exc
        raise SourceMissing("a path component is not a directory") from exc
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise PathEscape("a path component is a symbolic link") from exc
        raise


def _is_symlink(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def list_dir_beneath(root_fd: int, parts: Sequence[str]) -> list[str]:
    """The entry names of the directory `parts` below `root_fd`; none if it is absent or a link."""
    try:
        fd = open_dir_beneath(root_fd, parts)
    except (SourceMissing, PathEscape):
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def make_dirs(root_fd: int, parts: Sequence[str]) -> int:
    """Create (0700) and open the directory `parts` below `root_fd`, following no symlink.

    Raises:
        PathEscape: an existing component is a symlink or a plain file.
        StoreIOError: a directory could not be created.
    """
    fd = os.dup(root_fd)
    try:
        for name in parts:
            check_name(name)
            try:
                os.mkdir(name, DIR_MODE, dir_fd=fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise StoreIOError(f"cannot create a store directory: {exc.strerror}") from exc
            try:
                next_fd = _open_component(name, _DIR_FLAGS, fd)
            except SourceMissing as exc:
                raise PathEscape("a store path component is not a directory") from exc
            os.close(fd)
            fd = next_fd
        return fd
    except BaseException:
        os.close(fd)
        raise


_WAIT_BEFORE, _WRITE, _WAIT_AFTER = 1, 2, 4


@functools.cache
def _load_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """`sync_file_range(2)` from libc (Linux), or None where it does not exist.

    Loaded at the first copy, not at import: ctypes costs every command a few milliseconds.
    """
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int], int], function)


class WriteBehind:
    """Starts writeback of each chunk as soon as it is written, and keeps at most two in flight.

    Without this, a large copy leaves all its dirty pages for the final fsync, which then adds
    the whole disk write on top of hashing instead of overlapping it. This changes no durability
    guarantee: the final fsync still makes data and metadata durable (it is then nearly free).
    A no-op where `sync_file_range` does not exist.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._spans: list[tuple[int, int]] = []
        self._offset = 0
        self._sync = _load_sync_file_range()

    def written(self, length: int) -> None:
        """`length` more bytes were written at the current end of the file."""
        span = (self._offset, length)
        self._offset += length
        if self._sync is None:
            return
        self._sync(self._fd, span[0], span[1], _WRITE)
        self._spans.append(span)
        if len(self._spans) > 2:
            offset, size = self._spans.pop(0)
            self._sync(self._fd, offset, size, _WAIT_BEFORE | _WRITE | _WAIT_AFTER)


def fsync_dir(dir_fd: int) -> None:
    """Make renames and links in a directory durable."""
    os.fsync(dir_fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of `data` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class Staged(msgspec.Struct):
    """A uniquely named, exclusively locked temp file in a staging directory.

    The writer holds an `flock` on it for its whole life, so an operator check can tell a live
    stage from a crash leftover without guessing from process ids or ages.
    """

    dir_fd: int
    name: str
    fd: int

    def commit_link(self, dest_dir_fd: int, dest_name: str) -> bool:
        """Publish by hard link, never replacing; False when `dest_name` already existed."""
        try:
            os.link(self.name, dest_name, src_dir_fd=self.dir_fd, dst_dir_fd=dest_dir_fd)
        except FileExistsError:
            return False
        fsync_dir(dest_dir_fd)
        return True

    def drop_name(self) -> None:
        """Remove the temp name now, after `commit_link`.

        The file lives on under its final name with its final link count, so its identity
        (ctime) no longer moves.
        """
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.name, dir_fd=self.dir_fd)

    def commit_replace(self, dest_dir_fd: int, dest_name: str) -> None:
        """Publish by atomic rename over `dest_name`, then make the rename durable."""
        os.replace(self.name, dest_name, src_dir_fd=self.dir_fd, dst_dir_fd=dest_dir_fd)
        fsync_dir(dest_dir_fd)


@contextlib.contextmanager
def staged(dir_fd: int, kind: str, mode: int = FILE_MODE) -> Iterator[Staged]:
    """Create a locked temp file in `dir_fd`; its name is removed on exit, whatever happens.

    `mode` is the file's mode before the umask (private unless asked otherwise).

    After `commit_link` the published name keeps the bytes; after `commit_replace` the temp name
    is already gone. Either way nothing half-written stays visible under a final name.
    """
    name = f"{STAGE_PREFIX}{kind}-{os.getpid()}-{os.urandom(8).hex()}{STAGE_SUFFIX}"
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        raise StoreIOError(f"cannot create a staging file: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield Staged(dir_fd=dir_fd, name=name, fd=fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
        os.close(fd)


def atomic_write(dir_fd: int, name: str, data: bytes, stage_dir_fd: int, kind: str) -> None:
    """Replace `name` in `dir_fd` with `data`: staged, fsynced, renamed, directory fsynced.

    Raises:
        StoreIOError: the write failed (disk full, permissions); the old file is untouched.
    """
    check_name(name)
    with staged(stage_dir_fd, kind) as stage:
        try:
            write_all(stage.fd, data)
            os.fsync(stage.fd)
            stage.commit_replace(dir_fd, name)
        except OSError as exc:
            raise StoreIOError(f"cannot write a store file: {exc.strerror}") from exc


def is_stale_stage(dir_fd: int, name: str, *, older_than_ns: int) -> bool:
    """Whether a staging file is a crash leftover: old enough, and no live writer holds its lock.

    The age bound covers the instant between a writer's create and its `flock`.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mtime_ns > older_than_ns:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)
