"""The threshold search ranks exactly as scoring every card would, bit for bit."""

from __future__ import annotations

import contextlib
import marshal
import math
import random
import struct
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from cas import _catalog_rank as rank_module
from cas._catalog_index import K1, B, Entry, TermIndex
from cas._catalog_postings import Postings


def _entries(rng: random.Random, count: int, vocabulary: int) -> list[Entry]:
    """Cards over a vocabulary in which the first words are in nearly every card."""
    words = [f"w{rank}" for rank in range(vocabulary)]
    weights = [1.0 / (rank + 1) ** 0.8 for rank in range(vocabulary)]
    entries = []
    for number in range(count):
        chosen = rng.choices(words, weights, k=rng.randint(1, 40))
        tf: dict[str, int] = {}
        for word in chosen:
            tf[word] = tf.get(word, 0) + rng.choice((1, 1, 1, 2))
        updated = float(rng.randrange(20))  # many equal ages: ties go to the id
        entries.append(Entry(f"exp_{number:06d}", updated, (), tf))
    return entries


def _expected(entries: list[Entry], terms: list[str], count: int) -> list[tuple[str, float]]:
    """Every card scored term by term in the index's order, ranked, normalised."""
    n = len(entries)
    total = sum(sum(e.tf.values()) for e in entries)
    base, slope = K1 * (1.0 - B), K1 * B / (total / n)
    holding = {t: sum(1 for e in entries if t in e.tf) for t in terms}
    weighted = sorted(
        ((math.log(1.0 + (n - h + 0.5) / (h + 0.5)), t) for t, h in holding.items() if h),
        key=lambda pair: (-pair[0], pair[1]),
    )
    if not weighted:
        return []
    first = weighted[0][0]
    scores = {}
    for entry in entries:
        dl, score, held = sum(entry.tf.values()), 0.0, False
        for position, (idf, term) in enumerate(weighted):
            tf = entry.tf.get(term, 0)
            if tf:
                factor = 1.0 if position == 0 else idf / first
                score = score + factor * ((K1 + 1.0) * tf / (tf + (base + slope * dl)))
                held = True
        if held:
            scores[entry.key] = (score, entry.updated)
    top = max(score for score, _ in scores.values())
    ranked = sorted(scores.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))
    return [(key, min(score / top, 1.0)) for key, (score, _) in ranked[:count]]


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=50, max_value=700),
    st.integers(min_value=3, max_value=60),
)
def test_lexical_hits_equal_scoring_every_card(seed: int, count: int, vocabulary: int):
    rng = random.Random(seed)  # the cards are many: drawn from a seed, not by hypothesis
    entries = _entries(rng, count, vocabulary)
    index = TermIndex()
    for entry in entries:
        index.add(entry)
    for _ in range(3):  # changes after the rank order was built keep it in order
        for entry in rng.sample(entries, k=min(len(entries), 10)):
            index.remove(entry.key)
            index.add(entry)
        reloaded = TermIndex.unpack(marshal.loads(marshal.dumps(index.pack())))
        for _ in range(12):
            terms = list(dict.fromkeys(f"w{rng.randrange(vocabulary + 2)}" for _ in range(5)))
            terms = terms[: rng.randint(1, len(terms))]
            limit = rng.choice((1, 3, 20))
            expected = _expected(entries, terms, limit)
            assert index.lexical(terms, limit, set()) == expected, terms
            assert reloaded.lexical(terms, limit, set()) == expected, terms


def _small_groups(group: int, first_max: int, few: int = 8) -> contextlib.ExitStack:
    """Bounds over groups of `group` slots, the rare-word path only up to `first_max` cards,
    marked cards read by bound beyond `few` a group.

    No query is small enough to score card by card.
    """
    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(rank_module, "_FEW_POSTINGS", 0))
    stack.enter_context(mock.patch.object(rank_module, "_FEW", few))
    stack.enter_context(mock.patch.object(rank_module, "_GROUP", group))
    stack.enter_context(mock.patch.object(rank_module, "_FIRST_MAX", first_max))
    return stack


@settings(max_examples=20, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=60, max_value=500),
    st.integers(min_value=3, max_value=40),
    st.sampled_from([(8, 0, 8), (64, 0, 0), (64, 2_048, 8), (4_096, 0, 0)]),
    st.integers(min_value=1, max_value=80),
)
def test_the_bounds_path_ranks_like_scoring_every_card_through_changes(
    seed: int, count: int, vocabulary: int, shape: tuple[int, int, int], cached_from: int
) -> None:
    """Groups of a few slots, rare terms below the cache's minimum, a cache that evicts,
    bounds kept through removals and additions (and dropped when the average length grows).
    """
    rng = random.Random(seed)
    entries = [  # "all": a word every card holds adds almost nothing (bounded by a constant)
        Entry(entry.key, entry.updated, (), {**entry.tf, "all": 1})
        for entry in _entries(rng, count, vocabulary)
    ]
    index = TermIndex(cache_min_postings=cached_from, cache_max_entries=count * 6)
    for entry in entries:
        index.add(entry)
    with _small_groups(*shape):
        for _ in range(4):
            for _ in range(6):
                terms = list(dict.fromkeys(f"w{rng.randrange(vocabulary + 2)}" for _ in range(5)))
                terms += ["all"] * rng.randrange(2)
                limit = rng.choice((1, 3, 20))
                assert index.lexical(terms, limit, set()) == _expected(entries, terms, limit)
            _check_cached_bounds(index)
            for entry in rng.sample(entries, k=min(len(entries), 8)):  # re-recorded, longer
                index.remove(entry.key)
                entries.remove(entry)
                kept = dict(rng.sample(sorted(entry.tf.items()), k=max(1, len(entry.tf) - 1)))
                longer = {**kept, "all": 1, f"w{rng.randrange(vocabulary)}": rng.randint(1, 30)}
                changed = Entry(entry.key, entry.updated, (), longer)
                index.add(changed)
                entries.append(changed)


