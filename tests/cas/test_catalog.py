"""The local card catalog: exact matches, BM25 ranking with stemming, bounds, hostile queries."""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cards import ExperimentCardV1, InvalidInput, ProjectId, parse_metadata
from cards.build import with_changes
from cards.errors import ErrorCode
from cards.testing import card_for_bytes
from cas._catalog import MAX_QUERY_CHARS, Catalog, SearchHit
from cas._catalog_engine import MAX_QUERY_TOKENS, words

K1, B, HEAVY_WEIGHT = 1.2, 0.75, 2  # tantivy's BM25; a title or tag word counts twice

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PROJECT = ProjectId("p1")


def make_card(
    n: int = 0,
    *,
    title: str = "Treatment response by cohort",
    summary: str = "Aggregate response table for the cohort comparison.",
    tags: Sequence[str] = (),
    columns: Sequence[str] = (),
    source: str = "trial-warehouse",
    source_version: str = "snapshot-1",
    content: bytes | None = None,
    minutes: int = 0,
) -> ExperimentCardV1:
    """A valid card; `n` picks its identity, `minutes` its recency."""
    metadata = parse_metadata(
        {
            "title": title,
            "summary": summary,
            "query_fingerprint": hashlib.sha256(f"query {n}".encode()).hexdigest(),
            "source": source,
            "source_version": source_version,
            "media_type": "application/vnd.apache.parquet",
            "tags": list(tags),
            "columns": list(columns),
        }
    )
    data = f"synthetic result {n}".encode() if content is None else content
    card = card_for_bytes(data, metadata, project_id=PROJECT, session_id="s1", now=T0)
    return with_changes(card, {"updated_at": T0 + timedelta(minutes=minutes)})


def ids(hits: Sequence[SearchHit]) -> list[str]:
    return [hit.card.experiment_id for hit in hits]


def catalog_of(*cards: ExperimentCardV1) -> Catalog:
    return Catalog(cards)


# -- exact matches ---------------------------------------------------------------------------


def test_an_experiment_id_finds_its_card_exactly() -> None:
    card, other = make_card(1), make_card(2)
    hits = catalog_of(card, other).search(f"  {card.experiment_id}\n", limit=5)
    assert hits == [SearchHit(card, 1.0, ("experiment_id",))]


def test_an_artifact_id_finds_every_experiment_of_those_bytes_newest_first() -> None:
    older = make_card(1, content=b"same bytes", minutes=1)
    newer = make_card(2, content=b"same bytes", minutes=5)
    hits = catalog_of(older, newer, make_card(3)).search(older.artifact.artifact_id, limit=5)
    assert ids(hits) == [newer.experiment_id, older.experiment_id]
    assert all(hit.exact == ("artifact_id",) and hit.score == 1.0 for hit in hits)


def test_a_query_fingerprint_finds_its_card() -> None:
    card = make_card(1)
    hits = catalog_of(card, make_card(2)).search(card.query_fingerprint, limit=5)
    assert hits == [SearchHit(card, 1.0, ("query_fingerprint",))]


def test_a_source_version_finds_every_card_recorded_at_it() -> None:
    a = make_card(1, source_version="git:abc123", minutes=2)
    b = make_card(2, source_version="git:abc123", minutes=3)
    hits = catalog_of(a, b, make_card(3)).search("git:abc123", limit=5)
    assert ids(hits) == [b.experiment_id, a.experiment_id]
    assert {hit.exact for hit in hits} == {("source_version",)}


@pytest.mark.parametrize("query", ["Cohort-A", "cohort-a", "COHORT-A"])
def test_a_tag_matches_exactly_or_by_casefold(query: str) -> None:
    card = make_card(1, tags=["Cohort-A"])
    hits = catalog_of(card, make_card(2)).search(query, limit=5)
    assert hits[0] == SearchHit(card, 1.0, ("tag",))


def test_a_value_of_several_kinds_lists_each_kind_in_a_fixed_order() -> None:
    card = make_card(1, tags=["v2"], source_version="v2")
    hits = catalog_of(card).search("v2", limit=5)
    assert hits == [SearchHit(card, 1.0, ("tag", "source_version"))]


def test_exact_matches_rank_before_stronger_lexical_matches_and_appear_once() -> None:
    tagged = make_card(1, title="Unrelated", tags=["quokka"], minutes=0)
    wordy = make_card(2, title="Quokka quokka quokka", summary="quokka census", minutes=9)
    hits = catalog_of(wordy, tagged).search("quokka", limit=5)
    assert ids(hits) == [tagged.experiment_id, wordy.experiment_id]
    assert hits[0].exact == ("tag",) and hits[1].exact == ()
    assert hits[1].score <= 1.0


