"""The worker's input: bounded lines, and the request envelope read from each.

A line over `MAX_LINE_BYTES` is read in bounded pieces and dropped up to its newline; the reply
to it carries the request id when the start of the line shows it (`prefix_id`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

import msgspec

from cards import InvalidRequest

PROTOCOL = 1
MAX_LINE_BYTES = 1 << 20
DISCARD_PIECE_BYTES = 1 << 16  # the rest of an oversized line is read and dropped in these
ID_SCAN_BYTES = 1 << 16  # how much of an oversized line is searched for its request id
MAX_ID_CHARS = 200


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than `MAX_LINE_BYTES`: its first bytes, and its whole length."""

    prefix: bytes
    size: int


def read_line(stream: BinaryIO, limit: int) -> bytes | Oversized | None:
    """The next line of `stream`, `Oversized` for one over `limit` bytes, None at end of input.

    Memory stays bounded: an oversized line keeps only its first `limit + 1` bytes, and the
    rest of it is read in pieces and dropped up to its newline, never parsed as requests.
    """
    line = stream.readline(limit + 1)
    if not line:
        return None
    if line.endswith(b"\n") or len(line) <= limit:
        return line
    size = len(line)
    while piece := stream.readline(DISCARD_PIECE_BYTES):
        size += len(piece)
        if piece.endswith(b"\n"):
            break
    return Oversized(line, size)


# A JSON string (whole), a lone quote (a string cut off), or a bracket.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|["{}\[\]]')
_COLON = re.compile(rb"[ \t\r\n]*:")
_ID_VALUE = re.compile(
    rb'[ \t\r\n]*(?:(-?(?:0|[1-9][0-9]{0,17}))|("(?:[^"\\]|\\.){0,200}"))[ \t\r\n]*[,}]'
)


def prefix_id(prefix: bytes) -> int | str | None:
    """The top-level `"id"` of a request cut short, when `prefix` holds all of it.

    Only a key of the outermost object counts (an `"id"` inside `params` is someone else's),
    and only a whole integer or a short string, followed by `,` or `}`.
    """
    if not prefix.lstrip().startswith(b"{"):
        return None
    depth = 0
    for token in _TOKEN.finditer(prefix):
        text = token.group()
        if text in (b"{", b"["):
            depth += 1
        elif text in (b"}", b"]"):
            depth -= 1
        elif text == b'"':
            return None  # a string runs past the prefix, and everything after it
        elif depth == 1 and text == b'"id"' and (colon := _COLON.match(prefix, token.end())):
            value = _ID_VALUE.match(prefix, colon.end())
            return None if value is None else _id_value(value.group(1), value.group(2))
    return None


def _id_value(number: bytes | None, string: bytes | None) -> int | str | None:
    if number is not None:
        return int(number)
    try:
        text = msgspec.json.decode(string or b"")
    except msgspec.DecodeError:  # a bad escape or invalid UTF-8
        return None
    return text if isinstance(text, str) and len(text) <= MAX_ID_CHARS else None


def best_id(line: bytes) -> object:
    """The id of a rejected request when it can be read, so the host can match the error."""
    try:
        request_id = msgspec.json.decode(line).get("id")
    except (msgspec.DecodeError, AttributeError):
        return None
    valid = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return request_id if valid and len(str(request_id)) <= MAX_ID_CHARS else None


def envelope(line: bytes) -> tuple[object, str, object, Mapping[str, object]]:
    """The id, op, caller and params of a request line.

    Raises:
        InvalidRequest: the line is not a request of this protocol.
    """
    try:
        request = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise InvalidRequest("the request line is not JSON") from exc
    if not isinstance(request, dict) or request.get("v") != PROTOCOL:
        raise InvalidRequest("a request is a JSON object with v = 1")
    request_id, op = request.get("id"), request.get("op")
    if not (isinstance(request_id, str | int) and not isinstance(request_id, bool)):
        raise InvalidRequest("a request needs an id (string or integer)")
    if isinstance(request_id, str) and len(request_id) > MAX_ID_CHARS:
        raise InvalidRequest("the request id is too long")
    params = request.get("params", {})
    if not isinstance(op, str) or not isinstance(params, dict):
        raise InvalidRequest("a request needs an op and object params")
    return request_id, op, request.get("caller"), params
