"""What the catalog keeps under the state root, and the checks before anything of it is used.

    <state_root>/catalog/<project_key>/
        head        which index is current, a manifest of its files, what it is true of
        table       every card file seen: its stamp, problem or index state (read to catch up)
        lock        the one writer's lock (flock); readers never take it
        g-<hex>/    the tantivy index of one generation (a rebuild makes a new one)

`head` and `table` are our own files: a magic line, an xxh3-64 of the payload, then msgpack,
written whole beside their name and renamed over it. Nothing here is trusted: every file is
opened `O_NOFOLLOW | O_NONBLOCK` (a FIFO never hangs a reader), `fstat`ed (a regular file of
ours, within its size bound) before a byte is read, and checked against its checksum. The index
directory must hold exactly the regular files the head's manifest names, with their sizes and
xxh3 digests, before tantivy opens it: a file that is not what we wrote (truncated, flipped,
swapped for a FIFO, a symlink, a directory or 1 GB of junk) means a rebuild from the card files,
never a traceback, a hang or a read of unbounded size.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
from collections.abc import Iterator, Mapping
from typing import TypeVar

import msgspec
import xxhash

import fsedge as _fs
from cards.errors import ArtifactError, StoreIOError
from cas._card_log import LogMark
from cas._catalog_table import Table

HEAD = "head"
TABLE = "table"
LOCK = "lock"
GENERATION_PREFIX = "g-"
_MAGIC = b"artmem-catalog-file 1\n"
_DIGEST_BYTES = 8
MAX_HEAD_BYTES = 1 << 20
# A table row is ~100 bytes; the largest project (cards_per_project) stays far below this.
MAX_TABLE_BYTES = 256 << 20
# The index of the largest project is a few tens of MB.
MAX_INDEX_BYTES = 1 << 30
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20
# tantivy's lock files, created empty by a writer or a reader; never in a manifest.
_LOCK_FILES = frozenset({".tantivy-writer.lock", ".tantivy-meta.lock"})
# Files a writer changes in place; every other index file is written once.
_MUTABLE = frozenset({"meta.json", ".managed.json"})

T = TypeVar("T")
GENERATION = re.compile(r"g-[0-9a-f]{16}")
_CARD_NAME = re.compile(r"exp_[a-z2-7]{52}\.json")


class Head(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """Which index is current and what it is true of."""

    format: str
    project: str
    max_cards: int
    generation: str
    manifest: dict[str, tuple[int, str]]  # file name -> (size, xxh3-64 hex)
    table: str  # the table file's xxh3-64 hex: a table of another save is not this one's
    token: str | None  # the store's cards version the index is true of
    mark: LogMark | None  # how far the card log was read
    cards: int
    skipped: int
    states: dict[str, int]


def encode(value: object) -> bytes:
    """A file of ours holding `value`: magic, checksum, msgpack."""
    payload = msgspec.msgpack.encode(value)
    return _MAGIC + xxhash.xxh3_64_digest(payload) + payload


def digest_of(raw: bytes) -> str:
    """The checksum an encoded file carries, as hex (the head names its table by it)."""
    return raw[len(_MAGIC) : len(_MAGIC) + _DIGEST_BYTES].hex()


def decode(raw: bytes, kind: type[T]) -> T | None:
    """The value of a file of ours, or None if it is not one (torn, flipped, foreign)."""
    start = len(_MAGIC) + _DIGEST_BYTES
    if not raw.startswith(_MAGIC) or len(raw) < start:
        return None
    payload = memoryview(raw)[start:]
    if xxhash.xxh3_64_digest(payload) != raw[len(_MAGIC) : start]:
        return None
    try:
        return msgspec.msgpack.decode(payload, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def valid_table(table: Table) -> bool:
    """Whether every row names a card file (a table's names reach the store's card reads)."""
    return all(_CARD_NAME.fullmatch(name) for name in table)


def read_file(path: str, max_bytes: int) -> bytes | None:
    """A regular file of ours of at most `max_bytes`; None for anything else (never blocks)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not _ours(st) or st.st_size > max_bytes:
            return None
        return _fs.read_small(fd, max_bytes, st.st_size)
    except (OSError, StoreIOError):
        return None
    finally:
        os.close(fd)


