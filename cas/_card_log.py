"""The card log: `cards.log` beside a project's cards, naming every card file written, in order.

It lets a catalog find the card files that changed since it last looked without a stat per card
(`CardFiles.changes`). The card files stay the source of truth; the log only says where to look,
and it is untrusted input: anything about it that is not exactly as written sends the reader to
the full scan of every card file.

Writing (`log_change`): every writer of a local card file holds the project's commit lock
(`Project.locked`) and appends the file's name, one record a line by a single `O_APPEND` write,
BEFORE the rename that publishes the card (an intent). A record is a line `<name> <nonce> <crc>`:
the card file name, 8 random bytes in hex, and the CRC-32 of the two. A log of `MAX_LOG_BYTES`, or
one that is not a regular file with our header, is replaced atomically by a new log of a new
random generation holding the record; a log that cannot be appended to or replaced is removed
(readers then scan), and if even that fails the card is not written.

Reading (`read_since`): the reader takes the commit lock SHARED (the lock file opened read-only)
while it reads the log's tail. Writers hold the lock exclusively from the intent until after the
rename, so every intent the reader sees has been renamed into place (or its writer died before
the rename, and the old file is the truth): reading those files after the lock is released shows
their state at least as new as the logged write. Later writes log past the new mark. Why the lock,
not intent/commit pairs: the reader waits at most for one commit in flight, holds the lock for a
few reads of the log, and after a full scan its mark can pass a corrupt region safely (a pair
scheme would have to parse it to know whether an intent is still in flight).

A mark is (device, inode, generation, offset, the last bytes before the offset). The log is
untrusted (`LogTail.names` is None: scan every file) when it is missing, not a regular file,
larger than its bound, of another identity or generation, shorter than the mark, its bytes before
the mark are not the ones seen (a log truncated by a crash and written again), or a record in the
tail is torn, fails its CRC, or names no card file (validated as an experiment id: a log line never
opens anything outside the cards directory).

Limit: a card file replaced in place (same inode, no rename) by something that does not log is
not seen until a full scan (`LocalCatalog.refresh(force=True)`); a replacement by rename gets a new
inode, which the listing shows.
"""

from __future__ import annotations

import fcntl
import os
import stat
import zlib

import msgspec

import fsedge as _fs
from cards import parse_experiment_id
from cards.errors import ArtifactError, StoreIOError
from cas._layout import CARD_SUFFIX, CARDS_LOG, LOCK

_MAGIC = b"artmem-cards-log 1 "
GENERATION_BYTES = 8
HEADER_BYTES = len(_MAGIC) + 2 * GENERATION_BYTES + 1
_NONCE_BYTES = 8
# Past this a writer starts a new log (readers then scan once); ~48,000 records.
MAX_LOG_BYTES = 4 << 20
# A reader trusts no log larger than this (a writer never lets one grow past MAX_LOG_BYTES).
MAX_READ_BYTES = 2 * MAX_LOG_BYTES
# How much of the log before a mark's offset the mark keeps, to notice the bytes changed.
_FINGERPRINT_BYTES = 32
_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | _FLAGS


class LogMark(msgspec.Struct, frozen=True):
    """How far a reader has read one log: its identity, the offset, the bytes just before it."""

    device: int
    inode: int
    generation: bytes
    offset: int
    last: bytes


class LogTail(msgspec.Struct, frozen=True):
    """What a read of the log found.

    `mark` is where a reader stands once it has looked at the card files after this read (None:
    there is no log to follow). `names` are the card file names logged since the mark read from,
    each once, in log order; None when the log cannot say (look at every card file).
    """

    mark: LogMark | None
    names: list[str] | None


def record(name: str) -> bytes:
    """One log record for the card file `name`."""
    body = f"{name} {os.urandom(_NONCE_BYTES).hex()}".encode("ascii")
    return body + b" %08x\n" % zlib.crc32(body)


def header(generation: bytes) -> bytes:
    """The first line of a log of `generation`."""
    return _MAGIC + generation.hex().encode("ascii") + b"\n"


