"""The local card catalog: exact lookups and BM25 lexical ranking over one project's cards.

The catalog is an in-memory index rebuilt at start from the card files (spec §30.1: no SQLite, no
FTS, no vector service). It does no I/O; the caller reads and parses the cards and passes them in.

Ranking: exact matches (experiment id, artifact id, query fingerprint, tag, source version) come
first with score 1.0. Lexical hits follow, ranked by Okapi BM25 (k1 = 1.2, b = 0.75) over one
virtual field in which a title or tag token counts twice and a summary, column or source token
once (a simplified BM25F). Lexical scores are divided by the best lexical score of the query, so
they lie in (0, 1]. Ties go to the most recently updated card, then to the smaller experiment id.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from operator import itemgetter

from cards.errors import InvalidInput
from cards.model import ExperimentCardV1

MAX_QUERY_CHARS = 1_000
# A query's cost grows with its distinct tokens, each of which may touch every card.
MAX_QUERY_TOKENS = 32
# Summaries and column lists are bounded already; this keeps one card's postings bounded too.
MAX_FIELD_TOKENS = 512

K1 = 1.2
B = 0.75
# A title or tag token counts HEAVY_WEIGHT times, a summary, column or source token once. An
# integer keeps the total length exact, so a catalog grown by `put` ranks as one built at once.
HEAVY_WEIGHT = 2
# Per-term impacts of terms in at least this many cards are kept until the next change,
# at most CACHE_MAX_ENTRIES entries (about 100 bytes each), least recently used out first.
CACHE_MIN_POSTINGS = 256
CACHE_MAX_ENTRIES = 200_000

# Pruning compares float sums; this margin keeps a rounding error from dropping a tied card.
_SLACK = 1e-9

EXACT_KINDS = ("experiment_id", "artifact_id", "query_fingerprint", "tag", "source_version")

# Runs of letters and digits: `_` separates too, so the column `user_id` matches "user".
_TOKEN = re.compile(r"[^\W_]+")

# (-updated_at, experiment_id): ascending order is newest first, ties by experiment id.
_OrderKey = tuple[float, str]


@dataclasses.dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result.

    Attributes:
        card: The matching card.
        score: In [0, 1]; exact matches score 1.0, the best lexical match at most 1.0.
        exact: The exact-match kinds that hit, in `EXACT_KINDS` order; empty for a lexical hit.
    """

    card: ExperimentCardV1
    score: float
    exact: tuple[str, ...]


def tokens(text: str) -> list[str]:
    """The lexical tokens of `text`: NFKC-normalised, casefolded runs of letters and digits."""
    if not text.isascii():  # ASCII text is already in NFKC
        text = unicodedata.normalize("NFKC", text)
    return _TOKEN.findall(text.casefold())