def _ours(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def write_file(path: str, data: bytes) -> None:
    """Replace `path` with `data` atomically.

    Raises:
        StoreIOError: it could not be written.
    """
    try:
        _fs.write_new(path, [data], replace=True)
    except OSError as exc:
        raise StoreIOError(f"cannot write the catalog: {exc.strerror}") from exc


def make_dir(path: str) -> None:
    """Create the catalog directory (and the state root above it) 0700.

    Raises:
        StoreIOError: it could not be created, or is not a directory of ours.
    """
    parent = os.path.dirname(path)
    try:
        os.makedirs(os.path.dirname(parent), mode=_fs.DIR_MODE, exist_ok=True)
        for level in (parent, path):  # anything else in their place is ours to replace
            with contextlib.suppress(FileNotFoundError):
                if not _own_dir(os.lstat(level)):
                    _remove(level)
            with contextlib.suppress(FileExistsError):
                os.mkdir(level, _fs.DIR_MODE)
        st = os.lstat(path)
    except OSError as exc:
        raise StoreIOError(f"cannot create the catalog directory: {exc.strerror}") from exc
    if not _own_dir(st):
        raise StoreIOError("the catalog directory is not a directory of this user")


def _own_dir(st: os.stat_result) -> bool:
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Hold the catalog's writer lock (`path`/lock) for the block; one writer at a time.

    Raises:
        StoreIOError: the lock could not be taken.
    """
    lock = os.path.join(path, LOCK)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(lock, flags, _fs.FILE_MODE)
    except OSError:
        fd = -1
    if fd >= 0 and not _ours(os.fstat(fd)):  # a FIFO or another's file: replace it
        os.close(fd)
        fd = -1
    if fd < 0:
        with contextlib.suppress(OSError):
            _remove(lock)
        try:
            fd = os.open(lock, flags | os.O_EXCL, _fs.FILE_MODE)
        except OSError as exc:
            raise StoreIOError(f"cannot lock the catalog: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        import shutil  # only to remove what is in our place: not at every start

        shutil.rmtree(path)
    else:
        os.unlink(path)


def manifest(index_dir: str, previous: Mapping[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
    """Every file of the index we just wrote: name -> (size, xxh3-64 hex).

    A file written once keeps the digest `previous` gave it at the same size.

    Raises:
        StoreIOError: a file could not be read, or is not a regular file.
    """
    found: dict[str, tuple[int, str]] = {}
    try:
        listed = {
            name: os.lstat(os.path.join(index_dir, name)).st_size for name in os.listdir(index_dir)
        }
    except OSError as exc:
        raise StoreIOError(f"cannot list the catalog index: {exc.strerror}") from exc
    for name, size in listed.items():
        if name in _LOCK_FILES:
            continue
        known = previous.get(name)
        if known is not None and known[0] == size and name not in _MUTABLE:
            found[name] = known
            continue
        digest = _digest(os.path.join(index_dir, name), size)
        if digest is None:
            raise StoreIOError("the catalog index holds a file that is not a regular file")
        found[name] = (size, digest)
    return found


def verify(index_dir: str, files: Mapping[str, tuple[int, str]]) -> bool:
    """Whether `index_dir` holds exactly the regular files `files` names, byte for byte.

    The names must be the directory's own listing, so none climbs out of it.
    """
    if sum(max(size, 0) for size, _ in files.values()) > MAX_INDEX_BYTES:
        return False
    try:
        st = os.lstat(index_dir)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return False
        with os.scandir(index_dir) as entries:
            listed = {entry.name: entry.stat(follow_symlinks=False) for entry in entries}
    except OSError:
        return False
    for name, entry in listed.items():
        if not _ours(entry) or (name in _LOCK_FILES and entry.st_size):
            return False
    if set(listed) - _LOCK_FILES != set(files):
        return False
    buffer = bytearray(_CHUNK)
    return all(
        listed[name].st_size == size
        and _digest(os.path.join(index_dir, name), size, buffer) == digest
        for name, (size, digest) in files.items()
    )


def _digest(path: str, size: int, buffer: bytearray | None = None) -> str | None:
    """The xxh3-64 of the regular file `path` of exactly `size` bytes; None otherwise.

    Read into one reused buffer (`os.readv`): three times faster than a `bytes` per chunk.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    chunk = buffer if buffer is not None else bytearray(_CHUNK)
    view = memoryview(chunk)
    try:
        st = os.fstat(fd)
        if not _ours(st) or st.st_size != size:
            return None
        hasher = xxhash.xxh3_64()
        total = 0
        while count := os.readv(fd, [chunk]):
            total += count
            if total > size:
                return None
            hasher.update(view[:count])
        return hasher.hexdigest() if total == size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def new_generation(path: str) -> str:
    """A new empty index directory's name under `path`.

    Raises:
        StoreIOError: it could not be created.
    """
    name = GENERATION_PREFIX + os.urandom(8).hex()
    try:
        os.mkdir(os.path.join(path, name), _fs.DIR_MODE)
    except OSError as exc:
        raise StoreIOError(f"cannot create a catalog index: {exc.strerror}") from exc
    return name


def remove_others(path: str, keep: str) -> None:
    """Remove every entry of `path` but our files and the `keep` generation (best effort)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(path):
            if name not in {HEAD, TABLE, LOCK, keep}:
                with contextlib.suppress(OSError, ArtifactError):
                    _remove(os.path.join(path, name))
