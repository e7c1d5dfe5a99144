"""`LocalBackend`: a project's keys as files below its directory (`_backend`'s contract).

Every path is opened one component at a time beneath the project's directory descriptor with
`O_NOFOLLOW` (`_fs`), so no key reaches outside it; only regular files are keys. A write is
staged in `tmp/`, fsynced, then published by hard link (`create`: an existing name is never
replaced) or by rename (`replace`), and the directory fsynced: a crash leaves the old bytes or
the new ones. `replace` compares the version and renames under an exclusive `flock` on the
key's directory, which every `replace` of that directory takes, so of two replacers over the
same version one wins and the other is told.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator

import fsedge as _fs
from cards.errors import IntegrityError, ObjectMissing, PathEscape, SourceMissing, StoreIOError
from cas._backend import Entry, Read
from cas._backend import check_key as _parts
from cas._layout import TMP


def version_of(st: os.stat_result) -> str:
    """A file's version: its inode, size and times (any write or replacement moves one)."""
    return f"{st.st_ino}-{st.st_size}-{st.st_mtime_ns}-{st.st_ctime_ns}"


class LocalBackend:
    """The keys of the project open at `project_fd` (borrowed: the caller closes it)."""

    def __init__(self, project_fd: int) -> None:
        self._fd = project_fd

    def stat(self, key: str) -> Entry | None:
        """The key's entry, or None when no regular file holds it."""
        parts = _parts(key)
        try:
            dir_fd = _fs.open_dir_beneath(self._fd, parts[:-1])
        except (SourceMissing, PathEscape):
            return None
        try:
            st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(dir_fd)
        return _entry(key, st) if stat.S_ISREG(st.st_mode) else None

    def read(
        self, key: str, start: int = 0, end: int | None = None, *, version: str | None = None
    ) -> Read:
        """Bytes `[start, end)` of the key, read from one open descriptor (see `Backend`)."""
        try:
            fd = _fs.open_file_beneath(self._fd, _parts(key))
        except (SourceMissing, PathEscape) as exc:
            raise ObjectMissing("the store has no such key") from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ObjectMissing("the store has no such key (not a regular file)")
            current = version_of(st)
            if version is not None and version != current:
                raise IntegrityError("the stored file changed while it was read")
            stop = st.st_size if end is None else min(end, st.st_size)
            try:
                return Read(_fs.pread_full(fd, max(0, stop - start), start), current)
            except OSError as exc:
                raise StoreIOError(f"cannot read a store file: {exc.strerror}") from exc
        finally:
            os.close(fd)

    def list(self, prefix: str) -> Iterator[Entry]:
        """Every regular file whose key starts with `prefix`, in key order."""
        head, _, start = prefix.rpartition("/")
        parts = tuple(head.split("/")) if head else ()
        try:
            dir_fd = _fs.open_dir_beneath(self._fd, parts)
        except (SourceMissing, PathEscape):
            return
        try:
            base = f"{head}/" if head else ""
            yield from _walk(dir_fd, base, start)
        finally:
            os.close(dir_fd)

    def create(self, key: str, body: bytes) -> Entry | None:
        """Write the key only if it does not exist (staged, fsynced, hard-linked)."""
        parts = _parts(key)
        with self._staged(body) as stage:
            dir_fd = _fs.make_dirs(self._fd, parts[:-1])
            try:
                if not stage.commit_link(dir_fd, parts[-1]):
                    return None
                stage.drop_name()  # its link count, hence ctime, final before it is stamped
            except OSError as exc:
                raise StoreIOError(f"cannot write a store file: {exc.strerror}") from exc
            finally:
                os.close(dir_fd)
            return _entry(key, os.fstat(stage.fd))

    def replace(self, key: str, body: bytes, version: str) -> Entry | None:
        """Write the key only over exactly `version` (compared and renamed under a lock)."""
        parts = _parts(key)
        with self._staged(body) as stage:
            dir_fd = _fs.make_dirs(self._fd, parts[:-1])
            try:
                fcntl.flock(dir_fd, fcntl.LOCK_EX)  # released when the descriptor closes
                try:
                    st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    return None
                if not stat.S_ISREG(st.st_mode) or version_of(st) != version:
                    return None
                stage.commit_replace(dir_fd, parts[-1])
            except OSError as exc:
                raise StoreIOError(f"cannot write a store file: {exc.strerror}") from exc
            finally:
                os.close(dir_fd)
            return _entry(key, os.fstat(stage.fd))

    def delete(self, key: str) -> None:
        """Remove the key's file (absent: nothing to do); the directory is fsynced."""
        parts = _parts(key)
        try:
            dir_fd = _fs.open_dir_beneath(self._fd, parts[:-1])
        except (SourceMissing, PathEscape):
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(parts[-1], dir_fd=dir_fd)
                _fs.fsync_dir(dir_fd)
        except OSError as exc:
            raise StoreIOError(f"cannot remove a store file: {exc.strerror}") from exc
        finally:
            os.close(dir_fd)

    @contextlib.contextmanager
    def _staged(self, body: bytes) -> Iterator[_fs.Staged]:
        tmp_fd = _fs.make_dirs(self._fd, (TMP,))
        try:
            with _fs.staged(tmp_fd, "key") as stage:
                try:
                    _fs.write_all(stage.fd, body)
                    os.fchmod(stage.fd, _fs.FILE_MODE)
                    os.fsync(stage.fd)
                except OSError as exc:
                    raise StoreIOError(f"cannot write a store file: {exc.strerror}") from exc
                yield stage
        finally:
            os.close(tmp_fd)


def _entry(key: str, st: os.stat_result) -> Entry:
    """Its entry; modified when last written, linked or renamed (the later of mtime and ctime)."""
    return Entry(key, st.st_size, version_of(st), max(st.st_mtime, st.st_ctime))


def _walk(dir_fd: int, base: str, start: str) -> Iterator[Entry]:
    """Regular files below `dir_fd` whose key (`base` + relative path) follows `start`, sorted."""
    with os.scandir(dir_fd) as scan:
        chosen = [e for e in scan if e.name.startswith(start)]
    # In key order: a directory's keys continue its name with '/'.
    entries = sorted(chosen, key=lambda e: e.name + "/" * e.is_dir(follow_symlinks=False))
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed since the directory was read (a stage that finished)
        if stat.S_ISREG(st.st_mode):
            yield _entry(base + entry.name, st)
        elif stat.S_ISDIR(st.st_mode):
            try:
                sub_fd = _fs.open_dir_beneath(dir_fd, (entry.name,))
            except (SourceMissing, PathEscape):
                continue
            try:
                yield from _walk(sub_fd, f"{base}{entry.name}/", "")
            finally:
                os.close(sub_fd)
