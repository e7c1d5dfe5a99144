"""The local card catalog: exact lookups and BM25 lexical ranking over one project's cards.

`Catalog` is the in-memory catalog of parsed cards (the demo, tests, a notebook's one-off
search); the persisted catalog of a project (`_catalog_persist`) keeps the same index on disk.
Both rank through `_catalog_index.TermIndex` and tokenise here. No I/O in this module.

Ranking: exact matches (experiment id, artifact id, query fingerprint, tag, source version) come
first with score 1.0. Lexical hits follow, ranked by Okapi BM25 (k1 = 1.2, b = 0.75) over one
virtual field in which a title or tag token counts twice and a summary, column or source token
once (a simplified BM25F). Lexical scores are divided by the best lexical score of the query, so
they lie in (0, 1]. Ties go to the most recently updated card, then to the smaller experiment id.
"""

from __future__ import annotations

import heapq
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import msgspec

from cards.errors import InvalidInput
from cas._catalog_index import (
    CACHE_MAX_ENTRIES,
    CACHE_MIN_POSTINGS,
    EXACT_KINDS,
    K1,
    B,
    Entry,
    TermIndex,
)

if TYPE_CHECKING:
    from cards.card import ExperimentCardV1

__all__ = ["B", "EXACT_KINDS", "HEAVY_WEIGHT", "K1", "MAX_QUERY_CHARS", "Catalog", "SearchHit"]

MAX_QUERY_CHARS = 1_000
# A query's cost grows with its distinct tokens, each of which may touch every card.
MAX_QUERY_TOKENS = 32
# Summaries and column lists are bounded already; this keeps one card's postings bounded too.
MAX_FIELD_TOKENS = 512
# A title or tag token counts HEAVY_WEIGHT times, a summary, column or source token once. An
# integer keeps the total length exact, so a catalog grown by `put` ranks as one built at once.
HEAVY_WEIGHT = 2

# Runs of letters and digits: `_` separates too, so the column `user_id` matches "user".
_TOKEN = re.compile(r"[^\W_]+")


class SearchHit(msgspec.Struct, frozen=True):
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


def entry_of(card: ExperimentCardV1) -> Entry:
    """What the index keeps of `card`."""
    return Entry(
        key=card.experiment_id,
        updated=card.updated_at.timestamp(),
        exact=tuple(dict.fromkeys(_exact_keys(card))),  # a tag may repeat once folded
        tf=_term_frequencies(card),
    )


def ranked(index: TermIndex, query: str, limit: int) -> list[tuple[str, float, tuple[str, ...]]]:
    """(experiment id, score, exact kinds) of the best `limit` hits: exact ones first.

    Raises:
        InvalidInput: the query is blank or longer than `MAX_QUERY_CHARS`, or `limit` is
            below 1.
    """
    text = _checked_query(query, limit)
    exact = index.exact_matches(text)
    newest = heapq.nsmallest(limit, exact, key=index.order)
    hits = [(key, 1.0, exact[key]) for key in newest]
    if len(hits) < limit:
        lexical = index.lexical(_query_terms(text), limit - len(hits), set(exact))
        hits += [(key, score, ()) for key, score in lexical]
    return hits


class Catalog:
    """An in-memory index of at most `max_cards` parsed cards of one project."""

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
            cache_min_postings: Cache the impact bounds of terms held by at least this many
                cards.
            cache_max_entries: The most cached impact bounds (one per slot and term).

        Raises:
            InvalidInput: `max_cards` is below 1 or `skipped` is negative.
        """
        if max_cards < 1 or skipped < 0:
            raise InvalidInput("max_cards must be positive and skipped not negative")
        self._max_cards = max_cards
        self._skipped = skipped
        self._overflow = 0
        self._cards: dict[str, ExperimentCardV1] = {}
        self._index = TermIndex(
            cache_min_postings=cache_min_postings, cache_max_entries=cache_max_entries
        )

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
        kept = newest(latest.values(), max_cards)
        catalog._overflow = len(latest) - len(kept)
        for card in kept:
            catalog._cards[card.experiment_id] = card
            catalog._index.add(entry_of(card))
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
        entry = entry_of(card)
        evicted = put_entry(self._index, entry, self._max_cards)
        if evicted is None:
            self._cards[entry.key] = card
            return
        self._overflow += 1
        if evicted != entry.key:
            del self._cards[evicted]
            self._cards[entry.key] = card

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """Exact matches first, then BM25 lexical matches, at most `limit` hits in all.

        Raises:
            InvalidInput: the query is blank or longer than `MAX_QUERY_CHARS`, or `limit` is
                below 1.
        """
        return [
            SearchHit(self._cards[key], score, exact)
            for key, score, exact in ranked(self._index, query, limit)
        ]


def put_entry(index: TermIndex, entry: Entry, max_cards: int) -> str | None:
    """Index `entry` in a catalog of at most `max_cards`; the key that made room, if any.

    A replaced card makes no room (None). When full, the oldest card is evicted if `entry` is
    newer (its key is returned), else `entry` itself is left out (its own key is returned).
    """
    if entry.key in index:
        index.remove(entry.key)
    elif len(index) >= max_cards:
        oldest = index.oldest()
        if index.order(oldest) < (-entry.updated, entry.key):
            return entry.key
        index.remove(oldest)
        index.add(entry)
        return oldest
    index.add(entry)
    return None


def newest(cards: Iterable[ExperimentCardV1], count: int) -> list[ExperimentCardV1]:
    """The `count` most recently updated cards (ties: the smaller experiment id)."""
    return heapq.nsmallest(
        count, cards, key=lambda card: (-card.updated_at.timestamp(), card.experiment_id)
    )


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
    return dict(tf)


def _field_tokens(text: str) -> list[str]:
    return tokens(text)[:MAX_FIELD_TOKENS]