def log_change(project_fd: int, name: str, tmp_fd: int) -> None:
    """Log that the card file `name` is about to be replaced (the caller holds the commit lock).

    Raises:
        StoreIOError: the change could neither be logged nor the log removed; the caller must
            not write the card.
    """
    line = record(name)
    try:
        fd = os.open(CARDS_LOG, os.O_RDWR | os.O_APPEND | _FLAGS, dir_fd=project_fd)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            if _append(fd, line):
                return
        except OSError:
            pass  # unreadable or unwritable: a new log
        finally:
            os.close(fd)
    fresh = header(os.urandom(GENERATION_BYTES)) + line
    try:  # a new generation: readers holding a mark of the old log scan once
        _fs.atomic_write(project_fd, CARDS_LOG, fresh, tmp_fd, "cardlog")
        return
    except StoreIOError:
        pass
    try:  # no log at all: readers scan, and the next writer starts a new one
        os.unlink(CARDS_LOG, dir_fd=project_fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreIOError(f"cannot log a card change: {exc.strerror}") from exc


def _append(fd: int, line: bytes) -> bool:
    """Append `line` to an intact log below its bound; False: start a new log instead.

    Raises:
        OSError: the log could not be read or written (a new log is started too).
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or not HEADER_BYTES <= st.st_size <= MAX_LOG_BYTES - len(line):
        return False
    if _generation(_fs.pread_full(fd, HEADER_BYTES, 0)) is None:
        return False
    # A short write (disk full) leaves a torn record: the log is then replaced whole.
    return os.write(fd, line) == len(line)


def read_since(project_fd: int, since: LogMark | None) -> LogTail:
    """The names logged after `since`, read under the shared commit lock (module docstring)."""
    try:
        lock_fd = os.open(LOCK, _READ_FLAGS, dir_fd=project_fd)
    except OSError:  # no writer ever committed (or the lock is unusable): nothing to follow
        return LogTail(None, None)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_SH)
        return _read_locked(project_fd, since)
    except OSError:
        return LogTail(None, None)
    finally:
        os.close(lock_fd)  # releases the lock


def _read_locked(project_fd: int, since: LogMark | None) -> LogTail:
    try:
        fd = os.open(CARDS_LOG, _READ_FLAGS, dir_fd=project_fd)
    except OSError:
        return LogTail(None, None)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not HEADER_BYTES <= st.st_size <= MAX_READ_BYTES:
            return LogTail(None, None)
        generation = _generation(_fs.pread_full(fd, HEADER_BYTES, 0))
        if generation is None:
            return LogTail(None, None)
        size = st.st_size
        same = since is not None and HEADER_BYTES <= since.offset <= size and (
            (since.device, since.inode, since.generation) == (st.st_dev, st.st_ino, generation)
        )  # fmt: skip
        offset = since.offset if since is not None and same else size
        start = max(HEADER_BYTES, offset - _FINGERPRINT_BYTES)  # offset <= size
        raw = _fs.pread_full(fd, size - start, start)
    finally:
        os.close(fd)
    if len(raw) != size - start:  # pragma: no cover - writers wait for the lock we hold
        return LogTail(None, None)
    mark = LogMark(st.st_dev, st.st_ino, generation, size, _last(raw, start, size))
    if since is None or not same or _last(raw, start, offset) != since.last:
        return LogTail(mark, None)
    return LogTail(mark, _names(raw[offset - start :]))


def _last(raw: bytes, start: int, offset: int) -> bytes:
    """The log's bytes just before `offset` (up to `_FINGERPRINT_BYTES`), from `raw` at `start`."""
    return raw[max(0, offset - _FINGERPRINT_BYTES - start) : offset - start]


def _generation(head: bytes) -> bytes | None:
    if len(head) != HEADER_BYTES or not head.startswith(_MAGIC) or not head.endswith(b"\n"):
        return None
    try:
        return bytes.fromhex(head[len(_MAGIC) : -1].decode("ascii"))
    except ValueError:
        return None


def _names(tail: bytes) -> list[str] | None:
    """The card file names of whole, intact records; None if any record is not."""
    if tail and not tail.endswith(b"\n"):
        return None  # torn: its writer died mid-append or the disk filled
    names: dict[str, None] = {}
    for line in tail.split(b"\n")[:-1]:
        name = _checked(line)
        if name is None:
            return None
        names.pop(name, None)  # kept once, at its last write
        names[name] = None
    return list(names)


def _checked(line: bytes) -> str | None:
    """The card file name a record holds, if it is intact and names a card file."""
    body, _, crc = line.rpartition(b" ")
    name, _, nonce = body.partition(b" ")
    if len(crc) != 8 or len(nonce) != 2 * _NONCE_BYTES or b"%08x" % zlib.crc32(body) != crc:
        return None
    try:
        text = name.decode("ascii")
        if not text.endswith(CARD_SUFFIX):
            return None
        parse_experiment_id(text.removesuffix(CARD_SUFFIX))
    except (UnicodeDecodeError, ArtifactError):
        return None
    return text
