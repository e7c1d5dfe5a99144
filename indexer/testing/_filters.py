"""The filter language of list and search bodies."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Final, TypeAlias

from indexer.testing._model import MAX_FILTER_DEPTH, FakeMessage
from indexer.testing._validate import _contains, _HttpError, _json_equal, _parse_datetime

_FIELDS: Final = frozenset({"workspace_id", "session_id", "peer_id", "token_count", "created_at"})
_OPERATORS: Final = frozenset({"gte", "lte", "gt", "lt", "ne", "in", "contains", "icontains"})
# On the text columns the server compares these as numbers: a string operand is a 422.
_TEXT_COLUMNS: Final = frozenset({"workspace_id", "session_id", "peer_id"})
_NUMERIC_OPERATORS: Final = frozenset({"gte", "lte", "gt", "lt", "ne"})

_Predicate: TypeAlias = Callable[[FakeMessage], bool]


# --------------------------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------------------------


def _filter_error(message: str) -> _HttpError:
    return _HttpError(422, f"Invalid filter: {message}")


def _compare(op: str, actual: object, operand: object) -> bool:
    """Apply one operator to a present value; mismatched types never match."""
    if op == "ne":
        return not _json_equal(actual, operand)
    if op == "in":
        assert isinstance(operand, list)
        return any(_json_equal(actual, item) for item in operand)
    if op in {"contains", "icontains"}:
        if isinstance(actual, str) and isinstance(operand, str):
            if op == "icontains":
                return operand.lower() in actual.lower()
            return operand in actual
        if isinstance(actual, list | dict):
            return _contains(actual, operand)
        return False
    ordered = (int, float, str, datetime)
    if isinstance(actual, bool) or isinstance(operand, bool):
        return False
    if not isinstance(actual, ordered) or not isinstance(operand, ordered):
        return False
    numeric = isinstance(actual, int | float) and isinstance(operand, int | float)
    if not numeric and type(actual) is not type(operand):
        return False
    a, b = actual, operand
    if op == "gt":
        return a > b  # type: ignore[operator]
    if op == "gte":
        return a >= b  # type: ignore[operator]
    if op == "lt":
        return a < b  # type: ignore[operator]
    return a <= b  # type: ignore[operator]


def _is_operator_object(value: object) -> bool:
    return isinstance(value, dict) and bool(value) and all(k in _OPERATORS for k in value)


def _compile_operators(
    name: str, operators: Mapping[str, object], convert: Callable[[object], object]
) -> Callable[[object], bool]:
    compiled: list[tuple[str, object]] = []
    text_column = name in _TEXT_COLUMNS
    for op, operand in operators.items():
        if op not in _OPERATORS:  # the server passes it to SQL as a value and fails there
            raise _HttpError(500, "An unexpected error occurred")
        if text_column and op in _NUMERIC_OPERATORS and isinstance(operand, str):
            raise _HttpError(422, f"Invalid numeric value: {operand}. Expected a number, got str")
        if op == "in":
            if not isinstance(operand, list):
                raise _filter_error(f"'in' on {name!r} needs a list")
            compiled.append((op, [convert(item) for item in operand]))
        elif op in {"contains", "icontains"}:
            compiled.append((op, operand))
        else:
            compiled.append((op, convert(operand)))

    def check(actual: object) -> bool:
        return all(_compare(op, actual, operand) for op, operand in compiled)

    return check


def _compile_value(
    name: str, value: object, convert: Callable[[object], object]
) -> Callable[[object], bool] | None:
    """Compile one field's condition; None means "always true" (the ``*`` wildcard)."""
    if isinstance(value, str) and value == "*":
        return None
    if value is None:
        return lambda actual: actual is None
    if isinstance(value, dict):
        if not value:
            raise _filter_error(f"empty operator object on {name!r}")
        return _compile_operators(name, value, convert)
    if isinstance(value, list):
        members = [convert(item) for item in value]
        return lambda actual: any(_json_equal(actual, m) for m in members)
    expected = convert(value)
    return lambda actual: _json_equal(actual, expected)


def _field_converter(name: str) -> Callable[[object], object]:
    if name == "created_at":
        return lambda raw: _parse_datetime(raw, ["body", "filters", name])
    if name == "token_count":

        def number(raw: object) -> object:
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise _filter_error("token_count needs numbers")
            return raw

        return number

    def text(raw: object) -> object:
        if not isinstance(raw, str):
            raise _filter_error(f"{name!r} needs strings")
        return raw

    return text


def _metadata_key_check(
    key: str, check: Callable[[object], bool] | None
) -> Callable[[dict[str, object]], bool]:
    """A check on one metadata key: None means IS NULL (missing or null)."""

    def run(metadata: dict[str, object]) -> bool:
        if check is None:
            return metadata.get(key) is None
        return key in metadata and check(metadata[key])

    return run


def _combine(how: str, subs: list[_Predicate]) -> _Predicate:
    def run(message: FakeMessage) -> bool:
        if how == "AND":
            return all(p(message) for p in subs)
        if how == "OR":
            return any(p(message) for p in subs)
        return not any(p(message) for p in subs)

    return run


def _field_check(name: str, check: Callable[[object], bool]) -> _Predicate:
    def run(message: FakeMessage) -> bool:
        return check(getattr(message, name))

    return run


def _compile_metadata(value: object) -> _Predicate:
    if not isinstance(value, dict):
        raise _filter_error("'metadata' needs an object")
    containment: dict[str, object] = {}
    checks: list[Callable[[dict[str, object]], bool]] = []
    for key, wanted in value.items():
        if isinstance(wanted, str) and wanted == "*":
            continue  # the wildcard matches everything
        if wanted is None:  # IS NULL: missing or null
            checks.append(_metadata_key_check(key, None))
        elif _is_operator_object(wanted):
            assert isinstance(wanted, dict)
            operators = _compile_operators(f"metadata.{key}", wanted, lambda raw: raw)
            checks.append(_metadata_key_check(key, operators))
        else:
            containment[key] = wanted

    def predicate(message: FakeMessage) -> bool:
        if containment and not _contains(message.metadata, containment):
            return False
        return all(check(message.metadata) for check in checks)

    return predicate


def _compile_filter(filters: object, depth: int = 1) -> _Predicate:
    if depth > MAX_FILTER_DEPTH:
        raise _filter_error(f"nested deeper than {MAX_FILTER_DEPTH} levels")
    if not isinstance(filters, dict):
        raise _filter_error("a filter must be an object")
    predicates: list[_Predicate] = []
    for key, value in filters.items():
        if key in {"AND", "OR", "NOT"}:
            if not isinstance(value, list):
                raise _HttpError(
                    422, f"{key} operator must contain a list, got {type(value).__name__}"
                )
            items = value
            predicates.append(_combine(key, [_compile_filter(item, depth + 1) for item in items]))
        elif key == "metadata":
            predicates.append(_compile_metadata(value))
        elif key in _FIELDS:
            check = _compile_value(key, value, _field_converter(key))
            if check is not None:
                predicates.append(_field_check(key, check))
        else:
            raise _HttpError(
                422, f"Column {key!r} is not allowed to be filtered on or does not exist on Message"
            )
    return lambda message: all(p(message) for p in predicates)


def _filter_from_body(body: Mapping[str, object]) -> _Predicate:
    filters = body.get("filters")
    if filters is None:
        return lambda _message: True
    return _compile_filter(filters)
