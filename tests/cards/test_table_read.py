"""The card's local-only fields: `table_read` (declared CSV types and nulls) and `query` text.

Both round-trip through the card's bytes, are validated on read as on write, keep the bytes of
a card without them, and never reach the Honcho projection (an allowlist).
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import build_card

from cards import InvalidInput, parse_card, parse_metadata
from cards.build import revised_card
from cards.card import dump_card, query_fingerprint
from cards.errors import CardInvalid
from cards.policy import IndexState
from cards.remote import RemoteCard, project_card
from cards.table_read import (
    CSV_TYPES,
    MAX_NULLS,
    MAX_TYPES,
    TableRead,
    merged,
    parse_type_specs,
    table_read,
)

QUERY = "SELECT x FROM secret_schema.patients WHERE site = 'canary-3f9a'"
FIELDS: dict[str, object] = {
    "title": "Drifting table",
    "summary": "A CSV whose x drifts.",
    "query_fingerprint": hashlib.sha256(QUERY.encode()).hexdigest(),
    "source": "lab",
    "source_version": "v1",
}
READ = {"types": {"canary_column_7c1e": "float64"}, "nulls": ["CANARY-NULL-91b2"]}


def test_both_fields_round_trip_and_their_absence_keeps_a_cards_bytes():
    card = build_card({**FIELDS, "query": QUERY, "table_read": READ})
    again = parse_card(dump_card(card))
    assert again == card and again.query == QUERY
    assert again.table_read == TableRead(
        types={"canary_column_7c1e": "float64"}, nulls=READ["nulls"]
    )
    plain = dump_card(build_card(FIELDS))
    assert b"table_read" not in plain and b'"query"' not in plain


def test_the_query_must_be_the_fingerprints_text():
    with pytest.raises(InvalidInput, match="query_fingerprint is not the SHA-256 of query"):
        parse_metadata({**FIELDS, "query": QUERY + " "})
    document = json.loads(dump_card(build_card({**FIELDS, "query": QUERY})))
    document["query"] = "another text"
    with pytest.raises(CardInvalid):
        parse_card(json.dumps(document).encode())
    assert query_fingerprint(QUERY) == FIELDS["query_fingerprint"]


@pytest.mark.parametrize(
    "read",
    [
        {"types": {"x": "float128"}},
        {"types": {"": "int64"}},
        {"types": {"x\n": "int64"}},
        {"types": {f"c{i}": "int64" for i in range(MAX_TYPES + 1)}},
        {"nulls": ["NA", "NA"]},
        {"nulls": [f"n{i}" for i in range(MAX_NULLS + 1)]},
        {"nulls": ["x" * 65]},
        {},
        {"types": {"x": "int64"}, "extra": 1},
    ],
)
def test_a_card_holding_bad_options_is_refused_on_read(read):
    document = json.loads(dump_card(build_card(FIELDS)))
    document["table_read"] = read
    with pytest.raises(CardInvalid):
        parse_card(json.dumps(document).encode())


def test_the_options_never_reach_honcho():
    card = build_card({**FIELDS, "query": QUERY, "table_read": READ, "columns": ["x"]})
    remote = project_card(card)
    assert isinstance(remote, RemoteCard)
    sent = remote.content + json.dumps(remote.metadata)
    for secret in ("canary-3f9a", "secret_schema", "canary_column_7c1e", "CANARY-NULL", "float64"):
        assert secret not in sent
    # ...and the projection is the same as for the card without them.
    bare = project_card(build_card({**FIELDS, "columns": ["x"]}))
    assert isinstance(bare, RemoteCard)
    assert (remote.content, remote.metadata) == (bare.content, bare.metadata)


def test_a_re_record_keeps_unset_options_and_replaces_given_ones():
    card = build_card({**FIELDS, "table_read": READ})
    now = card.updated_at
    kept = revised_card(card, parse_metadata(dict(FIELDS)), now)
    assert kept.table_read == card.table_read
    new = {"types": {"y": "string"}, "nulls": []}
    replaced = revised_card(card, parse_metadata({**FIELDS, "table_read": new}), now)
    assert replaced.table_read == TableRead(types={"y": "string"})
    cleared = revised_card(card, parse_metadata({**FIELDS, "table_read": None}), now)
    assert cleared.table_read is None


def test_the_shared_parser_names_what_is_wrong():
    assert table_read({"x": "Float"}, ["NA", "NA", "-"]) == TableRead(
        types={"x": "float64"}, nulls=["NA", "-"]
    )
    assert table_read(None, None) is None and table_read({}, []) is None
    with pytest.raises(InvalidInput, match="unknown type 'decimal' for column 'x'; one of: int8"):
        table_read({"x": "decimal"})
    with pytest.raises(InvalidInput, match="must map column names"):
        table_read(["x=int64"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="10000 column types declared; at most 256"):
        table_read({f"c{i}": "int64" for i in range(10_000)})
    with pytest.raises(InvalidInput, match="a null token must be text"):
        table_read(None, [3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="must be a list"):
        table_read(None, "NA")
    assert parse_type_specs(["a=b=int64", ""]) == {"a=b": "int64"}
    with pytest.raises(InvalidInput, match="names column 'a' twice"):
        parse_type_specs(["a=int64", "a=string"])


@given(
    st.dictionaries(st.text(min_size=1, max_size=20), st.sampled_from(CSV_TYPES), max_size=5),
    st.lists(st.text(min_size=1, max_size=10), max_size=5),
)
def test_what_the_parser_accepts_the_card_accepts(types, nulls):
    try:
        read = table_read(types, nulls)
    except InvalidInput:
        return
    if read is not None:
        assert msgspec.convert(msgspec.to_builtins(read), TableRead) == read


def test_a_calls_options_go_over_the_cards():
    card = TableRead(types={"x": "int64", "y": "string"}, nulls=["NA"])
    call = TableRead(types={"x": "float64"})
    assert merged(card, call) == TableRead(types={"x": "float64", "y": "string"}, nulls=["NA"])
    assert merged(card, TableRead(nulls=["-"])) == TableRead(types=card.types, nulls=["-"])
    assert merged(None, call) is call and merged(card, None) is card


def test_changing_only_local_fields_keeps_the_index_state():
    """The query text and read options are not projected: Honcho has nothing new to learn."""
    card = build_card({**FIELDS, "query": QUERY})
    indexed = msgspec.structs.replace(
        card, index=msgspec.structs.replace(card.index, state=IndexState.INDEXED)
    )
    later = card.updated_at + timedelta(minutes=1)
    local = revised_card(indexed, parse_metadata({**FIELDS, "table_read": READ}), later)
    assert local.table_read is not None and local.index == indexed.index
    projected = revised_card(indexed, parse_metadata({**FIELDS, "summary": "New words."}), later)
    assert projected.index.state is IndexState.PENDING
