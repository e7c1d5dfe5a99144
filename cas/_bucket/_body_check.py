"""Every body sent is the bytes whose SHA-256 it declares, proven just before it is sent.

A `before-send` hook on `PutObject` and `UploadPart` (`check_body`): a body that declares an
S3 SHA-256 checksum is hashed (or its SigV4-signed payload hash is taken) and compared, and a
mismatch raises `ChecksumMismatch`, so nothing unproven leaves the process, whether or not the
service enforces declared checksums. The capability probe alone turns it off (`UNCHECKED`), to
send one wrong checksum on purpose.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Mapping
from typing import BinaryIO, Protocol, cast

DECLARED = "x-amz-checksum-sha256"
SIGNED = "X-Amz-Content-SHA256"  # the payload hash SigV4 signed, when it signs the payload
BODY_CHECKED = ("before-send.s3.PutObject", "before-send.s3.UploadPart")
UNCHECKED = threading.local()  # the capability probe sends one wrong checksum on purpose


class Request(Protocol):
    """What the hook reads of the SDK's prepared request (its headers and body)."""

    headers: Mapping[str, str | bytes]
    body: object


class ChecksumMismatch(Exception):
    """A body about to be sent is not the bytes whose SHA-256 it declares (nothing was sent)."""


def check_body(request: Request, **_: object) -> None:
    """Refuse to send a body that differs from the SHA-256 it declares (a `before-send` hook)."""
    declared = request.headers.get(DECLARED)
    if declared is None or getattr(UNCHECKED, "on", False):
        return
    digest = _signed_digest(request.headers.get(SIGNED)) or _body_sha256(request.body)
    if digest != base64.b64decode(declared):
        raise ChecksumMismatch("a body differs from the SHA-256 it declares")


def _signed_digest(value: str | bytes | None) -> bytes | None:
    """The signer's hex payload hash, or None (unsigned payload, or no header)."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if value is None or len(value) != 64:
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None


def _body_sha256(body: object) -> bytes:
    if isinstance(body, bytes | bytearray | memoryview):
        return hashlib.sha256(body).digest()
    stream = cast(BinaryIO, body)  # the SDK wraps bytes in a seekable stream
    position = stream.tell()
    digest = hashlib.sha256()
    while block := stream.read(1 << 20):
        digest.update(block)
    stream.seek(position)
    return digest.digest()


def checksum_header(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")