class Catalog:
    """An in-memory index of at most `max_cards` cards of one project."""

    def __init__(
        self,
        *,
        max_cards: int,
        skipped: int = 0,
        cache_min_postings: int = CACHE_MIN_POSTINGS,
        cache_max_entries: int = CACHE_MAX_ENTRIES,
    ) -> None:
        """Create an empty catalog; `build` is the usual way to get one.

        Args:
            max_cards: The most cards the catalog holds (the project's card limit).
            skipped: Card files the caller could not read, reported back by `skipped`.
            cache_min_postings: Cache the impacts of terms held by at least this many cards.
            cache_max_entries: The most cached impacts, summed over terms.

        Raises:
            InvalidInput: `max_cards` is below 1 or `skipped` is negative.
        """
        if max_cards < 1 or skipped < 0:
            raise InvalidInput("max_cards must be positive and skipped not negative")
        self._cache_min_postings = cache_min_postings
        self._cache_max_entries = cache_max_entries
        self._max_cards = max_cards
        self._skipped = skipped
        self._overflow = 0
        self._cards: dict[str, ExperimentCardV1] = {}
        self._order: dict[str, _OrderKey] = {}
        self._exact: dict[str, dict[str, set[str]]] = {kind: {} for kind in EXACT_KINDS[1:]}
        self._postings: dict[str, dict[str, int]] = {}
        self._doc_terms: dict[str, tuple[str, ...]] = {}
        self._doc_len: dict[str, int] = {}
        self._total_len = 0
        self._norm: dict[str, float] | None = None
        self._impact_cache: dict[str, dict[str, float]] = {}
        self._cached_entries = 0

    @classmethod
    def build(
        cls, cards: Iterable[ExperimentCardV1], *, max_cards: int, skipped: int = 0
    ) -> Catalog:
        """Index the newest `max_cards` distinct cards; count the rest in `overflow`.

        Keeping the newest (by `updated_at`, then experiment id) makes the result independent
        of the order in which the caller listed the card files. Of two cards with one
        experiment id, the later one in `cards` wins, as with `put`.

        Raises:
            InvalidInput: `max_cards` is below 1 or `skipped` is negative.
        """
        catalog = cls(max_cards=max_cards, skipped=skipped)
        latest = {card.experiment_id: card for card in cards}
        kept = heapq.nsmallest(max_cards, latest.values(), key=_order_key)
        catalog._overflow = len(latest) - len(kept)
        for card in kept:
            catalog._add(card)
        return catalog

    @property
    def skipped(self) -> int:
        """Malformed or unsupported card files the caller skipped while reading."""
        return self._skipped

    @property
    def overflow(self) -> int:
        """Cards not indexed because the catalog already held `max_cards` newer ones."""
        return self._overflow

    def __len__(self) -> int:
        return len(self._cards)

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """The indexed card with this experiment id, if any."""
        return self._cards.get(experiment_id)

    def put(self, card: ExperimentCardV1) -> None:
        """Add a card, or replace the card with the same experiment id.

        When the catalog is full, a new card evicts the oldest one if it is newer, and is
        otherwise left out; either way `overflow` counts one more card.
        """
        key = card.experiment_id
        if key in self._cards:
            self._remove(key)
        elif len(self._cards) >= self._max_cards:
            self._overflow += 1
            oldest = max(self._order, key=self._order.__getitem__)
            if self._order[oldest] < _order_key(card):
                return
            self._remove(oldest)
        self._add(card)

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """Exact matches first, then BM25 lexical matches, at most `limit` hits in all.

        Raises:
            InvalidInput: the query is blank or longer than `MAX_QUERY_CHARS`, or `limit` is
                below 1.
        """
        text = _checked_query(query, limit)
        exact = self._exact_matches(text)
        newest = heapq.nsmallest(limit, exact, key=self._order.__getitem__)
        hits = [SearchHit(self._cards[key], 1.0, exact[key]) for key in newest]
        if len(hits) < limit:
            hits += self._lexical_hits(text, limit - len(hits), exact)
        return hits

    def _lexical_hits(self, text: str, count: int, exact: Iterable[str]) -> list[SearchHit]:
        """The `count` best lexical hits that are not exact hits, scored against the best."""
        exact = set(exact)
        scores = self._bm25(_query_terms(text), count + len(exact))
        if not scores:
            return []
        top = max(scores.values())
        for key in exact:
            scores.pop(key, None)
        best = self._best(scores, count)
        return [SearchHit(self._cards[key], min(scores[key] / top, 1.0), ()) for key in best]

    def _add(self, card: ExperimentCardV1) -> None:
        key = card.experiment_id
        self._cards[key] = card
        self._order[key] = _order_key(card)
        for kind, value in _exact_keys(card):
            self._exact[kind].setdefault(value, set()).add(key)
        tf = _term_frequencies(card)
        self._doc_terms[key] = tuple(tf)
        for term, weight in tf.items():
            postings = self._postings.get(term)
            if postings is None:
                self._postings[term] = {key: weight}
            else:
                postings[key] = weight
        self._doc_len[key] = length = sum(tf.values())
        self._total_len += length
        self._forget_norms()

    def _remove(self, key: str) -> None:
        card = self._cards.pop(key)
        del self._order[key]
        for kind, value in _exact_keys(card):
            _discard(self._exact[kind], value, key)
        for term in self._doc_terms.pop(key):
            postings = self._postings[term]
            del postings[key]
            if not postings:
                del self._postings[term]
        self._total_len -= self._doc_len.pop(key)
        self._forget_norms()

    def _forget_norms(self) -> None:
        """Drop what depends on the average card length: every change moves it."""
        self._norm = None
        self._impact_cache.clear()
        self._cached_entries = 0

    def _exact_matches(self, text: str) -> dict[str, tuple[str, ...]]:
        """Experiment id to the exact-match kinds that `text` hits, in `EXACT_KINDS` order."""
        found: dict[str, list[str]] = {}
        if text in self._cards:
            found[text] = ["experiment_id"]
        probes = {"artifact_id": text, "query_fingerprint": text}
        probes |= {"tag": text.casefold(), "source_version": text}
        for kind, probe in probes.items():
            for key in self._exact[kind].get(probe, ()):
                found.setdefault(key, []).append(kind)
        return {key: tuple(kinds) for key, kinds in found.items()}

    def _bm25(self, terms: list[str], wanted: int) -> dict[str, float]:
        """BM25 scores, scaled by one positive constant, of every card that can rank `wanted`.

        Terms go rarest first. Once no card yet unscored could beat the `wanted`-th best
        score even by matching every remaining term, later terms only update cards already
        scored (an exact MaxScore cut: common words no longer touch every card).
        """
        weighted = self._weighted_terms(terms)
        if not weighted:
            return {}
        first_idf, first = weighted[0]
        # Scores are divided by the first term's idf: one fewer multiply per posting, and
        # normalising by the best score removes the constant again.
        scores = dict(self._impacts(first))
        bound = sum(idf for idf, _ in weighted[1:]) / first_idf * (K1 + 1.0)
        cut = False
        for idf, term in weighted[1:]:
            cut, scores = _cut(scores, wanted, bound, cut)
            factor = idf / first_idf
            if cut:
                self._update_scored(scores, term, factor)
            else:
                _accumulate(scores, self._impacts(term), factor)
            bound -= factor * (K1 + 1.0)
        return scores

    def _weighted_terms(self, terms: list[str]) -> list[tuple[float, str]]:
        """(idf, term) of the terms that occur in some card, highest idf first."""
        n = len(self._cards)
        weighted = [
            (_idf(n, len(postings)), term)
            for term in terms
            if (postings := self._postings.get(term))
        ]
        return sorted(weighted, key=lambda pair: (-pair[0], pair[1]))

    def _impacts(self, term: str) -> dict[str, float]:
        """(K1 + 1) * tf / (tf + norm) per card holding `term`; frequent terms are cached."""
        cached = self._impact_cache.pop(term, None)
        if cached is None:
            norm = self._length_norms()
            scale = K1 + 1.0
            postings = self._postings[term]
            cached = {key: scale * tf / (tf + norm[key]) for key, tf in postings.items()}
            if not self._cache_min_postings <= len(cached) <= self._cache_max_entries:
                return cached
            self._cached_entries += len(cached)
            while self._cached_entries > self._cache_max_entries and self._impact_cache:
                oldest = next(iter(self._impact_cache))
                self._cached_entries -= len(self._impact_cache.pop(oldest))
        self._impact_cache[term] = cached  # re-inserted last: least recently used goes first
        return cached

    def _update_scored(self, scores: dict[str, float], term: str, factor: float) -> None:
        """Add `term`'s contribution to the cards already in `scores` only."""
        postings, norm = self._postings[term], self._length_norms()
        scale = K1 + 1.0
        if len(postings) < len(scores):
            for key, tf in postings.items():
                if key in scores:
                    scores[key] += factor * (scale * tf / (tf + norm[key]))
        else:
            for key in scores:
                held = postings.get(key)
                if held is not None:
                    scores[key] += factor * (scale * held / (held + norm[key]))

    def _length_norms(self) -> dict[str, float]:
        """K1 * (1 - B + B * dl / avgdl) per card, recomputed lazily after a change."""
        if self._norm is None:
            avg = self._total_len / len(self._doc_len) if self._doc_len else 1.0
            base, slope = K1 * (1.0 - B), K1 * B / (avg or 1.0)
            self._norm = {key: base + slope * dl for key, dl in self._doc_len.items()}
        return self._norm

    def _best(self, scores: dict[str, float], count: int) -> list[str]:
        """The `count` best-ranked keys: score descending, then recency, then experiment id."""
        top = heapq.nlargest(count, scores.items(), key=itemgetter(1))
        if len(top) < count:
            return sorted(scores, key=lambda key: (-scores[key], self._order[key]))
        threshold = top[-1][1]
        # Many cards may tie at the cut (equal tf and length); pick among them by recency.
        above = [key for key, score in top if score > threshold]
        tied = [key for key, score in scores.items() if score == threshold]
        above.sort(key=lambda key: (-scores[key], self._order[key]))
        return above + heapq.nsmallest(count - len(above), tied, key=self._order.__getitem__)