@settings(max_examples=10, deadline=None)
@given(
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=200, max_value=400),
    st.sampled_from([(8, 0, 8), (64, 0, 0), (4_096, 0, 0)]),
)
def test_words_bounded_jointly_on_first_use_rank_like_scoring_every_card(
    seed: int, count: int, shape: tuple[int, int, int]
) -> None:
    """Words held by fewer than `dense_from` cards share one set of bounds built for the query
    on their first use (`Bm25.joint_bounds`) and get bounds of their own on the second; either
    way, mixed with common words and through changes, the hits are a full pass's.
    """
    rng = random.Random(seed)
    entries = _entries(rng, count, 300)  # a long tail of words held by a few cards each
    index = TermIndex(cache_min_postings=2, cache_max_entries=10**8)  # nothing evicted
    for entry in entries:
        index.add(entry)
    least = rank_module.dense_from(index._bm25_of())
    holding = {word: index._holding(word) for word in index._terms()}
    tail = sorted(word for word, held in holding.items() if 2 <= held < least)
    common = sorted(word for word, held in holding.items() if held >= least)
    with _small_groups(*shape):
        for _ in range(3):
            for _ in range(6):
                terms = rng.sample(tail, k=rng.randint(2, 4)) + rng.sample(
                    common, rng.randint(0, 2)
                )
                limit = rng.choice((1, 3, 20))
                expected = _expected(entries, terms, limit)
                assert index.lexical(terms, limit, set()) == expected, terms  # first use
                assert index.lexical(terms, limit, set()) == expected, terms  # own bounds
            _check_cached_bounds(index)
            for entry in rng.sample(entries, k=8):  # re-recorded with other words
                index.remove(entry.key)
                entries.remove(entry)
                changed = Entry(entry.key, entry.updated, (), {**entry.tf, rng.choice(tail): 3})
                index.add(changed)
                entries.append(changed)
    assert index._cache._once, "no word was bounded jointly"
    assert any(len(postings) < least for postings in index._cache._bounds), "none kept its own"


def _check_cached_bounds(index: TermIndex) -> None:
    """Every cached field bounds its card's impact from above, and is 0 where no card holds."""
    bm25 = index._bm25_of()
    steps = rank_module._LEVELS / bm25.scale
    for postings, bounds in index._cache._bounds.items():
        raw = b"".join(group.to_bytes(rank_module._GROUP * 4, "little") for group in bounds)
        fields = struct.unpack(f"<{len(raw) // 4}I", raw)
        held = dict(zip(postings.slots, postings.tfs, strict=True))
        for slot, field in enumerate(fields):
            if slot in held:
                assert field > bm25.impact(held[slot], slot) * steps
            else:
                assert field == 0


@given(
    st.lists(st.integers(min_value=0, max_value=2**31 - 1), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=2**31 - 1),
)
def test_the_carry_flags_exactly_the_fields_above_the_cut(values: list[int], cut: int) -> None:
    total = sum(value << (32 * at) for at, value in enumerate(values))
    over = rank_module._over(total, len(values), cut)
    flagged = [at for at in range(len(values)) if over >> (32 * at + 31) & 1]
    assert flagged == [at for at, value in enumerate(values) if value > cut]
    assert over & ~rank_module._ones(len(values)) << 31 == 0


def test_weights_keep_every_bound_below_the_flag() -> None:
    for count, bits in ((1, 10), (32, 10), (500, 10), (600, 9), (5_000, 6)):
        weights, used = rank_module._weights([(1.0, Postings())] * count)
        assert sum(weights) * (rank_module._LEVELS + 1) < rank_module._FLAG
        assert used == bits


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=200, max_value=600))
def test_a_rare_word_among_common_ones_ranks_like_scoring_every_card(seed: int, count: int) -> None:
    """Only the rare word's cards are scored when no card lacking it can reach the best."""
    rng = random.Random(seed)
    entries = _entries(rng, count, 400)
    index = TermIndex()
    for entry in entries:
        index.add(entry)
    held = {word for entry in entries for word in entry.tf}
    rare = sorted(held, key=lambda word: sum(1 for entry in entries if word in entry.tf))
    with _small_groups(64, 2_048):
        for word in rare[:: max(1, len(rare) // 12)]:  # from the rarest to common ones
            for common in (["w0"], ["w0", "w1"], ["w2", "w0", "w1"]):
                for limit in (1, 3, 20):
                    terms = list(dict.fromkeys([word, *common]))
                    expected = _expected(entries, terms, limit)
                    assert index.lexical(terms, limit, set()) == expected
