"""The outbox's directories under the state root: where they are, opening them, and their modes.

`<state_root>/outbox/{pending,dead-letter,tmp}`: directories 0700 and files 0600, owned by the
user the worker runs as; `permission_problems` is what `artmem fsck` reports otherwise.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from cards import ArtifactError, OutboxError
from cas import make_dirs, open_dir

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
        os.makedirs(state_root, mode=0o700, exist_ok=True)
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
