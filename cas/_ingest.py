"""Safe ingest: open a kernel's export without escaping the caller session's exports.

The source must lie in `<rlm_root>/sessions/<caller session>/exports/`. Every component below the
configured root is opened with `O_NOFOLLOW` through directory descriptors, so a symlink anywhere
(the session directory and `exports` included) is refused rather than followed.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec

import fsedge as _fs
from cards import SessionId
from cards.errors import (
    ForeignOwner,
    HardLinked,
    NotRegularFile,
    PathEscape,
    PathRejected,
    SourceChanged,
    SourceMissing,
)

MAX_SOURCE_PATH_CHARS = 4096
# How long a source's metadata must have been still, when it changed after its last write
# (`ExportSource.check_unchanged`): longer than a racer stays off a CPU on a busy host.
SETTLE_NS = 250_000_000


def export_parts(rlm_root: str, session_id: SessionId, source_path: str) -> tuple[str, ...]:
    """The components of `source_path` below `rlm_root`, proven to lie in the session's exports.

    `source_path` is absolute or relative to the exports directory. Components are compared
    one by one (so session `s1` never matches `s10`); `..` is refused outright.

    Raises:
        PathEscape: the path is empty, holds `..` or NUL, or lies outside the exports directory.
    """
    if not source_path or "\x00" in source_path or len(source_path) > MAX_SOURCE_PATH_CHARS:
        raise PathEscape("the source path is empty, too long or holds NUL")
    exports = ("sessions", session_id, "exports")
    parts = path_parts(source_path)
    relative = _below(parts, rlm_root, exports) if source_path.startswith("/") else parts
    if not relative:
        raise PathEscape("the source path names the exports directory, not a file in it")
    if ".." in relative:
        raise PathEscape("the source path holds '..'")
    return (*exports, *relative)


def path_parts(path: str) -> tuple[str, ...]:
    """A POSIX path's components, "/" first if it is absolute: no empty or "." components.

    As `pathlib.PurePosixPath(path).parts`, except that a leading "//" is "/" (as Linux reads
    it); pathlib would import `urllib.parse`, a few milliseconds of every record's start.
    """
    root = ("/",) if path.startswith("/") else ()
    return (*root, *(part for part in path.split("/") if part not in ("", ".")))


def _below(parts: tuple[str, ...], rlm_root: str, exports: tuple[str, ...]) -> tuple[str, ...]:
    # The configured root, or where it really lives when it is itself a symlink the operator
    # chose; everything below the root is still opened without following links.
    for root in dict.fromkeys((rlm_root, os.path.realpath(rlm_root))):
        base = (*path_parts(root), *exports)
        if parts[: len(base)] == base:
            return parts[len(base) :]
    raise PathEscape("the source path is outside the caller session's exports directory")


class ExportSource(msgspec.Struct):
    """An open, checked source file and the directory entry it was opened through."""

    fd: int
    dir_fd: int
    name: str
    st: os.stat_result

    @property
    def size(self) -> int:
        """The size the file had when it was opened."""
        return self.st.st_size

    def check_unchanged(self, streamed: int) -> None:
        """Prove the file stayed what was opened, alone, and its name still points to it.

        Besides identity, size and mtime, the link count must still be one and the ctime
        unchanged: an inode that gained a second name while streamed (an outside file linked in
        and its own name restored after the open) fails the first, and anything done to the
        inode meanwhile (a write with its mtime put back, a link made and removed, a chmod)
        moves the ctime, which no caller can set. The entry is checked the same way.

        One race is left to close: a racer that passes an outside file through `exports/`
        (link it in, unlink its own name, link it back) leaves it alone there for an instant,
        and a record that fits in that instant sees nothing wrong. Such an inode's ctime (its
        links changed) is fresh and later than its mtime (its bytes did not); a file just
        written has the two equal. So a source whose metadata changed after its last write,
        less than `SETTLE_NS` ago, is held until that much time has passed and checked again:
        a racer paused in its instant gets to run and link the file back, and is seen.

        Raises:
            HardLinked: the file gained a hard link while it was streamed.
            SourceChanged: the file was replaced, truncated, grown or modified while streamed.
        """
        self._check_still(streamed)
        changed_ns = self.st.st_ctime_ns
        if changed_ns != self.st.st_mtime_ns:
            wait_ns = changed_ns + SETTLE_NS - time.time_ns()
            if wait_ns > 0:
                time.sleep(wait_ns / 1e9)
                self._check_still(streamed)

    def _check_still(self, streamed: int) -> None:
        now = os.fstat(self.fd)
        try:
            entry = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError as exc:
            raise SourceChanged("the source file was removed while it was recorded") from exc
        if now.st_nlink > 1 or entry.st_nlink > 1:
            raise HardLinked("the source file gained a hard link while it was recorded")
        before = _identity(self.st)
        unchanged = (
            _identity(now) == before
            and _identity(entry) == before
            and now.st_nlink == 1
            and streamed == self.size
        )
        if not unchanged:
            raise SourceChanged("the source file changed while it was recorded; record it again")


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_uid)


@contextmanager
def open_export(
    rlm_root: str, session_id: SessionId, source_path: str, *, require_owner: bool = True
) -> Iterator[ExportSource]:
    """Open a kernel's export for reading, refusing anything that is not a plain, private file.

    With `require_owner`, the file must belong to the owner of the session directory: a file
    the kernel could not have written (renamed into `exports/` by another user) is refused, for
    the same reason hard links are.

    Raises:
        PathEscape: the path escapes the exports directory or passes through a symlink.
        SourceMissing: the file or a directory on its path does not exist.
        NotRegularFile: the path names a directory, FIFO, socket or device.
        HardLinked: the file has more than one hard link.
        ForeignOwner: the file is not owned by the session directory's owner.
        PathRejected: the file cannot be opened for reading.
    """
    parts = export_parts(rlm_root, session_id, source_path)
    root_fd = _fs.open_dir(rlm_root)
    try:
        session_uid = _session_owner(root_fd, parts[:2])
        dir_fd = _fs.open_dir_beneath(root_fd, parts[:-1])
    finally:
        os.close(root_fd)
    try:
        fd = _open_source(dir_fd, parts[-1])
        try:
            st = _checked_stat(fd)
            if require_owner and st.st_uid != session_uid:
                raise ForeignOwner(
                    f"the source file belongs to uid {st.st_uid}, not to uid {session_uid} who "
                    "owns the session directory: only a kernel's own exports are recorded "
                    "(where kernels write as another user, set [ingest] require_owner = false)"
                )
            yield ExportSource(fd=fd, dir_fd=dir_fd, name=parts[-1], st=st)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def _session_owner(root_fd: int, session_parts: tuple[str, ...]) -> int:
    try:
        fd = _fs.open_dir_beneath(root_fd, session_parts)
    except SourceMissing as exc:
        raise SourceMissing(
            f"no session directory {'/'.join(session_parts)} under the RLM root: "
            "check the session id"
        ) from exc
    try:
        return os.fstat(fd).st_uid
    finally:
        os.close(fd)


def _open_source(dir_fd: int, name: str) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError as exc:
        raise SourceMissing("the source file does not exist") from exc
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise PathEscape("the source file is a symbolic link") from exc
        if exc.errno in (errno.ENXIO, errno.ENODEV):
            raise NotRegularFile("the source is a socket or device, not a regular file") from exc
        raise PathRejected(f"the source file cannot be opened: {exc.strerror}") from exc


def _checked_stat(fd: int) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile("the source is not a regular file")
    if st.st_nlink != 1:
        raise HardLinked("the source file has more than one hard link")
    return st
