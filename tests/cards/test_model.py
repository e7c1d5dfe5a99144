"""Card models: validated on write and read, strict, bounded, versioned."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError as PE
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
from cards.wire import RecordArgs

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


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b"{",
        b"null",
        b'{"schema_version": 1}',
        b"[" * 500_000,  # nesting deeper than any decoder recurses
        b'{"schema_version": 1, "title": ' + b"[" * 500_000 + b"]" * 500_000 + b"}",
        b'{"schema_version": 1, "extra": ' + b"[" * 500_000 + b"]" * 500_000 + b"}",
    ],
)
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
    [
        {"artifact_bytes": (1 << 40) + 1},
        {"title_chars": 201},
        {"cards_per_project": 0},
        {"nope": 1},
        {"tags": True},
    ],  # fmt: skip
)
def test_limits_may_only_be_lowered(overrides):
    with pytest.raises(ConfigError):
        DEFAULT_LIMITS.lowered(**overrides)


def test_cards_are_immutable():
    card = build_card(BASE)
    with pytest.raises(AttributeError):
        card.title = "changed"  # type: ignore[misc]


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


# Characters that tell two regex engines apart, if anything does: every kind of space, line and
# paragraph separators, controls at both ends of C0/C1, a byte-order mark, astral characters.
_TRICKY = [
    *"ab \t\n\r\x0b\x0c\x00\x1f\x7f\x80\x85\x9f\xa0\xe9",
    *"\u1680\u180e\u2000\u200a\u200b\u2028\u2029\u202f\u205f\u3000\ufeff\U0001f600",
]


def _accepts(field: str, text: str) -> tuple[bool, bool, bool]:
    """Whether a tool's arguments (pydantic, Rust's regex), caller metadata and a stored card
    (msgspec, Python's `re`) accept `text` as `field`."""
    results = []
    for check, refusal in (
        (lambda: RecordArgs.model_validate({**BASE, field: text, "source_path": "r.csv"}), PE),
        (lambda: parse_metadata({**BASE, field: text}), InvalidInput),
        (lambda: parse_card(_doc(**{field: text})), CardInvalid),
    ):
        try:
            check()
            results.append(True)
        except refusal:
            results.append(False)
    return results[0], results[1], results[2]


def test_a_card_and_its_metadata_accept_exactly_the_same_characters():
    differ = [
        (field, text)
        for field in ("title", "summary", "source")
        for c in _TRICKY
        for text in (c, f"a{c}", f"{c}a", f"a{c}a", c * 2)
        if len(set(_accepts(field, text))) != 1
    ]
    assert differ == []


@given(
    field=st.sampled_from(["title", "summary", "source"]),
    text=st.text(alphabet=st.sampled_from(_TRICKY), max_size=6),
)
def test_a_card_and_its_metadata_accept_exactly_the_same_text(field, text):
    assert len(set(_accepts(field, text))) == 1


@pytest.mark.parametrize("field", ["title", "source", "tags", "query_fingerprint"])
def test_a_final_newline_is_refused_on_a_card(field):
    value = BASE.get(field) or "tag"
    value = [value[0] + "\n"] if isinstance(value, list) else value + "\n"
    with pytest.raises(CardInvalid, match=field):
        parse_card(_doc(**{field: value}))


def test_a_card_error_never_echoes_a_foreign_value():
    secret = "sk-live-abcdefghijklmnop"
    doc = json.loads(_doc())
    doc["index"]["state"] = secret
    with pytest.raises(CardInvalid, match=r"index\.state: is not one of") as info:
        parse_card(json.dumps(doc).encode())
    assert secret not in str(info.value)


def test_an_invalid_card_is_never_dumped():
    # A struct's constructor and `replace` check nothing; the bytes written are checked.
    card = msgspec.structs.replace(build_card(BASE), title="two\nlines")
    with pytest.raises(CardInvalid, match="title"):
        dump_card(card)
