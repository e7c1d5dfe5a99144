"""What a project's objects add up to, kept between runs and proven fresh by directory stamps.

Quotas and the deduplication probe need the count, bytes and sizes of all objects. Walking
`objects/` stats every object (0.3 s at 20,000 objects, twice per large record); this summary
keeps, per shard directory, the directory's stamp (inode, mtime_ns) and the sizes of the objects
it held, in one file beside `objects/`. A shard is listed again only when its stamp moved, so
an unchanged project of any size costs one `stat` per shard directory.

Racy stamps: a directory changed within the clock tick of a listing keeps its mtime, so a shard
whose mtime is not older than the listing's start minus `RACY_NS` is never trusted later (git
treats its index the same way). Objects are immutable once published, so a shard's stamp moves
with every change that matters: a publication (link), a quarantine (rename) or a removal.

The file is a cache, never a source of truth: absent, torn, oversized or of another version, it
is rebuilt by listing; it is replaced atomically; only a writer that passes a staging directory
persists it, so a read-only store writes nothing.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator

import msgspec

import fsedge as _fs
from cards.errors import PathEscape, SourceMissing, StoreIOError
from cas._layout import OBJECTS, USAGE

VERSION = 1
RACY_NS = 2_000_000_000
MAX_SUMMARY_BYTES = 64 << 20

# A shard: its stamp (inode, mtime_ns) and the sizes of the objects it held.
_Shard = tuple[int, int, tuple[int, ...]]
# Lists the sizes of the objects in one shard directory: (shard_fd, shard name) -> sizes.
ShardLister = Callable[[int, str], Iterable[int]]


class ObjectSummary(msgspec.Struct, frozen=True):
    """The named objects of a project: how many, their bytes, and the sizes that occur."""

    objects: int
    bytes: int
    sizes: frozenset[int]


def summarise(
    project_fd: int, shard_sizes: ShardLister, stage_fd: int | None = None
) -> ObjectSummary:
    """The summary of `objects/`, re-listing only shards whose stamp moved or is racy.

    `shard_sizes(shard_fd, shard)` lists one shard's object sizes. With `stage_fd`, a summary
    that had to list anything is persisted (staged there); without, nothing is written.
    """
    known, listed_from = _load(project_fd)
    started = time.time_ns()  # before any listing: what this listing can vouch for
    shards: dict[str, _Shard] = {}
    listed = False
    for name, shard_fd in _open_shards(project_fd):
        try:
            st = os.fstat(shard_fd)
            old = known.get(name)
            if old is not None and old[:2] == (st.st_ino, st.st_mtime_ns):
                if _settled(st.st_mtime_ns, listed_from):
                    shards[name] = old
                    continue
            shards[name] = (st.st_ino, st.st_mtime_ns, tuple(shard_sizes(shard_fd, name)))
            listed = True
        finally:
            os.close(shard_fd)
    if stage_fd is not None and (listed or shards.keys() != known.keys()):
        _store(project_fd, stage_fd, started, shards)
    sizes = [size for _, _, held in shards.values() for size in held]
    return ObjectSummary(len(sizes), sum(sizes), frozenset(sizes))


def _settled(mtime_ns: int, listed_from_ns: int) -> bool:
    """Whether a directory stamp is old enough that any later change must move it."""
    return mtime_ns < listed_from_ns - RACY_NS


def _open_shards(project_fd: int) -> Iterator[tuple[str, int]]:
    try:
        names = sorted(_fs.list_dir_beneath(project_fd, (OBJECTS,)))
    except (SourceMissing, PathEscape):
        return
    for name in names:
        try:
            yield name, _fs.open_dir_beneath(project_fd, (OBJECTS, name))
        except (SourceMissing, PathEscape):
            continue  # not a directory: `fsck` reports it; it holds no object


def _load(project_fd: int) -> tuple[dict[str, _Shard], int]:
    """The persisted shards and when their listing started; nothing if absent or not ours."""
    try:
        fd = _fs.open_file_beneath(project_fd, (USAGE,))
    except (SourceMissing, PathEscape, StoreIOError):
        return {}, 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return {}, 0
        return _parsed(msgspec.json.decode(_fs.read_small(fd, MAX_SUMMARY_BYTES, st.st_size)))
    except (StoreIOError, OSError, msgspec.DecodeError, RecursionError, TypeError, ValueError):
        return {}, 0
    finally:
        os.close(fd)


def _parsed(document: object) -> tuple[dict[str, _Shard], int]:
    if not isinstance(document, dict) or document.get("version") != VERSION:
        return {}, 0
    started, shards = document.get("started_ns"), document.get("shards")
    if not isinstance(started, int) or not isinstance(shards, dict):
        return {}, 0
    parsed: dict[str, _Shard] = {}
    for name, entry in shards.items():
        ino, mtime, sizes = entry  # a wrong shape raises TypeError or ValueError: rebuilt
        if not all(isinstance(v, int) and v >= 0 for v in (ino, mtime, *sizes)):
            raise ValueError("a summary entry is not a stamp and sizes")
        parsed[name] = (ino, mtime, tuple(sizes))
    return parsed, started


def _store(project_fd: int, stage_fd: int, started: int, shards: dict[str, _Shard]) -> None:
    document = {
        "version": VERSION,
        "started_ns": started,
        "shards": {name: [ino, mtime, list(sizes)] for name, (ino, mtime, sizes) in shards.items()},
    }
    # A summary that cannot be written is rebuilt next time: never a reason to fail a record.
    with contextlib.suppress(StoreIOError):
        _fs.atomic_write(project_fd, USAGE, msgspec.json.encode(document), stage_fd, "summary")
