"""What a bucket's service really does with conditional writes and checksums, probed on first use.

S3-compatible services differ where the store's guarantees live (a real Ceph RGW 16.2 refuses a
quoted ETag in `If-Match`, ignores `If-None-Match` on a multipart completion, and stores a wrong
`x-amz-checksum-sha256` as it is). So before its first write a store asks the service, on a
scratch key under the project's `tmp/` (removed at once; `fsck --repair` removes one a crash
left):

- `create_if_absent`: a second `PUT` with `If-None-Match: *` is refused (412);
- `complete_if_absent`: completing a multipart upload with `If-None-Match: *` over an existing
  key is refused;
- `replace_etag`: the ETag form (`quoted` as the service returns it, or `unquoted`) with which
  `If-Match` replaces the current version, a stale ETag being refused; None when neither works;
- `checksums_enforced`: a body with a wrong declared SHA-256 is refused.

The answer is kept per endpoint and bucket (in the process, and in a small file under the cache
root) and probed again when the service surprises a caller (a 412 on a version that did not
change, a 501). The store adapts where that is safe and refuses, naming the capability, where it
is not (`BucketStore`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import threading
from datetime import UTC, datetime

import msgspec

import fsedge as _fs
from cards.errors import BackendUnsupported
from cas._bucket._client import BucketClient, Conflict, DigestRefused, Unsupported

QUOTED = "quoted"
UNQUOTED = "unquoted"
_MAX_FILE_BYTES = 4096


class Capabilities(msgspec.Struct, frozen=True):
    """What the service did when probed (see the module docstring)."""

    create_if_absent: bool
    complete_if_absent: bool
    replace_etag: str | None
    checksums_enforced: bool
    probed_at: str = ""

    def view(self) -> dict[str, object]:
        """The capabilities as `artmem status` prints them."""
        return {
            "create_if_absent": self.create_if_absent,
            "complete_if_absent": self.complete_if_absent,
            "replace_if_version": self.replace_etag is not None,
            "etag_form": self.replace_etag,
            "checksums_enforced": self.checksums_enforced,
            "probed_at": self.probed_at,
        }

    def require_create(self) -> None:
        """Refuse a write that needs a conditional create.

        Raises:
            BackendUnsupported: the service overwrites an existing key on `If-None-Match: *`.
        """
        if not self.create_if_absent:
            raise BackendUnsupported(
                "create_if_absent",
                "the bucket's service ignores If-None-Match on PUT (conditional create): "
                "concurrent records could overwrite each other; use a service that supports it",
            )

    def require_replace(self) -> None:
        """Refuse a card update without a working conditional replace.

        Raises:
            BackendUnsupported: `If-Match` works with neither ETag form.
        """
        if self.replace_etag is None:
            raise BackendUnsupported(
                "replace_if_version",
                "the bucket's service has no working conditional replace (If-Match on PUT), so "
                "a card update could silently lose another host's; the card was not changed",
            )


_KNOWN: dict[tuple[str, str], Capabilities] = {}
_LOCK = threading.Lock()


def known(client: BucketClient, cache_root: str, endpoint: str | None, scratch: str,
          *, refresh: bool = False) -> Capabilities:  # fmt: skip
    """The capabilities of `client`'s bucket: remembered, or probed now under `scratch`.

    The client is set to the ETag form the service accepts.

    Raises:
        StoreIOError: the bucket failed.
    """
    where = (endpoint or "", client.bucket)
    path = _path(cache_root, where)
    with _LOCK:
        caps = None if refresh else _KNOWN.get(where) or _load(path)
        if caps is None:
            caps = probe(client, scratch)
            _save(path, caps)
        _KNOWN[where] = caps
    client.quoted_etags = caps.replace_etag != UNQUOTED
    return caps


def cached(cache_root: str, endpoint: str | None, bucket: str) -> Capabilities | None:
    """The capabilities remembered for a bucket, without asking it; None if never probed."""
    where = (endpoint or "", bucket)
    return _KNOWN.get(where) or _load(_path(cache_root, where))


def probe(client: BucketClient, scratch: str) -> Capabilities:
    """Ask the service what it does, on keys starting with `scratch` (removed afterwards).

    Raises:
        StoreIOError: the bucket failed.
    """
    key = f"{scratch}probe-{secrets.token_hex(8)}"
    saved = client.quoted_etags
    try:
        create = _create_if_absent(client, key)
        replace = _replace_etag(client, key)
        complete = _complete_if_absent(client, key)
        enforced = _checksums_enforced(client, key + "-sum")
    finally:
        client.quoted_etags = saved
        client.delete(key)
        client.delete(key + "-sum")
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return Capabilities(create, complete, replace, enforced, now)


def _create_if_absent(client: BucketClient, key: str) -> bool:
    try:
        client.put(key, b"probe-1", create=True)
    except Unsupported:
        client.put(key, b"probe-1")
        return False
    try:
        client.put(key, b"probe-2", create=True)
    except Conflict:
        return True
    except Unsupported:
        return False
    return False


def _replace_etag(client: BucketClient, key: str) -> str | None:
    for form in (QUOTED, UNQUOTED):
        head = client.head(key)
        if head is None:
            return None
        client.quoted_etags = form == QUOTED
        try:
            client.put(key, f"probe-{form}".encode(), if_match=head.etag)
        except Conflict:
            continue
        except Unsupported:
            return None
        try:  # the version just replaced must now be refused, or the condition is ignored
            client.put(key, b"probe-stale", if_match=head.etag)
        except Conflict:
            return form
        except Unsupported:
            return None
        return None
    return None


def _complete_if_absent(client: BucketClient, key: str) -> bool:
    upload_id = client.start_upload(key)
    try:
        etag = client.upload_part(key, upload_id, 1, bytearray(b"probe-part"))
        try:
            client.complete(key, upload_id, [etag], create=True)
        except (Conflict, Unsupported) as exc:
            return isinstance(exc, Conflict)
        return False
    finally:
        client.abort(key, upload_id)


def _checksums_enforced(client: BucketClient, key: str) -> bool:
    wrong = hashlib.sha256(b"not the body").digest()
    with client.unchecked():
        try:
            client.put(key, b"probe-body", checksum=wrong)
        except DigestRefused:
            return True
    return False


def _path(cache_root: str, where: tuple[str, str]) -> str:
    name = hashlib.sha256("\0".join(where).encode()).hexdigest()[:32]
    return os.path.join(cache_root, "capabilities", f"{name}.json")


def _load(path: str) -> Capabilities | None:
    """The remembered capabilities; None when absent or unreadable (probe again)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = _fs.read_small(fd, _MAX_FILE_BYTES)
        return msgspec.json.decode(data, type=Capabilities)
    except (OSError, ValueError, msgspec.DecodeError):
        return None
    finally:
        os.close(fd)


def _save(path: str, caps: Capabilities) -> None:
    """Remember the capabilities (best effort: a failure only means probing again)."""
    with contextlib.suppress(OSError, FileExistsError):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        _fs.write_new(path, [msgspec.json.encode(caps)], replace=True)
