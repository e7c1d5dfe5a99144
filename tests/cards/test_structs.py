"""`find_problem` explains a msgspec refusal from the type itself, never from msgspec's text.

The oracle: a valid card or configuration with one place replaced by any JSON value. Whenever
msgspec refuses it, our walk must name the very place msgspec names (read here, in the test
only, from its message) and give a reason, never the catch-all.
"""

from __future__ import annotations

import re

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from strategies import build_card, json_values, metadata_fields

from cards.card import ExperimentCardV1, dump_card, parse_card
from cards.errors import CardInvalid
from cards.structs import Fault, find_problem
from harness_plugin.config import Config

_CATCH_ALL = "does not match its schema"


def _msgspec_path(exc: msgspec.ValidationError) -> tuple[str, ...]:
    where = re.search(r" - at `\$(.*)`$", str(exc))
    text = "" if where is None else where.group(1)
    return tuple(p for p in re.split(r"[.\[\]]", text) if p)


def _places(document: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key and index path in `document`, the root first."""
    places = [path]
    if isinstance(document, dict):
        for key, value in document.items():
            places += _places(value, (*path, key))
    elif isinstance(document, list):
        for i, value in enumerate(document):
            places += _places(value, (*path, str(i)))
    return places


def _replaced(document: object, path: tuple[str, ...], value: object) -> object:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(document, list):
        copy = list(document)
        copy[int(head)] = _replaced(copy[int(head)], rest, value)
        return copy
    assert isinstance(document, dict)
    return {**document, head: _replaced(document[head], rest, value)}


def _agrees(document: object, target: type) -> None:
    try:
        msgspec.convert(document, target)
    except msgspec.ValidationError as exc:
        problem = find_problem(document, target)
        assert problem.detail != _CATCH_ALL
        expected = _msgspec_path(exc)
        if problem.fault in (Fault.UNKNOWN, Fault.MISSING):
            assert problem.path[:-1] == expected
        else:
            assert problem.path == expected


@given(fields=metadata_fields, data=st.data())
def test_a_card_with_one_place_replaced_is_explained_where_msgspec_refused_it(fields, data):
    document = msgspec.json.decode(dump_card(build_card(fields)))
    place = data.draw(st.sampled_from(_places(document)))
    value = data.draw(json_values)
    _agrees(_replaced(document, place, value), ExperimentCardV1)


@given(fields=metadata_fields, data=st.data())
def test_an_unknown_or_missing_key_is_named(fields, data):
    document = msgspec.json.decode(dump_card(build_card(fields)))
    objects = [p for p in _places(document) if isinstance(_at(document, p), dict)]
    place = data.draw(st.sampled_from(objects))
    target = _at(document, place)
    if data.draw(st.booleans()):
        changed = {**target, "zz_unknown": 1}
        fault = Fault.UNKNOWN
    else:
        key = data.draw(st.sampled_from(sorted(target)))
        changed = {k: v for k, v in target.items() if k != key}
        fault = Fault.MISSING
    changed_document = _replaced(document, place, changed)
    try:
        msgspec.convert(changed_document, ExperimentCardV1)
    except msgspec.ValidationError:
        assert find_problem(changed_document, ExperimentCardV1).fault is fault


def _at(document: object, path: tuple[str, ...]) -> object:
    for part in path:
        document = document[int(part)] if isinstance(document, list) else document[part]  # type: ignore[index]
    return document


def test_a_struct_rule_is_reported_in_its_own_words():
    fields = {"title": "t", "summary": "s", "source": "w", "source_version": "v"}
    card = build_card({**fields, "query_fingerprint": "a" * 64})
    document = msgspec.json.decode(dump_card(card))
    document["experiment_id"] = "exp_" + "a" * 52  # well formed, but not this card's identity
    problem = find_problem(document, ExperimentCardV1)
    assert problem.fault is Fault.RULE and problem.path == ()
    assert "does not match the card's identity fields" in problem.detail
    try:
        parse_card(msgspec.json.encode(document))
    except CardInvalid as exc:
        assert "identity fields" in exc.message
    else:
        raise AssertionError("a card of another identity was accepted")


@given(data=st.data())
def test_a_configuration_with_one_place_replaced_is_explained(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("cfg")
    document = {
        "artifact_root": str(root / "a"),
        "rlm_root": str(root / "r"),
        "state_root": str(root / "s"),
        "projects": [{"id": "p1", "root": str(root / "w")}],
        "honcho": {"enabled": False, "timeout_s": 10.0},
    }
    place = data.draw(st.sampled_from(_places(document)))
    _agrees(_replaced(document, place, data.draw(json_values)), Config)
