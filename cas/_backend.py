"""`Backend`: where one project's bytes live, in six operations on keys.

A key is a '/'-separated path below the project's root (`objects/ab/art_…`, `cards/exp_….json`,
`tmp/…`), the same on every backend (`_layout`). The operations:

- `stat(key)`: the key's size and version, or None;
- `read(key, start, end, version=)`: bytes `[start, end)` and the version they belong to; with
  `version`, only of that version (`IntegrityError` if the key now holds another);
- `list(prefix)`: every key starting with `prefix`, in key order;
- `create(key, body)`: only if the key is absent (None when it exists: never an overwrite);
- `replace(key, body, version)`: only over exactly that version (None when another is there);
- `delete(key)`: remove it (absent: nothing to do).

A version changes whenever the bytes may have (a file's inode, size and times; an object's
ETag) and is compared for equality only. Two implementations: `LocalBackend` (a directory,
descriptor-relative opens, fsynced stage then link or rename) and `BucketBackend`
(`cas._bucket._backend`: conditional requests, in the ETag form the service accepts). The
same contract tests run against both, and against a double of a real service's quirks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import msgspec

from cards.errors import PathEscape


class Entry(msgspec.Struct, frozen=True):
    """What `stat` and `list` tell about a key: its size, version and when it last changed."""

    key: str
    size: int
    version: str
    modified: float  # seconds since the epoch: last written, linked or renamed


class Read(msgspec.Struct, frozen=True):
    """Bytes read from a key, and the version they belong to."""

    data: bytes
    version: str


def check_key(key: str) -> tuple[str, ...]:
    """The key's components, each a plain name (the same rule on every backend).

    Raises:
        PathEscape: a component is empty, '.', '..', or holds a NUL or a backslash.
    """
    parts = tuple(key.split("/"))
    for part in parts:
        if part in ("", ".", "..") or "\x00" in part or "\\" in part:
            raise PathEscape("a store key has an empty, '.', '..' or unprintable component")
    return parts


class Backend(Protocol):
    """One project's keys (see the module docstring)."""

    def stat(self, key: str) -> Entry | None:
        """The key's entry, or None when it does not exist."""
        ...

    def read(
        self, key: str, start: int = 0, end: int | None = None, *, version: str | None = None
    ) -> Read:
        """Bytes `[start, end)` of the key (`end` None: to its end).

        Raises:
            ObjectMissing: the key does not exist.
            IntegrityError: `version` is given and the key holds another.
            StoreIOError: the backend failed.
        """
        ...

    def list(self, prefix: str) -> Iterator[Entry]:
        """Every key starting with `prefix`, in key order."""
        ...

    def create(self, key: str, body: bytes) -> Entry | None:
        """Write the key only if it does not exist; its new entry, or None when it exists.

        Raises:
            BackendUnsupported: the service cannot create conditionally.
            StoreIOError: the backend failed.
        """
        ...

    def replace(self, key: str, body: bytes, version: str) -> Entry | None:
        """Write the key only over exactly `version`; its new entry, or None when that lost.

        Raises:
            BackendUnsupported: the service has no working conditional replace.
            StoreIOError: the backend failed.
        """
        ...

    def delete(self, key: str) -> None:
        """Remove the key (absent: nothing to do).

        Raises:
            StoreIOError: the backend failed.
        """
        ...