def test_exact_hits_alone_can_fill_the_limit() -> None:
    cards = [make_card(n, source_version="unknown", minutes=n) for n in range(5)]
    hits = catalog_of(*cards).search("unknown", limit=2)
    assert ids(hits) == [cards[4].experiment_id, cards[3].experiment_id]


# -- lexical ranking -------------------------------------------------------------------------


def test_lexical_hits_are_normalised_so_the_best_scores_one() -> None:
    strong = make_card(1, title="Wombat burrow depth", summary="wombat wombat survey")
    weak = make_card(2, title="Burrow depth survey", summary="one wombat seen in a long survey")
    hits = catalog_of(strong, weak, make_card(3)).search("wombat", limit=5)
    assert ids(hits) == [strong.experiment_id, weak.experiment_id]
    assert hits[0].score == 1.0 and 0.0 < hits[1].score < 1.0


def test_a_title_word_outweighs_the_same_word_in_the_summary() -> None:
    in_title = make_card(1, title="Kiwi data", summary="other words here")
    in_summary = make_card(2, title="Other data", summary="kiwi words here")
    hits = catalog_of(in_summary, in_title).search("kiwi", limit=5)
    assert ids(hits) == [in_title.experiment_id, in_summary.experiment_id]


def test_words_are_casefolded_nfkc_and_split_on_underscores() -> None:
    card = make_card(1, title="Straße ﬁnal", columns=["user_id"], source="Warehouse-7")
    catalog = catalog_of(card)
    for query in ["STRASSE", "final", "user", "ID", "warehouse 7"]:
        assert ids(catalog.search(query, limit=1)) == [card.experiment_id], query


@pytest.mark.parametrize(
    ("text", "query"),
    [("Gene expression", "genes"), ("Errors by site", "error"), ("Running totals", "runs")],
)
def test_words_are_stemmed_in_english(text: str, query: str) -> None:
    card = make_card(1, title=text)
    assert ids(catalog_of(card, make_card(2, title="Other")).search(query, limit=5)) == [
        card.experiment_id
    ]


def test_a_trailing_star_finds_the_words_it_begins_and_nothing_else_is_syntax() -> None:
    card = make_card(1, title="Hyperparameter sweep")
    catalog = catalog_of(card, make_card(2, title="Other"))
    assert catalog.search("hyperparam", limit=5) == []
    assert ids(catalog.search("hyperparam*", limit=5)) == [card.experiment_id]
    assert ids(catalog.search("HYPERPARAM* sweep", limit=5)) == [card.experiment_id]
    for query in ['title:"x"', "a AND NOT b", "(((", "sweep~2", "*", "[a TO z]", "+-!^"]:
        catalog.search(query, limit=5)  # never query syntax: no error, no surprise
    assert ids(catalog.search("title:sweep", limit=5)) == [card.experiment_id]


def test_hostile_queries_are_bounded() -> None:
    cards = [make_card(n, title=f"word{n} shared") for n in range(40)]
    catalog = catalog_of(*cards)
    many = " ".join(f"word{n}" for n in range(40))  # more words than a query keeps
    assert len(catalog.search(many, limit=50)) == MAX_QUERY_TOKENS
    stars = " ".join("w*" for _ in range(300))
    assert len(catalog.search(stars, limit=50)) == 40
    assert catalog.search("\x00\u202e" + "é" * 900, limit=5) == []


def test_equal_scores_go_to_the_most_recent_card_then_the_smaller_id() -> None:
    old, new = make_card(1, minutes=1), make_card(2, minutes=2)
    twins = sorted([make_card(3, minutes=0), make_card(4, minutes=0)], key=ids_of)
    hits = catalog_of(twins[1], old, twins[0], new).search("cohort", limit=10)
    assert ids(hits) == [new.experiment_id, old.experiment_id, *map(ids_of, twins)]


def ids_of(card: ExperimentCardV1) -> str:
    return card.experiment_id


@pytest.mark.parametrize("limit", [1, 3, 7])
def test_ties_across_the_limit_are_broken_by_recency_then_id_however_many(limit: int) -> None:
    cards = [make_card(n, minutes=n % 3) for n in range(60)]  # equal text: equal scores
    expected = sorted(cards, key=lambda c: (-c.updated_at.timestamp(), c.experiment_id))
    catalog = catalog_of(*reversed(cards))
    assert ids(catalog.search("cohort", limit=limit)) == list(map(ids_of, expected[:limit]))
    assert ids(catalog.search("snapshot-1", limit=limit)) == list(map(ids_of, expected[:limit]))


