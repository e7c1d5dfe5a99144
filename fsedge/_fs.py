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
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

import msgspec

from cards.errors import PathEscape, SourceMissing, StoreIOError
from fsedge._outside import refuse_inside

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


def pread_full(fd: int, length: int, offset: int) -> bytes:
    """`length` bytes of `fd` at `offset`, fewer only where the file ends (positional reads).

    Raises:
        OSError: the file could not be read.
    """
    parts: list[bytes] = []
    done = 0
    while done < length and (part := os.pread(fd, length - done, offset + done)):
        parts.append(part)
        done += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def pread_into(fd: int, buffer: bytearray | memoryview, offset: int) -> int:
    """Fill `buffer` from `offset` of `fd`; how many bytes, fewer only where the file ends.

    Raises:
        OSError: the file could not be read.
    """
    view = memoryview(buffer)
    filled = 0
    while filled < len(view) and (n := os.preadv(fd, [view[filled:]], offset + filled)):
        filled += n
    return filled


def copy_range(src_fd: int, dst_fd: int, count: int, offset: int) -> int:
    """Copy `count` bytes at `offset` of `src_fd` to the same offset of `dst_fd`, in the kernel.

    `copy_file_range(2)`: the bytes never pass through this process, and a filesystem that can
    share blocks may. Returns how many bytes were copied, fewer only where the source ends.

    Raises:
        OSError: the kernel cannot copy between these files (EXDEV, EINVAL, ENOSYS, ...: the
            caller copies itself), or the copy failed.
    """
    copy = getattr(os, "copy_file_range", None)
    if copy is None:
        raise OSError(errno.ENOSYS, "copy_file_range is not available")
    copied = 0
    while copied < count and (
        n := copy(src_fd, dst_fd, count - copied, offset + copied, offset + copied)
    ):
        copied += n
    return copied


def read_small(fd: int, max_bytes: int, size_hint: int = 65535) -> bytes:
    """Read a whole small file from `fd`, refusing anything larger than `max_bytes`.

    `size_hint` (e.g. from `fstat`) lets a file be read in one call; it is only a hint.

    Raises:
        StoreIOError: the file is larger than `max_bytes`.
    """
    chunks: list[bytes] = []
    total = 0
    step = min(max(size_hint, 0), max_bytes) + 1
    while chunk := os.read(fd, step):
        total += len(chunk)
        if total > max_bytes:
            raise StoreIOError(f"a store file is larger than {max_bytes} bytes")
        chunks.append(chunk)
        step = 65536
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


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
