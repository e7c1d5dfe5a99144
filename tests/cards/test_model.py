"""Card models: validated on write and read, strict, bounded, versioned."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from pydantic import ValidationError
from strategies import build_card, metadata_fields

from cards import (
    DEFAULT_LIMITS,
    ConfigError,
    Freshness,
    InvalidInput,
    dump_card,
    parse_card,
    parse_metadata,
)
from cards.errors import CardInvalid, UnsupportedVersion
from cards.policy import freshness, freshness_warning

BASE = {
    "title": "t",
    "summary": "s",
    "query_fingerprint": "a" * 64,
    "source": "src",
    "source_version": "v1",
}


@given(metadata_fields)
def test_cards_round_trip_through_their_canonical_bytes(fields):
    card = build_card(fields)
    raw = dump_card(card)
    again = parse_card(raw)
    assert again == card
    assert dump_card(again) == raw


@given(metadata_fields)
def test_metadata_from_the_strategy_is_valid(fields):
    parse_metadata(fields).check(DEFAULT_LIMITS)


def _doc(**changes):
    doc = json.loads(dump_card(build_card(BASE)))
    doc.update(changes)
    return json.dumps(doc).encode()


def test_unknown_field_is_rejected():
    with pytest.raises(CardInvalid) as info:
        parse_card(_doc(surprise=1))
    assert not isinstance(info.value, UnsupportedVersion)


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_unknown_card_schema_version_is_a_typed_error(version):
    with pytest.raises(UnsupportedVersion) as info:
        parse_card(_doc(schema_version=version))
    assert info.value.version == version
    assert info.value.code == "card.unsupported_version"


def test_unknown_artifact_schema_version_is_a_typed_error():
    doc = json.loads(_doc())
    doc["artifact"]["schema_version"] = 7
    with pytest.raises(UnsupportedVersion):
        parse_card(json.dumps(doc).encode())


def test_missing_schema_version_is_unsupported_not_guessed():
    doc = json.loads(_doc())
    del doc["schema_version"]
    with pytest.raises(UnsupportedVersion):
        parse_card(json.dumps(doc).encode())


def test_a_card_whose_id_does_not_match_its_identity_is_invalid():
    other = build_card({**BASE, "source_version": "v2"})
    with pytest.raises(CardInvalid):
        parse_card(_doc(experiment_id=other.experiment_id))


def test_a_card_whose_artifact_id_does_not_match_its_digest_is_invalid():
    doc = json.loads(_doc())
    doc["artifact"]["sha256"] = "0" * 64
    with pytest.raises(CardInvalid):
        parse_card(json.dumps(doc).encode())


@pytest.mark.parametrize("raw", [b"", b"[]", b"{", b"null", b'{"schema_version": 1}'])
def test_garbage_is_invalid(raw):
    with pytest.raises(CardInvalid):
        parse_card(raw)


def test_naive_timestamps_are_rejected():
    with pytest.raises(CardInvalid):
        parse_card(_doc(created_at="2026-11-29T12:00:00", updated_at="2026-11-29T12:00:00"))


def test_error_messages_never_echo_card_content():
    secret = "sk-live-abcdefghijklmnop"
    with pytest.raises(CardInvalid) as info:
        parse_card(_doc(title=secret + "\x00"))
    assert secret not in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("title", "x" * 201),
        ("title", ""),
        ("title", "   "),
        ("title", "line\nbreak"),
        ("title", "bell\x07"),
        ("summary", "x" * 2001),
        ("summary", "esc\x1b[2J"),
        ("tags", ["t"] * 21),
        ("tags", ["x" * 81]),
        ("columns", ["c"] * 257),
        ("columns", ["x" * 129]),
        ("query_fingerprint", "A" * 64),
        ("source_version", "x" * 201),
        ("media_type", "Application/Parquet"),
        ("media_type", "nonsense"),
        ("shape", [-1]),
        ("unexpected", 1),
        ("title", 5),
    ],
)
def test_metadata_bounds_and_types(field, value):
    with pytest.raises(InvalidInput) as info:
        parse_metadata({**BASE, field: value})
    assert field in str(info.value)


def test_summary_may_hold_newlines_and_tabs():
    assert parse_metadata({**BASE, "summary": "a\n\tb"}).summary == "a\n\tb"


def test_lowered_limits_apply_to_metadata():
    limits = DEFAULT_LIMITS.lowered(title_chars=5, tags=1)
    parse_metadata({**BASE, "title": "12345"}).check(limits)
    with pytest.raises(InvalidInput, match="title"):
        parse_metadata({**BASE, "title": "123456"}).check(limits)
    with pytest.raises(InvalidInput, match="tags"):
        parse_metadata({**BASE, "tags": ["a", "b"]}).check(limits)


@pytest.mark.parametrize(
    "overrides",
    [{"artifact_bytes": (1 << 30) + 1}, {"cards_per_project": 0}, {"nope": 1}, {"tags": True}],
)
def test_limits_may_only_be_lowered(overrides):
    with pytest.raises(ConfigError):
        DEFAULT_LIMITS.lowered(**overrides)


def test_cards_are_immutable():
    card = build_card(BASE)
    with pytest.raises(ValidationError):
        card.title = "changed"


@pytest.mark.parametrize(
    ("recorded", "current", "expected"),
    [
        ("v1", None, Freshness.NOT_CHECKED),
        ("v1", "v1", Freshness.FRESH),
        ("v1", "v2", Freshness.STALE),
        ("unknown", "v1", Freshness.UNVERIFIABLE),
        ("v1", "unknown", Freshness.UNVERIFIABLE),
        ("unknown", "unknown", Freshness.UNVERIFIABLE),
        ("v1", "", Freshness.UNVERIFIABLE),
        ("V1", "v1", Freshness.STALE),
    ],
)
def test_freshness_states(recorded, current, expected):
    state = freshness(recorded, current)
    assert state is expected
    has_warning = freshness_warning(state) is not None
    assert has_warning == (expected in (Freshness.STALE, Freshness.UNVERIFIABLE))
