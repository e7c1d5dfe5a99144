"""Canonical JSON: the one byte form that identities are computed over."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from cards.errors import InvalidInput

JsonValue = None | bool | int | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"]


def canonical_json(value: object) -> bytes:
    """Encode `value` so that equal JSON values give equal bytes.

    UTF-8, keys sorted, separators `,` and `:`, non-ASCII kept as UTF-8. Floats (and so NaN and
    infinities) are refused: they have no single textual form. Strings are never normalised.

    Raises:
        InvalidInput: `value` holds a float, a non-string key or a non-JSON type.
    """
    if not _flat(value):
        _check(value, depth=0)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


_MAX_DEPTH = 64
_SCALARS = (str, int, bool, type(None))


def _flat(value: object) -> bool:
    """A dict of string keys to non-float scalars: the common case (identities), checked fast."""
    return type(value) is dict and all(
        type(k) is str and type(v) in _SCALARS for k, v in value.items()
    )


def _check(value: object, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise InvalidInput("canonical JSON nests too deeply")
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        raise InvalidInput("canonical JSON admits no floats")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput("canonical JSON keys must be strings")
            _check(item, depth + 1)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check(item, depth + 1)
        return
    raise InvalidInput(f"canonical JSON cannot encode a {type(value).__name__}")