def test_search_respects_the_limit_and_no_match_is_empty() -> None:
    catalog = catalog_of(*(make_card(n) for n in range(6)))
    assert len(catalog.search("cohort", limit=4)) == 4
    assert catalog.search("platypus", limit=4) == []


# -- put and get ---------------------------------------------------------------------


def test_put_replacing_a_card_drops_its_old_words() -> None:
    before = make_card(1, title="Quokka census", tags=["marsupial"])
    after = make_card(1, title="Wombat census", tags=["burrower"], minutes=5)
    catalog = catalog_of(before, make_card(2))
    catalog.put(after)
    assert len(catalog) == 2 and catalog.get(after.experiment_id) == after
    assert catalog.search("quokka", limit=5) == []
    assert catalog.search("marsupial", limit=5) == []
    assert ids(catalog.search("wombat", limit=5)) == [after.experiment_id]
    assert catalog.search("burrower", limit=5)[0].exact == ("tag",)


def test_get_returns_none_for_an_unknown_id() -> None:
    assert catalog_of(make_card(1)).get(make_card(2).experiment_id) is None


def test_of_two_cards_with_one_id_the_later_is_indexed() -> None:
    first, second = make_card(1, title="First"), make_card(1, title="Second")
    catalog = catalog_of(first, second)
    assert (len(catalog), catalog.get(first.experiment_id)) == (1, second)
    assert catalog.search("first", limit=5) == []


def test_an_empty_catalog_finds_nothing() -> None:
    assert len(Catalog()) == 0
    assert Catalog().search("cohort", limit=3) == []


# -- invalid input ---------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "x" * (MAX_QUERY_CHARS + 1)])
def test_blank_or_overlong_queries_are_invalid(query: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        catalog_of(make_card(1)).search(query, limit=5)
    assert caught.value.code is ErrorCode.INPUT_INVALID


@pytest.mark.parametrize("limit", [0, -1, True])
def test_a_limit_below_one_is_invalid(limit: int) -> None:
    with pytest.raises(InvalidInput):
        catalog_of(make_card(1)).search("cohort", limit=limit)


# -- properties ------------------------------------------------------------------------------

_WORDS = ["alpha", "alpha", "alpha", "beta", "beta", "gamma", "delta", "Cohort", "ﬁnal", "x1"]
_TAGS = ["Alpha", "tag-one", "two"]


def _fold(text: str) -> list[str]:
    return words(text)


_phrases = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6).map(" ".join)


@st.composite
def card_sets(draw: st.DrawFn) -> list[ExperimentCardV1]:
    count = draw(st.integers(min_value=1, max_value=12))
    return [
        make_card(
            n,
            title=draw(_phrases),
            summary=draw(_phrases),
            tags=draw(st.lists(st.sampled_from(_TAGS), max_size=2, unique=True)),
            columns=draw(st.lists(st.sampled_from(["user_id", "beta_x1"]), max_size=2)),
            source_version=draw(st.sampled_from(["v1", "v2", "unknown"])),
            minutes=draw(st.integers(min_value=0, max_value=3)),
        )
        for n in range(count)
    ]


def _queries(cards: list[ExperimentCardV1]) -> st.SearchStrategy[str]:
    exact = [c.experiment_id for c in cards] + [c.query_fingerprint for c in cards] + _TAGS
    noise = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)
    return st.one_of(_phrases, st.sampled_from(exact + ["v1", "unknown"]), noise).filter(
        lambda q: q.strip() != ""
    )


def _indexed_text(card: ExperimentCardV1) -> set[str]:
    return set(_fold(" ".join([card.title, card.summary, card.source, *card.tags, *card.columns])))


def _sort_key(hit: SearchHit) -> tuple[bool, float, float, str]:
    return (not hit.exact, -hit.score, -hit.card.updated_at.timestamp(), hit.card.experiment_id)


@given(st.data(), card_sets(), st.integers(min_value=1, max_value=6))
def test_every_hit_is_exact_or_shares_a_token_and_hits_are_ranked(
    data: st.DataObject, cards: list[ExperimentCardV1], limit: int
) -> None:
    query = data.draw(_queries(cards))
    hits = Catalog(cards).search(query, limit=limit)
    assert len(hits) <= limit and len(set(ids(hits))) == len(hits)
    for hit in hits:
        assert 0.0 <= hit.score <= 1.0
        indexed = _indexed_text(hit.card)
        prefixes = [_fold(p)[0] for p in re.findall(r"([^\W_]+)\*", query) if _fold(p)]
        shared = set(_fold(query)) & indexed
        began = any(word.startswith(p) for p in prefixes for word in indexed)  # `w*`: warehouse
        assert hit.exact or shared or began
        assert not hit.exact or hit.score == 1.0
    assert hits == sorted(hits, key=_sort_key)


