"""`BucketBackend`: a project's keys in a bucket (`cas._backend`'s contract), as the service allows.

Keys live below the project's prefix (`BucketKeys.root`). A version is the object's ETag.
`create` is a `PUT` with `If-None-Match: *` and `replace` one with `If-Match` in the ETag form
the service accepts (`_probe`); a service that cannot do either is refused with
`BackendUnsupported` naming the capability, never written blindly. A 412 on a version that is
still the current one is the service refusing the condition's form, not a lost race: the
capabilities are probed again and the write tried once more before it is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from cards.errors import BackendUnsupported, IntegrityError, ObjectMissing, StoreIOError
from cas._backend import Entry, Read, check_key
from cas._bucket._client import BucketClient, Conflict, Head, RangeNotSatisfiable
from cas._bucket._probe import Capabilities

MAX_WHOLE_READ = 64 << 20  # `read` to a key's end (cards, manifests); objects are read in ranges


class BucketBackend:
    """The keys below `root` in `client`'s bucket."""

    def __init__(
        self, client: BucketClient, root: str, capabilities: Callable[[bool], Capabilities]
    ) -> None:
        """`capabilities(refresh)`: the service's, remembered or probed (again if `refresh`)."""
        self._client = client
        self._root = root
        self._capabilities = capabilities

    def _key(self, key: str) -> str:
        check_key(key)
        return self._root + key

    def stat(self, key: str) -> Entry | None:
        """The key's entry (a HEAD), or None."""
        head = self._client.head(self._key(key))
        return None if head is None else self._entry(head)

    def read(
        self, key: str, start: int = 0, end: int | None = None, *, version: str | None = None
    ) -> Read:
        """Bytes `[start, end)` of the key in one ranged GET; with `version`, of that version.

        Raises:
            StoreIOError: `end` is None and the key holds more than `MAX_WHOLE_READ` bytes.
        """
        if end is not None and end <= start:
            entry = self.stat(key)
            if entry is None:
                raise ObjectMissing("the bucket has no such key")
            return Read(b"", entry.version)
        stop = start + MAX_WHOLE_READ + 1 if end is None else end
        try:
            data, etag = self._client.get_range(self._key(key), start, stop, version)
        except Conflict as exc:
            raise IntegrityError("the bucket's object changed while it was read") from exc
        except RangeNotSatisfiable as exc:
            entry = self.stat(key)  # `start` is at or past the end
            if entry is None:
                raise ObjectMissing("the bucket has no such key") from exc
            if version is not None and entry.version != version:
                raise IntegrityError("the bucket's object changed while it was read") from exc
            return Read(b"", entry.version)
        if end is None and len(data) > MAX_WHOLE_READ:
            raise StoreIOError("a key in the bucket is larger than a whole read may be")
        return Read(data, etag)

    def list(self, prefix: str) -> Iterator[Entry]:
        """Every key starting with `prefix`, in key order (paginated listings)."""
        for head in self._client.listing(self._root + prefix):
            yield self._entry(head)

    def create(self, key: str, body: bytes) -> Entry | None:
        """A `PUT` with `If-None-Match: *`; None when the key exists."""
        self._capabilities(False).require_create()
        try:
            etag = self._client.put(self._key(key), body, create=True)
        except Conflict:
            return None
        return Entry(key, len(body), etag, datetime.now(UTC).timestamp())

    def replace(self, key: str, body: bytes, version: str) -> Entry | None:
        """A `PUT` with `If-Match` on `version`; None when another version is there."""
        self._capabilities(False).require_replace()
        for refresh in (True, False):
            try:
                etag = self._client.put(self._key(key), body, if_match=version)
                return Entry(key, len(body), etag, datetime.now(UTC).timestamp())
            except ObjectMissing:
                return None  # gone: no version to replace
            except Conflict:
                if not self._still(key, version):
                    return None  # another writer won: the caller reads and decides again
            if refresh:  # the service refused its own current version: ask it again
                self._capabilities(True).require_replace()
        raise BackendUnsupported(
            "replace_if_version",
            "the bucket's service refused If-Match on a key's current version in every ETag "
            "form; nothing was changed",
        )

    def delete(self, key: str) -> None:
        """Remove the key (absent: nothing to do)."""
        self._client.delete(self._key(key))

    def _still(self, key: str, version: str) -> bool:
        head = self._client.head(self._key(key))
        return head is not None and head.etag.strip('"') == version.strip('"')

    def _entry(self, head: Head) -> Entry:
        key = head.key.removeprefix(self._root)
        return Entry(key, head.size, head.etag, head.modified.timestamp())
