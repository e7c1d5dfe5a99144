"""Canonical JSON: equal values give equal bytes; floats and odd types are refused."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import json_values

from cards import InvalidInput, canonical_json


@given(json_values)
def test_canonical_bytes_survive_a_round_trip(value):
    once = canonical_json(value)
    assert canonical_json(json.loads(once)) == once


@given(st.dictionaries(st.text(max_size=8), st.integers(), max_size=8))
def test_key_order_never_changes_the_bytes(mapping):
    reordered = dict(reversed(list(mapping.items())))
    assert canonical_json(mapping) == canonical_json(reordered)


def test_form_is_compact_sorted_and_utf8():
    assert (
        canonical_json({"b": 1, "a": ["é", None, True]}) == '{"a":["é",null,true],"b":1}'.encode()
    )


def test_strings_are_never_normalised():
    composed, decomposed = "\u00e9", "e\u0301"
    assert canonical_json(composed) != canonical_json(decomposed)


@pytest.mark.parametrize("value", [1.5, math.nan, math.inf, {"a": 0.0}, [1, 2.0]])
def test_floats_are_refused(value):
    with pytest.raises(InvalidInput):
        canonical_json(value)


@pytest.mark.parametrize("value", [{1: "a"}, b"bytes", {1, 2}, object()])
def test_non_json_types_are_refused(value):
    with pytest.raises(InvalidInput):
        canonical_json(value)


def test_depth_is_bounded():
    value: object = []
    for _ in range(100):
        value = [value]
    with pytest.raises(InvalidInput):
        canonical_json(value)