def _idf(cards: int, holding: int) -> float:
    # Lucene's idf: never negative, so a term in most cards still adds a little.
    return math.log(1.0 + (cards - holding + 0.5) / (holding + 0.5))


def _cut(
    scores: dict[str, float], wanted: int, bound: float, cut: bool
) -> tuple[bool, dict[str, float]]:
    """Whether unscored cards are out of the running, and the scored cards still in it.

    `bound` is the most the remaining terms can add to any card. Once the `wanted`-th best
    score is above it, no unscored card can reach the top `wanted`, and neither can a scored
    card whose score plus `bound` stays below that threshold (scores only grow).
    """
    if len(scores) < wanted:
        return cut, scores
    threshold = heapq.nlargest(wanted, scores.values())[-1]
    if not cut and threshold <= bound * (1.0 + _SLACK):
        return False, scores
    floor = threshold - (bound + threshold) * _SLACK
    return True, {key: score for key, score in scores.items() if score + bound >= floor}


def _accumulate(scores: dict[str, float], impacts: dict[str, float], factor: float) -> None:
    get = scores.get
    for key, impact in impacts.items():
        scores[key] = get(key, 0.0) + factor * impact


def _checked_query(query: str, limit: int) -> str:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput("limit must be a positive integer")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is longer than {MAX_QUERY_CHARS} characters")
    text = query.strip()
    if not text:
        raise InvalidInput("query must not be blank")
    return text


