"""Message search as Honcho v3.0.12 does it on PostgreSQL, with and without embeddings.

Lexical (the server's full-text search): a query holding any of the server's special characters
is one literal, case-insensitive substring (ILIKE with ``%`` and ``_`` escaped), newest first.
Any other query matches a message whose ``to_tsvector('english', content)`` holds every lexeme
of ``plainto_tsquery('english', query)`` (an AND of Snowball English stems, stop words dropped)
OR that holds the query as a substring; hits are ranked by ``ts_rank``, then newest first.

Semantic (``EMBED_MESSAGES=true``): reciprocal-rank fusion (k = 60) of the nearest messages by
embedding (the top 2 x limit) and the lexical list (the top 2 x limit), cut to the limit. There
is no similarity cut-off, so unrelated messages fill the list. The fake cannot run the server's
embedding model: its stand-in similarity is the cosine of character-trigram counts, which ranks
spelling neighbours, not paraphrases. That is the one place the fake departs from the server.

The tokenizer (`indexer._lexical.lexemes`, which recall's mode detection uses too) covers what
PostgreSQL's default parser does with words, hyphenated words (the compound and each part),
numbers, e-mail addresses and dotted host names; URLs and file paths are split into words rather
than kept whole (nothing we send or store depends on them).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final, Literal, TypeAlias

from indexer._lexical import SPECIAL, lexemes, query_lexemes
from indexer.testing._model import FakeMessage

SearchMode: TypeAlias = Literal["lexical", "semantic"]

RRF_K: Final = 60


def search(
    messages: Sequence[FakeMessage], query: str, limit: int, mode: SearchMode = "lexical"
) -> list[FakeMessage]:
    """The hits for `query` among `messages` (already filtered), as the server orders them."""
    if not query:
        return []
    fulltext = _fulltext(messages, query, limit * 2)
    if mode == "lexical":
        return fulltext[:limit]
    nearest = _nearest(messages, query, limit * 2)
    scores: dict[str, float] = {}
    first_seen: dict[str, FakeMessage] = {}
    for ranked in (nearest, fulltext):
        for rank, message in enumerate(ranked, start=1):
            scores[message.id] = scores.get(message.id, 0.0) + 1.0 / (RRF_K + rank)
            first_seen.setdefault(message.id, message)
    order = sorted(first_seen, key=lambda mid: -scores[mid])  # stable: ties keep first seen
    return [first_seen[mid] for mid in order[:limit]]


def ts_rank(vector: dict[str, list[int]], terms: Sequence[str]) -> float:
    """PostgreSQL's ``ts_rank`` with default weights (0.1) and no normalisation."""
    if not terms:
        return 0.0
    if len(terms) == 1:
        return _rank_or(vector, terms)
    return _rank_and(vector, terms)


# -- internals --------------------------------------------------------------------------------


def _fulltext(messages: Sequence[FakeMessage], query: str, limit: int) -> list[FakeMessage]:
    newest_first = sorted(enumerate(messages), key=lambda im: (im[1].created_at, im[0]))[::-1]
    needle = query.lower()
    if SPECIAL.search(query):
        return [m for _, m in newest_first if needle in m.content.lower()][:limit]
    terms = query_lexemes(query)
    ranked: list[tuple[float, int, FakeMessage]] = []
    for order, (_, message) in enumerate(newest_first):
        vector = lexemes(message.content)
        matched = bool(terms) and all(t in vector for t in terms)
        if matched or needle in message.content.lower():
            ranked.append((ts_rank(vector, terms) if matched else 0.0, order, message))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    return [m for _, _, m in ranked[:limit]]


def _rank_or(vector: dict[str, list[int]], terms: Sequence[str]) -> float:
    total = 0.0
    for term in terms:
        positions = vector.get(term, [])
        if not positions:
            continue
        # Each further occurrence adds less: the i-th one weighs 1/i^2, normalised by pi^2/6.
        share = sum(0.1 / (i * i) for i in range(1, len(positions) + 1))
        total += share / (math.pi**2 / 6)
    return total / len(terms)


def _rank_and(vector: dict[str, list[int]], terms: Sequence[str]) -> float:
    result = 0.0
    for i, first in enumerate(terms):
        for second in terms[i + 1 :]:
            for a in vector.get(first, []):
                for b in vector.get(second, []):
                    distance = abs(a - b)
                    if distance:
                        weight = math.sqrt(0.1 * 0.1 * _word_distance(distance))
                        result += weight - result * weight
    return result


def _word_distance(distance: int) -> float:
    if distance > 100:
        return 1e-30
    return 1.0 / (1.005 + 0.05 * math.exp(distance / 1.5 - 2))


def _nearest(messages: Sequence[FakeMessage], query: str, limit: int) -> list[FakeMessage]:
    """The stand-in for embedding similarity: cosine of character-trigram counts."""
    wanted = _trigrams(query)
    scored = [(-_cosine(wanted, _trigrams(m.content)), i, m) for i, m in enumerate(messages)]
    scored.sort(key=lambda s: (s[0], s[1]))
    return [m for _, _, m in scored[:limit]]


def _trigrams(text: str) -> Counter[str]:
    padded = f"  {text.lower()} "
    return Counter(padded[i : i + 3] for i in range(len(padded) - 2))


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    dot = sum(count * b[gram] for gram, count in a.items())
    norm = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0
