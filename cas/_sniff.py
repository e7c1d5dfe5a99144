"""The media type of recorded bytes, told by their content, never by their name alone.

Parquet and Arrow carry magic numbers at both ends, so they are recognised for certain; PNG
images and NumPy `.npy` arrays by the magic number they start with. CSV and JSON carry none;
the file name's extension names them only when the content names nothing. Reads a few bytes
at each end of an open file: no pyarrow on the record path.
"""

from __future__ import annotations

import os

from cards import CardMetadata, InvalidInput
from cards.errors import StoreIOError

OCTET_STREAM = "application/octet-stream"
PARQUET = "application/vnd.apache.parquet"
ARROW_FILE = "application/vnd.apache.arrow.file"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
PNG = "image/png"
NPY = "application/x-npy"
MAGIC_TYPES = frozenset({PARQUET, ARROW_FILE, ARROW_STREAM})
"""The table formats a magic number proves: an explicit type never contradicts them."""
PROVEN_TYPES = MAGIC_TYPES | {PNG, NPY}
"""Every type a magic number proves (an image or array may still be recorded as another type)."""
_EXTENSIONS = {
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".ndjson": "application/jsonl",
}
_ARROW_MAGIC = b"ARROW1"
_CONTINUATION = b"\xff\xff\xff\xff"
_END_OF_STREAM = _CONTINUATION + b"\x00\x00\x00\x00"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NPY_MAGIC = b"\x93NUMPY"


class MediaTypeMismatch(InvalidInput):
    """An explicit media type contradicts what the recorded bytes are."""


def detect(fd: int, size: int, name: str, metadata: CardMetadata) -> CardMetadata:
    """`metadata` with the media type the staged bytes at `fd` show, when none was given.

    The detected type counts as given (a re-record then corrects an `octet-stream` card) only
    when the content's magic number proves it; a type guessed from the name never replaces one.

    Raises:
        MediaTypeMismatch: an explicit media type contradicts the content.
        StoreIOError: the staged bytes could not be read.
    """
    try:
        detected = sniff(fd, size, name)
    except OSError as exc:
        raise StoreIOError(f"cannot read the staged object: {exc.strerror}") from exc
    if "media_type" in metadata.given:
        check_media_type(metadata.media_type, detected)
        return metadata
    if detected is None:
        return metadata
    return metadata.with_values({"media_type": detected}, given=detected in PROVEN_TYPES)


def sniff(fd: int, size: int, name: str) -> str | None:
    """The media type of the `size` bytes open at `fd`, or None when nothing tells it."""
    head = os.pread(fd, 8, 0)
    tail = os.pread(fd, 8, max(0, size - 8))
    if size >= 12 and head[:4] == b"PAR1" and tail[-4:] == b"PAR1":
        return PARQUET
    if size >= 12 and head[:6] == _ARROW_MAGIC and tail[-6:] == _ARROW_MAGIC:
        return ARROW_FILE
    if size >= 16 and head[:4] == _CONTINUATION and tail == _END_OF_STREAM:
        return ARROW_STREAM
    if size > 8 and head == _PNG_MAGIC:
        return PNG
    if size >= 10 and head[:6] == NPY_MAGIC:
        return NPY
    return _EXTENSIONS.get(os.path.splitext(name)[1].lower())


def check_media_type(explicit: str, detected: str | None) -> None:
    """Refuse an explicit media type the bytes contradict (only magic numbers can contradict).

    Raises:
        MediaTypeMismatch: the bytes are a table format other than `explicit`, or `explicit`
            names a table format the bytes are not.
    """
    if explicit == OCTET_STREAM or explicit == detected:
        return
    if detected in MAGIC_TYPES:
        raise MediaTypeMismatch(
            f"--media-type {explicit} contradicts the content, which is {detected}; "
            "omit --media-type to have it detected"
        )
    if explicit in MAGIC_TYPES:
        raise MediaTypeMismatch(
            f"--media-type {explicit} contradicts the content: the bytes lack its magic "
            "number; omit --media-type or record the right file"
        )
