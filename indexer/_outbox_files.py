"""The outbox's documents on disk: written whole, inspected before trusted, set aside unread.

One document per delivery, `<delivery_id>.json`, in `pending/` or `dead-letter/`. A document is
read only after an `lstat` says it is a regular file of a sane size; one that does not decode
and verify is `Corrupt`, and is moved aside whole, unread, to `dead-letter/<id>.corrupt`.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from cards import ArtifactError, OutboxError
from cards.errors import ErrorCode
from fsedge import atomic_write, read_small
from indexer._entry import OutboxEntry, decode_entry, parse_delivery_id

SUFFIX = ".json"
CORRUPT_SUFFIX = ".corrupt"
# The dead-letter reason of a document moved aside because it did not verify.
CORRUPT = ErrorCode.OUTBOX_CORRUPT
MAX_ENTRY_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class Corrupt:
    """A document that does not verify; `identity` (device, inode) when it can be moved aside."""

    identity: tuple[int, int] | None


def write_document(dir_fd: int, name: str, data: bytes, tmp_fd: int) -> None:
    try:
        atomic_write(dir_fd, name, data, tmp_fd, "outbox")
    except (OSError, ArtifactError) as exc:
        raise OutboxError(f"cannot write an outbox document: {exc}") from exc


def document_exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def inspect(dir_fd: int, name: str) -> OutboxEntry | Corrupt | None:
    """The verified document `name`, `Corrupt` when it does not verify, None when it is gone."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None  # acknowledged meanwhile
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EACCES, errno.EPERM):
            return Corrupt(None)  # cannot tell (e.g. EIO, EMFILE): left where it is
        return Corrupt(identity_of(dir_fd, name))  # a symlink, or a file we may not read
    try:
        info = os.fstat(fd)
        identity = (info.st_dev, info.st_ino)
        if not stat.S_ISREG(info.st_mode):
            return Corrupt(identity)
        entry = decode_entry(read_small(fd, MAX_ENTRY_BYTES, info.st_size))
    except ArtifactError:
        return Corrupt(identity)
    except OSError:
        return Corrupt(None)
    finally:
        os.close(fd)
    return entry if entry.delivery_id + SUFFIX == name else Corrupt(identity)


def identity_of(dir_fd: int, name: str) -> tuple[int, int] | None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def remains(dir_fd: int, name: str, dead_fd: int) -> bool:
    """Whether document `name` is still there after a corrupt one is moved to dead-letter."""
    found = inspect(dir_fd, name)
    if isinstance(found, Corrupt):
        return not set_aside(dir_fd, name, dead_fd, found)
    return found is not None


def set_aside(dir_fd: int, name: str, dead_fd: int, corrupt: Corrupt) -> bool:
    """Move a corrupt document, whole and unread, to `dead-letter/<delivery_id>.corrupt`.

    Only the file that was judged is moved: one replaced since (re-admitted) stays.

    Raises:
        OutboxError: the rename failed.
    """
    if corrupt.identity is None or identity_of(dir_fd, name) != corrupt.identity:
        return False
    target = name.removesuffix(SUFFIX) + CORRUPT_SUFFIX
    try:
        os.rename(name, target, src_dir_fd=dir_fd, dst_dir_fd=dead_fd)
        os.fsync(dead_fd)
        os.fsync(dir_fd)
    except FileNotFoundError:
        return True  # another process moved it first
    except OSError as exc:
        raise OutboxError(f"cannot move a corrupt outbox document: {exc.strerror}") from exc
    return True


def load_all(dir_fd: int) -> tuple[list[OutboxEntry], int]:
    entries, invalid, moved = load_all_moving(dir_fd, None)
    return entries, invalid


def load_all_moving(dir_fd: int, set_aside_to: int | None) -> tuple[list[OutboxEntry], int, int]:
    """Valid entries, invalid documents left, and corrupt ones moved to `set_aside_to`."""
    entries: list[OutboxEntry] = []
    invalid = moved = 0
    for name in os.listdir(dir_fd):
        if not is_document_name(name):
            invalid += 1
            continue
        found = inspect(dir_fd, name)
        if isinstance(found, OutboxEntry):
            entries.append(found)
        elif (
            isinstance(found, Corrupt)
            and set_aside_to is not None
            and moved_aside(dir_fd, name, set_aside_to, found)
        ):
            moved += 1
        elif found is not None:
            invalid += 1
    return entries, invalid, moved


def moved_aside(dir_fd: int, name: str, dead_fd: int, corrupt: Corrupt) -> bool:
    try:
        return set_aside(dir_fd, name, dead_fd, corrupt)
    except OutboxError:
        return False  # counted as invalid; fsck reports it


def is_document_name(name: str) -> bool:
    try:
        parse_delivery_id(name.removesuffix(SUFFIX))
    except ValueError:
        return False
    return name.endswith(SUFFIX)
