"""The threshold search ranks exactly as scoring every card would, bit for bit."""

from __future__ import annotations

import marshal
import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from cas._catalog_index import K1, B, Entry, TermIndex


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