def _reference_bm25(cards: list[ExperimentCardV1], query: str) -> dict[str, float]:
    """Plain BM25 over every card, no index and no pruning, for comparison."""

    def weighted(card: ExperimentCardV1) -> list[str]:
        heavy = _fold(card.title) + _fold("\n".join(card.tags))
        body = _fold(card.summary) + _fold("\n".join(card.columns)) + _fold(card.source)
        return heavy * HEAVY_WEIGHT + body

    docs = {card.experiment_id: weighted(card) for card in cards}
    avg = sum(map(len, docs.values())) / len(docs)
    scores: dict[str, float] = {}
    for term in dict.fromkeys(_fold(query)):
        holding = sum(1 for terms in docs.values() if term in terms)
        idf = math.log(1 + (len(docs) - holding + 0.5) / (holding + 0.5))
        for key, terms in docs.items():
            tf = terms.count(term)
            if tf:
                norm = K1 * (1 - B + B * len(terms) / avg)
                scores[key] = scores.get(key, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
    return scores


F32_REL = 1e-5  # a few float32 roundings of BM25's terms and sums


@given(st.data(), card_sets(), st.integers(min_value=1, max_value=4))
def test_lexical_ranking_equals_plain_bm25_over_every_card(
    data: st.DataObject, cards: list[ExperimentCardV1], limit: int
) -> None:
    query = data.draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5).map(" ".join))
    hits = Catalog(cards).search(query, limit=limit)
    reference = _reference_bm25(cards, query)
    lexical = [hit for hit in hits if not hit.exact]
    exact = set(ids(hits)) - set(ids(lexical))
    expected = sorted((s for k, s in reference.items() if k not in exact), reverse=True)
    top = max(reference.values(), default=1.0)
    # tantivy scores in 32-bit floats (about 7 significant digits); the reference in 64-bit.
    assert [h.score for h in lexical] == pytest.approx(
        [s / top for s in expected[: len(lexical)]], rel=F32_REL
    )
    for hit in lexical:
        assert hit.score == pytest.approx(reference[hit.card.experiment_id] / top, rel=F32_REL)


@given(card_sets(), card_sets(), st.randoms(use_true_random=False))
def test_puts_in_any_order_find_what_a_fresh_build_finds(
    first: list[ExperimentCardV1], second: list[ExperimentCardV1], rng: random.Random
) -> None:
    final = {card.experiment_id: card for card in first + second}
    grown = Catalog(first)
    for card in second:
        for query in _WORDS:  # searched between writes: no hit is named as before a write
            grown.search(query, limit=20)
        grown.put(card)
    shuffled = list(final.values())
    rng.shuffle(shuffled)
    fresh = Catalog(shuffled)
    assert len(grown) == len(fresh) == len(final)
    for query in [*_WORDS, *_TAGS, "alpha beta", "x1 Cohort gamma", "unknown", "v2"]:
        got, want = grown.search(query, limit=20), fresh.search(query, limit=20)
        assert sorted(ids(got)) == sorted(ids(want)), query
        assert [h for h in got if h.exact] == [h for h in want if h.exact], query


def test_a_search_keeps_reading_the_index_version_it_began_with() -> None:
    # A worker records (a commit, then a reload) while another thread is between a search and
    # reading its hits' ids: the hits must be read through the searcher that found them.
    from cas._catalog_engine import Engine

    cards = [make_card(n, minutes=n) for n in range(6)]
    engine = Engine.create()
    with engine.writing() as writer:
        for card in cards[:3]:
            writer.add(card)
    with engine.writing() as writer:
        for card in cards[3:]:
            writer.add(card)
    view = engine._view
    found = view.top(engine._words_query(view.searcher, "cohort"), 6, by_score=True)
    with engine.writing() as writer:  # the other thread: deletes, adds, merges, reloads
        for card in cards[:5]:
            writer.delete(card.experiment_id)
        writer.add(make_card(99))
    assert engine._view is not view
    assert sorted(view.id(address) for _, address in found) == sorted(
        card.experiment_id for card in cards
    )
