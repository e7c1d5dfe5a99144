"""The bucket edge: the only module that imports boto3/botocore, loaded with the first client.

Every SDK error is translated here (`raise ... from exc`): 412 becomes `Conflict` (a conditional
write lost), 404 becomes None or `ObjectMissing`, everything else `StoreIOError`. Messages name
the operation and the service's error code only: never a key, an endpoint's credentials, a
signature or the SDK's own message (which may quote request details).

A write may declare its body's SHA-256 (`checksum`): it is sent as the request's checksum (so
the SDK computes no CRC32 of its own, and the service verifies it), and a hook proves the body
against it just before it is sent (`ChecksumMismatch` otherwise). The proof reuses the SHA-256
the signer already took of the body when it signs payloads (plain HTTP, or any request that
carries its own checksum), so it costs no second hash.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from cards.errors import ObjectMissing, StoreIOError
from cas._bucket._body_check import (
    BODY_CHECKED,
    UNCHECKED,
    check_body,
    checksum_header,
)
from cas._bucket._settings import BucketSettings

if TYPE_CHECKING:
    from boto3.session import Session
    from botocore.client import BaseClient

SHA256_META = "artmem-sha256"  # the object's SHA-256, set when it is published
_NOT_FOUND = frozenset({"404", "NoSuchKey", "NoSuchUpload", "NotFound"})
_DENIED = frozenset(
    {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}
)


class Conflict(Exception):
    """A conditional write lost: the key exists (`If-None-Match`) or changed (`If-Match`)."""


class Unsupported(Exception):
    """The service refused a request as not implemented (HTTP 501): a capability it lacks."""


class DigestRefused(StoreIOError):
    """The service refused a body as not matching its declared checksum (retryable)."""


class RangeNotSatisfiable(StoreIOError):
    """A ranged read started at or past the key's end (S3's `InvalidRange`, HTTP 416)."""


_DIGEST_CODES = frozenset(
    {"BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch", "XAmzContentSHA256Mismatch"}
)


class Head(msgspec.Struct, frozen=True):
    """What a HEAD or a listing tells about a key."""

    key: str
    size: int
    etag: str
    modified: datetime
    sha256: str | None = None


class Upload(msgspec.Struct, frozen=True):
    """An incomplete multipart upload."""

    key: str
    upload_id: str
    initiated: datetime


# The credential chain's environment: a change starts a new session.
_CHAIN_ENV = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
    "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
)  # fmt: skip
_SHARED: dict[str, Session] = {}  # the process's session, under its chain's environment
_SESSION_LOCK = threading.Lock()  # a session is not thread-safe; its clients are


def _session() -> Session:
    """The process's SDK session (the standard chain: environment, files, roles).

    Shared by every client: a new session loads the service model again (a client then takes
    ~0.1 s to make, not ~15 ms); a change of the chain's environment variables starts another.
    """
    import boto3  # ~0.3 s: only a bucket store ever pays it

    chain = hashlib.sha256(repr([os.environ.get(name) for name in _CHAIN_ENV]).encode()).hexdigest()
    with _SESSION_LOCK:
        if chain not in _SHARED:
            _SHARED.clear()
            _SHARED[chain] = boto3.session.Session()
        return _SHARED[chain]


def _make(settings: BucketSettings, session: Session) -> BaseClient:
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "max_attempts": 4},
        max_pool_connections=max(10, 2 * settings.max_in_flight + 2),
        connect_timeout=10,
        read_timeout=60,
    )
    with _SESSION_LOCK:
        return session.client(
            "s3", endpoint_url=settings.endpoint_url, region_name=settings.region, config=config
        )


@contextlib.contextmanager
def _errors(operation: str) -> Iterator[None]:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "unknown"))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 412 or code == "PreconditionFailed":
            raise Conflict(operation) from exc
        if status == 501 or code == "NotImplemented":
            raise Unsupported(operation) from exc
        if code == "InvalidRange" or status == 416:
            raise RangeNotSatisfiable(f"the range is past the key's end ({operation})") from exc
        if code in _DIGEST_CODES:
            raise DigestRefused(f"the bucket refused a body's checksum for {operation}") from exc
        if code == "NoSuchBucket":
            raise StoreIOError("the configured bucket does not exist") from exc
        if code in _NOT_FOUND or status == 404:
            raise ObjectMissing(f"the bucket has no such key ({operation})") from exc
        if code in _DENIED or status == 403:
            raise StoreIOError(
                f"the bucket refused {operation} ({code}): check the credentials the standard "
                "AWS chain provides and the bucket policy"
            ) from exc
        raise StoreIOError(f"the bucket failed {operation} ({code}, HTTP {status})") from exc
    except NoCredentialsError as exc:
        raise StoreIOError(
            "no credentials for the bucket: provide them through the standard AWS chain "
            "(environment, shared files, or an instance role)"
        ) from exc
    except BotoCoreError as exc:
        raise StoreIOError(
            f"the bucket endpoint could not be reached for {operation} ({type(exc).__name__})"
        ) from exc


class BucketClient:
    """One bucket, through one thread-safe SDK client."""

    def __init__(self, settings: BucketSettings, session: Session | None = None) -> None:
        self.bucket = settings.bucket
        self._settings = settings
        self.quoted_etags = True  # the ETag form `If-Match` takes (the probe may say otherwise)
        with _errors("connect"):
            self._session = session or _session()
            self._s3 = _make(settings, self._session)
        for event in BODY_CHECKED:
            self._s3.meta.events.register(event, check_body)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled for a slice's reading helper: a client of the same bucket, made there."""
        return (_client_again, (self._settings, self.quoted_etags))

    def forked(self) -> BucketClient:
        """A client of the same bucket with connections of its own, for a forked child.

        A child must never use the connections it inherited: one it left mid-response would
        hand its parent's next request the rest of that response. The session is shared, so
        its service model and resolved credentials are not loaded again (~15 ms, not ~0.1 s).

        Raises:
            StoreIOError: the client could not be made.
        """
        return BucketClient(self._settings, self._session)

    def head(self, key: str) -> Head | None:
        """The key's size, ETag and our SHA-256 metadata; None when it does not exist."""
        try:
            with _errors("head"):
                reply = self._s3.head_object(Bucket=self.bucket, Key=key)
        except ObjectMissing:
            return None
        meta = reply.get("Metadata") or {}
        return Head(
            key, reply["ContentLength"], reply["ETag"], reply["LastModified"], meta.get(SHA256_META)
        )

    def get_range(
        self, key: str, start: int, end: int | None, etag: str | None = None
    ) -> tuple[bytes, str]:
        """Bytes `[start, end)` of a key (`end` None: to its end) and the version's ETag.

        With `etag`, only of the version it names.

        Raises:
            ObjectMissing: the key is gone. Conflict: it changed (`etag`).
            RangeNotSatisfiable: `start` is at or past its end. StoreIOError: the bucket failed.
        """
        extra = {"IfMatch": etag} if etag else {}
        span = f"bytes={start}-{'' if end is None else end - 1}"
        with _errors("ranged get"):
            reply = self._s3.get_object(Bucket=self.bucket, Key=key, Range=span, **extra)
            data: bytes = reply["Body"].read()
        return data, str(reply["ETag"])

    def put(
        self,
        key: str,
        body: bytes | bytearray,
        *,
        create: bool = False,
        if_match: str | None = None,
        sha256: str | None = None,
        checksum: bytes | None = None,
    ) -> str:
        """Write a key whole; `create` only if absent, `if_match` only over that ETag.

        `sha256` labels the key (metadata); `checksum` is the body's SHA-256, proven before it
        is sent.

        Raises:
            Conflict: the condition failed. ChecksumMismatch: the body is not `checksum`'s.
            StoreIOError: the bucket failed.
        """
        extra: dict[str, Any] = {}
        if checksum is not None:
            extra["ChecksumSHA256"] = checksum_header(checksum)
        if create:
            extra["IfNoneMatch"] = "*"
        if if_match is not None:
            extra["IfMatch"] = if_match if self.quoted_etags else if_match.strip('"')
        if sha256 is not None:
            extra["Metadata"] = {SHA256_META: sha256}
        with _errors("put"):
            reply = self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, **extra)
        return str(reply["ETag"])

    @contextlib.contextmanager
    def unchecked(self) -> Iterator[None]:
        """Send declared checksums unproven in this thread (the capability probe only)."""
        UNCHECKED.on = True
        try:
            yield
        finally:
            UNCHECKED.on = False

    def listing(self, prefix: str) -> Iterator[Head]:
        """Every key below `prefix`, in key order (paginated)."""
        for item in self._pages("list", "list_objects_v2", "Contents", prefix):
            yield Head(item["Key"], item["Size"], item["ETag"], item["LastModified"])

    def _pages(self, operation: str, name: str, field: str, prefix: str) -> Iterator[Any]:
        """The items of every page of a paginated listing below `prefix`."""
        with _errors(operation):
            for page in self._s3.get_paginator(name).paginate(Bucket=self.bucket, Prefix=prefix):
                yield from page.get(field, ())

    def start_upload(self, key: str, sha256: str | None = None, *, checksums: bool = False) -> str:
        """Begin a multipart upload; its parts stay invisible until it completes.

        With `checksums`, every part must declare its SHA-256 (`upload_part`, `complete`).
        """
        extra: dict[str, Any] = {"Metadata": {SHA256_META: sha256}} if sha256 is not None else {}
        if checksums:
            extra["ChecksumAlgorithm"] = "SHA256"
        with _errors("create upload"):
            reply = self._s3.create_multipart_upload(Bucket=self.bucket, Key=key, **extra)
        return str(reply["UploadId"])

    def upload_part(
        self,
        key: str,
        upload_id: str,
        number: int,
        body: bytes | bytearray,
        checksum: bytes | None = None,
    ) -> str:
        """Send one part (`checksum`: its SHA-256, proven before it is sent); its ETag.

        A bytearray is sent as it is, in one write (bytes are wrapped in a stream first).

        Raises:
            ChecksumMismatch: the body is not `checksum`'s. StoreIOError: the bucket failed.
        """
        extra = {"ChecksumSHA256": checksum_header(checksum)} if checksum is not None else {}
        with _errors("upload part"):
            reply = self._s3.upload_part(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
                **extra,
            )
        return str(reply["ETag"])

    def complete(
        self,
        key: str,
        upload_id: str,
        etags: Sequence[str],
        *,
        create: bool = False,
        checksums: Sequence[bytes] = (),
    ) -> str:
        """Complete an upload; with `create`, only if the key does not exist yet.

        `checksums` are the parts' SHA-256 digests, for an upload started with `checksums`.

        Returns the new object's ETag.

        Raises:
            Conflict: `create` and the key exists (the upload stays open: abort it).
            Unsupported: the service refuses a conditional completion.
        """
        parts: list[dict[str, Any]] = [
            {"PartNumber": n, "ETag": etag} for n, etag in enumerate(etags, start=1)
        ]
        for part, digest in zip(parts, checksums, strict=False):
            part["ChecksumSHA256"] = checksum_header(digest)
        extra = {"IfNoneMatch": "*"} if create else {}
        with _errors("complete upload"):
            reply = self._s3.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                **extra,
            )
        return str(reply.get("ETag", ""))

    def abort(self, key: str, upload_id: str) -> None:
        """Abort an upload (already gone: nothing to do)."""
        with contextlib.suppress(ObjectMissing), _errors("abort upload"):
            self._s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)

    def uploads(self, prefix: str) -> Iterator[Upload]:
        """Incomplete multipart uploads below `prefix`."""
        for item in self._pages("list uploads", "list_multipart_uploads", "Uploads", prefix):
            yield Upload(item["Key"], item["UploadId"], item["Initiated"])

    def delete(self, key: str) -> None:
        """Remove a key (absent: nothing to do)."""
        with contextlib.suppress(ObjectMissing), _errors("delete"):
            self._s3.delete_object(Bucket=self.bucket, Key=key)

    def copy(self, source: str, dest: str) -> None:
        """Copy a key inside the bucket (for quarantine and fsck repairs)."""
        with _errors("copy"):
            self._s3.copy_object(
                Bucket=self.bucket, Key=dest, CopySource={"Bucket": self.bucket, "Key": source}
            )


def _client_again(settings: BucketSettings, quoted_etags: bool) -> BucketClient:
    client = BucketClient(settings)
    client.quoted_etags = quoted_etags
    return client
