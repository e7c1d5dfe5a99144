"""The outbox's directories under the state root: where they are, opening them, and their modes.

`<state_root>/outbox/{pending,dead-letter,tmp}`: directories 0700 and files 0600, owned by the
user the worker runs as; `permission_problems` is what `artmem fsck` reports otherwise.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence

from cards import ArtifactError, OutboxError
from fsedge import make_dirs, make_root, open_dir

OUTBOX = "outbox"
PENDING = "pending"
DEAD_LETTER = "dead-letter"
TMP = "tmp"
DIR_MODE = 0o700
FILE_MODE = 0o600


def open_outbox_dirs(state_root: str, names: Sequence[str]) -> list[int]:
    """Create (0700) and open `<state_root>/outbox/<name>` for each name ("" is the outbox).

    Raises:
        OutboxError: a directory could not be created or opened (nothing is left open).
    """
    fds: list[int] = []
    try:
        make_root(state_root)
        root = open_dir(state_root)
        try:
            for name in names:
                fds.append(make_dirs(root, (OUTBOX, name) if name else (OUTBOX,)))
        finally:
            os.close(root)
    except (OSError, ArtifactError) as exc:
        for fd in fds:
            os.close(fd)
        raise OutboxError(f"the outbox directories are unusable: {exc}") from exc
    return fds


def permission_problems(state_root: str) -> tuple[str, ...]:
    """Directories that are not 0700 and files not 0600, or not owned by this user."""
    try:
        root = os.stat(state_root)  # the configured root itself may be a symlink
    except (FileNotFoundError, NotADirectoryError):
        return ()
    problems = _finding(".", root, directory=True)
    for label in (OUTBOX, *(f"{OUTBOX}/{name}" for name in (PENDING, DEAD_LETTER, TMP))):
        path = os.path.join(state_root, label)
        info = lstat_or_none(path)
        if info is None:
            continue
        problems += _finding(label, info, directory=True)
        if not stat.S_ISDIR(info.st_mode):
            continue
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            problems.append(f"{label}: cannot be listed ({exc.strerror})")
            continue
        for name in names:
            child = lstat_or_none(os.path.join(path, name))
            if child is not None and stat.S_ISREG(child.st_mode):
                problems += _finding(f"{label}/{name}", child, directory=False)
    return tuple(problems)


def repair_permissions(state_root: str) -> int:
    """Give the state root and the outbox's directories and files their modes; how many changed.

    Only what this user owns and a mode alone is wrong with: an owner is reported, never
    changed. Each is opened without following a symlink and changed through its descriptor.
    """
    try:
        root = os.stat(state_root)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    fixed = _fix_mode(state_root, root, directory=True, follow=True)
    for label in (OUTBOX, *(f"{OUTBOX}/{name}" for name in (PENDING, DEAD_LETTER, TMP))):
        path = os.path.join(state_root, label)
        info = lstat_or_none(path)
        if info is None or not stat.S_ISDIR(info.st_mode):
            continue
        fixed += _fix_mode(path, info, directory=True)
        with contextlib.suppress(OSError):
            for name in os.listdir(path):
                child = os.path.join(path, name)
                found = lstat_or_none(child)
                if found is not None and stat.S_ISREG(found.st_mode):
                    fixed += _fix_mode(child, found, directory=False)
    return fixed


def _fix_mode(path: str, info: os.stat_result, *, directory: bool, follow: bool = False) -> int:
    expected = DIR_MODE if directory else FILE_MODE
    if stat.S_IMODE(info.st_mode) == expected or info.st_uid != os.geteuid():
        return 0
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags | (os.O_DIRECTORY if directory else 0))
    except OSError:
        return 0  # gone, replaced by a symlink, or unreadable: still reported
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            return 0  # replaced since it was judged
        os.fchmod(fd, expected)
    except OSError:
        return 0
    finally:
        os.close(fd)
    return 1


def lstat_or_none(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _finding(label: str, info: os.stat_result, *, directory: bool) -> list[str]:
    if stat.S_ISDIR(info.st_mode) != directory:
        return [f"{label}: not a {'directory' if directory else 'regular file'}"]
    found: list[str] = []
    mode, expected = stat.S_IMODE(info.st_mode), DIR_MODE if directory else FILE_MODE
    if mode != expected:
        found.append(f"{label}: mode {mode:04o}, expected {expected:04o}")
    if info.st_uid != os.geteuid():
        found.append(f"{label}: owned by uid {info.st_uid}, expected {os.geteuid()}")
    return found
