"""The append-only journal beside a saved catalog: what changed since the catalog was written.

A start that finds changed cards appends one record (the changed cards' index entries) instead
of rewriting the whole catalog, so it answers without waiting for a large save. The journal
names the generation of the catalog file it extends (a random id written into that file): a
journal left over from another generation is ignored whole, and a new catalog file makes the
old journal stale at once, so the two are never mixed.

Layout: `_MAGIC`, the 8-byte generation, then records of (length, CRC-32, marshal payload),
each added by one `write` on a descriptor opened with `O_APPEND`, so records of concurrent
writers never interleave. Reading stops at the first record that is torn, fails its CRC or
does not decode: what comes before it is intact, and nothing after it is trusted.
"""

from __future__ import annotations

import marshal
import os
import stat
import zlib
from typing import Any, cast

from cards.errors import ArtifactError
from cas import _fs
from cas._catalog_index import EXACT_KINDS, Entry
from cas._layout import CARD_SUFFIX

JOURNAL_SUFFIX = ".journal"
_MAGIC = b"artmem-catalog-journal\x00\x01"
GENERATION_BYTES = 8
HEADER_BYTES = _HEADER = len(_MAGIC) + GENERATION_BYTES
_LENGTH, _CRC = 4, 4
# A journal this large is compacted into the catalog file long before; beyond it, not read.
MAX_JOURNAL_BYTES = 1 << 28
_EXACT = frozenset(EXACT_KINDS[1:])


def encode(payload: tuple[object, ...]) -> bytes:
    """One record: length, CRC-32 and the marshalled payload (of marshal's own types)."""
    body = marshal.dumps(cast("Any", payload))
    return len(body).to_bytes(_LENGTH, "little") + zlib.crc32(body).to_bytes(_CRC, "little") + body


def read(path: str, generation: bytes) -> tuple[list[object], int, int]:
    """The intact records of the journal that extends `generation`.

    Returns:
        (records, intact, size): the decoded payloads in order, the length of the journal up
        to the end of the last of them, and the journal's size (larger than `intact` when a
        torn or corrupt record ends it). ([], 0, 0) when there is no journal of ours for that
        generation.
    """
    raw = read_owned(path, MAX_JOURNAL_BYTES)
    if raw is None or raw[:_HEADER] != _MAGIC + generation:
        return [], 0, 0
    records: list[object] = []
    at = _HEADER
    while at + _LENGTH + _CRC <= len(raw):
        length = int.from_bytes(raw[at : at + _LENGTH], "little")
        crc = raw[at + _LENGTH : at + _LENGTH + _CRC]
        body = raw[at + _LENGTH + _CRC : at + _LENGTH + _CRC + length]
        if len(body) != length or zlib.crc32(body).to_bytes(_CRC, "little") != crc:
            break
        try:
            records.append(marshal.loads(body))
        except (ValueError, EOFError, TypeError):
            break
        at += _LENGTH + _CRC + length
    return records, at, len(raw)


def start(path: str, generation: bytes, record: bytes) -> None:
    """Replace the journal with a new one for `generation` holding `record` (atomically).

    Raises:
        OSError, ArtifactError: it could not be written.
    """
    _fs.write_new(path, [_MAGIC + generation, record], replace=True)


def append(path: str, generation: bytes, record: bytes, expected_size: int) -> bool:
    """Append `record` if the journal is still ours, of `generation`, `expected_size` long.

    Another process may have appended meanwhile (its records are intact, so the size may
    only have grown) or replaced the journal: then the journal no longer is what this
    process read, and False tells it to start a new one rather than append blindly.

    Raises:
        OSError: it could not be written.
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return False
        if st.st_size < expected_size or os.pread(fd, _HEADER, 0) != _MAGIC + generation:
            return False
        written = os.write(fd, record)
        if written != len(record):  # a short append (disk full): undo it, or readers stop
            os.ftruncate(fd, st.st_size)
            return False
        return True
    finally:
        os.close(fd)


def plain(entry: Entry) -> tuple[object, ...]:
    """An index entry as plain values for `marshal`."""
    return (entry.key, entry.updated, entry.exact, entry.tf)


def checked_change(
    change: object,
) -> tuple[str, Any, str | None, str | None, Entry | None]:
    """One journal change (name, stamp, problem, state, entry), checked, never trusted.

    Raises:
        ValueError: it does not have the shape `LocalCatalog` writes.
    """
    if not isinstance(change, tuple) or len(change) != 5:
        raise ValueError("a malformed journal change")
    name, stamp, problem, state, plain = change
    if not isinstance(name, str) or not isinstance(stamp, tuple | None):
        raise ValueError("a malformed journal change")
    if not isinstance(problem, str | None) or not isinstance(state, str | None):
        raise ValueError("a malformed journal change")
    if plain is None:
        return name, stamp, problem, state, None
    if not isinstance(plain, tuple) or len(plain) != 4:
        raise ValueError("a malformed journal entry")
    key, updated, exact, tf = plain
    if key + CARD_SUFFIX != name or not isinstance(updated, float) or state is None:
        raise ValueError("a malformed journal entry")
    if not isinstance(exact, tuple) or not all(
        isinstance(pair, tuple) and len(pair) == 2 and pair[0] in _EXACT for pair in exact
    ):
        raise ValueError("a malformed journal entry")
    if not isinstance(tf, dict) or not all(
        isinstance(t, str) and type(n) is int and 0 < n < 1 << 16 for t, n in tf.items()
    ):
        raise ValueError("a malformed journal entry")
    return name, stamp, problem, state, Entry(key, updated, exact, tf)


def read_owned(path: str, max_bytes: int) -> bytes | None:
    """The file's bytes if it is a regular file of ours within `max_bytes`, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        return _fs.read_small(fd, max_bytes, st.st_size)
    except (OSError, ArtifactError):
        return None
    finally:
        os.close(fd)
