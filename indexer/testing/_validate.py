"""Request validation: the HTTP error type, JSON helpers and FastAPI-style body checks."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final

from indexer.testing._model import MAX_METADATA_DEPTH, MAX_METADATA_KEYS

_ID = re.compile(r"[A-Za-z0-9_-]{1,512}")

_SESSION_CONFIG_KEYS: Final[Mapping[str, frozenset[str] | None]] = {
    "custom_instructions": None,
    "reasoning": frozenset({"enabled", "custom_instructions"}),
    "peer_card": frozenset({"use", "create", "custom_instructions"}),
    "summary": frozenset(
        {
            "enabled",
            "messages_per_short_summary",
            "messages_per_long_summary",
            "custom_instructions",
        }
    ),
    "dream": frozenset({"enabled", "custom_instructions"}),
    "dialectic": frozenset({"custom_instructions"}),
}
_MESSAGE_CONFIG_KEYS: Final[Mapping[str, frozenset[str] | None]] = {
    "reasoning": frozenset({"enabled", "custom_instructions"}),
}


class _HttpError(Exception):
    def __init__(self, status: int, detail: object) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


_NO_INPUT: Final = object()


def _invalid(
    loc: list[str | int], msg: str, kind: str = "value_error", given: object = _NO_INPUT
) -> _HttpError:
    """A FastAPI-style request validation error: ``detail`` is a list of errors.

    Like FastAPI's, each error echoes the offending ``input`` when there is one, so a client that
    stringifies the SDK's exception would leak the content it sent: tests can catch that.
    """
    error: dict[str, object] = {"type": kind, "loc": loc, "msg": msg}
    if given is not _NO_INPUT:
        error["input"] = copy.deepcopy(given)
    return _HttpError(422, [error])


# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------


def _json_equal(left: object, right: object) -> bool:
    """JSON equality: booleans never equal numbers, 1 equals 1.0."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    return type(left) is type(right) and left == right


def _contains(document: object, pattern: object) -> bool:
    """JSONB containment, ``document @> pattern``."""
    if isinstance(pattern, dict):
        return isinstance(document, dict) and all(
            key in document and _contains(document[key], value) for key, value in pattern.items()
        )
    if isinstance(pattern, list):
        return isinstance(document, list) and all(
            any(_contains(item, wanted) for item in document) for wanted in pattern
        )
    return _json_equal(document, pattern)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _parse_datetime(value: object, loc: list[str | int]) -> datetime:
    if not isinstance(value, str):
        raise _invalid(loc, "Input should be a valid datetime", "datetime_type")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _invalid(loc, "Input should be a valid datetime", "datetime_parsing") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


# --------------------------------------------------------------------------------------------
# Body validation
# --------------------------------------------------------------------------------------------


def _object(value: object, loc: list[str | int]) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _invalid(loc, "Input should be a valid dictionary", "dict_type", value)
    return value


def _only(body: Mapping[str, object], allowed: frozenset[str], loc: list[str | int]) -> None:
    for key in body:
        if key not in allowed:
            raise _invalid(
                [*loc, key], "Extra inputs are not permitted", "extra_forbidden", body[key]
            )


def _valid_id(value: object, loc: list[str | int]) -> str:
    if not isinstance(value, str):
        raise _invalid(loc, "Input should be a valid string", "string_type", value)
    if not _ID.fullmatch(value):
        raise _invalid(
            loc, "String should match pattern '^[A-Za-z0-9_-]+$' (1-512 characters)", given=value
        )
    return value


def _metadata(value: object, loc: list[str | int]) -> dict[str, object]:
    metadata = _object(value, loc)
    if len(metadata) > MAX_METADATA_KEYS:
        raise _invalid(loc, f"metadata has more than {MAX_METADATA_KEYS} keys", given=metadata)
    if _depth(metadata) > MAX_METADATA_DEPTH:
        raise _invalid(
            loc, f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels", given=metadata
        )
    return copy.deepcopy(metadata)


def _optional_bool(value: object, loc: list[str | int]) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise _invalid(loc, "Input should be a valid boolean", "bool_type")
    return value


def _configuration(
    value: object, schema: Mapping[str, frozenset[str] | None], loc: list[str | int]
) -> dict[str, object]:
    configuration = _object(value, loc)
    _only(configuration, frozenset(schema), loc)
    for key, sub in configuration.items():
        allowed = schema[key]
        if sub is None:
            continue
        if allowed is None:
            if not isinstance(sub, str):
                raise _invalid([*loc, key], "Input should be a valid string", "string_type")
        else:
            _only(_object(sub, [*loc, key]), allowed, [*loc, key])
    return copy.deepcopy(configuration)


def _peer_configuration(value: object, loc: list[str | int]) -> dict[str, object]:
    configuration = _object(value, loc)
    _only(configuration, frozenset({"observe_me"}), loc)
    _optional_bool(configuration.get("observe_me"), [*loc, "observe_me"])
    return dict(configuration)


def _session_peer_config(value: object, loc: list[str | int]) -> dict[str, bool | None]:
    configuration = _object(value, loc)
    _only(configuration, frozenset({"observe_me", "observe_others"}), loc)
    return {
        key: _optional_bool(configuration[key], [*loc, key])
        for key in ("observe_me", "observe_others")
        if key in configuration
    }


def _positive_int(raw: str | None, name: str, default: int, maximum: int | None = None) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _invalid(["query", name], "Input should be a valid integer", "int_parsing") from None
    if value < 1 or (maximum is not None and value > maximum):
        limit = f"between 1 and {maximum}" if maximum is not None else "at least 1"
        raise _invalid(["query", name], f"Input should be {limit}")
    return value


def _query_bool(raw: str | None, name: str) -> bool:
    if raw is None:
        return False
    lowered = raw.lower()
    if lowered in {"true", "1", "yes", "on"}:
        return True
    if lowered in {"false", "0", "no", "off"}:
        return False
    raise _invalid(["query", name], "Input should be a valid boolean", "bool_parsing")


def _peer_map(value: object, loc: list[str | int]) -> dict[str, dict[str, bool | None]]:
    if value is None:
        return {}
    peers = _object(value, loc)
    return {
        _valid_id(peer_id, [*loc, peer_id]): _session_peer_config(config, [*loc, peer_id])
        for peer_id, config in peers.items()
    }