def _query_terms(text: str) -> list[str]:
    """The distinct tokens of a query, first occurrence first, at most `MAX_QUERY_TOKENS`."""
    return list(dict.fromkeys(tokens(text)))[:MAX_QUERY_TOKENS]


def _order_key(card: ExperimentCardV1) -> _OrderKey:
    return (-card.updated_at.timestamp(), card.experiment_id)


def _exact_keys(card: ExperimentCardV1) -> Iterator[tuple[str, str]]:
    yield "artifact_id", card.artifact.artifact_id
    yield "query_fingerprint", card.query_fingerprint
    yield "source_version", card.source_version
    for tag in card.tags:
        yield "tag", tag.casefold()


def _term_frequencies(card: ExperimentCardV1) -> dict[str, int]:
    """Weighted term frequencies of a card's allowlisted descriptive fields."""
    # Counter counts an iterable in C; the weighted fields are short, so they loop in Python.
    tf = Counter(_field_tokens(card.summary))
    tf.update(_field_tokens("\n".join(card.columns)))
    tf.update(_field_tokens(card.source))
    for term in _field_tokens(card.title) + _field_tokens("\n".join(card.tags)):
        tf[term] += HEAVY_WEIGHT
    return tf


def _field_tokens(text: str) -> list[str]:
    return tokens(text)[:MAX_FIELD_TOKENS]


def _discard(index: dict[str, set[str]], value: str, key: str) -> None:
    keys = index[value]
    keys.discard(key)
    if not keys:
        del index[value]
