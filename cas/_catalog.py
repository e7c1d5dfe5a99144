"""Search over one project's cards: exact lookups, then BM25 ranking with English stemming.

The index is tantivy's (`_catalog_engine`, the only module that imports it), a cache of the card
files, which stay the truth. `Catalog` holds parsed cards in memory (the demo, tests);
`LocalCatalog` (`_catalog_local`) is a project's index kept under the state root.

Ranking: exact matches (experiment id, artifact id, query fingerprint, tag by casefold, source
version) come first with score 1.0, newest first. Lexical hits follow, ranked by BM25 over the
stemmed words of title and tags (counted twice), summary, columns and source; scores are divided
by the best lexical score of the query, so they lie in (0, 1]. Ties go to the most recently updated
card, then to the smaller experiment id. A word ending in `*` also finds the words it begins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import msgspec

from cards.errors import InvalidInput
from cas._catalog_engine import Engine

if TYPE_CHECKING:
    from cards.card import ExperimentCardV1

__all__ = ["EXACT_KINDS", "MAX_QUERY_CHARS", "Catalog", "SearchHit"]

MAX_QUERY_CHARS = 1_000
EXACT_KINDS = ("experiment_id", "artifact_id", "query_fingerprint", "tag", "source_version")


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


def exact_kinds(card: ExperimentCardV1, text: str) -> tuple[str, ...]:
    """The kinds of exact match `text` makes with `card`, in `EXACT_KINDS` order."""
    folded = text.casefold()
    values = (card.experiment_id, card.artifact.artifact_id, card.query_fingerprint)
    kinds = [kind for kind, value in zip(EXACT_KINDS, values, strict=False) if value == text]
    if any(tag.casefold() == folded for tag in card.tags):
        kinds.append("tag")
    if card.source_version == text:
        kinds.append("source_version")
    return tuple(kinds)


def checked_query(query: str, limit: int) -> str:
    """The query stripped.

    Raises:
        InvalidInput: the query is blank or longer than `MAX_QUERY_CHARS`, or `limit` is
            below 1.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput("limit must be a positive integer")
    if not isinstance(query, str) or len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query must be a string of at most {MAX_QUERY_CHARS} characters")
    text = query.strip()
    if not text:
        raise InvalidInput("query must not be blank")
    return text


def confirmed(
    ranking: list[tuple[str, float, bool]], cards: Sequence[ExperimentCardV1 | None], text: str
) -> list[SearchHit]:
    """The ranked hits whose card is there and still makes the exact match it was found by."""
    hits = []
    for (_, score, exact), card in zip(ranking, cards, strict=True):
        kinds = exact_kinds(card, text) if card is not None and exact else ()
        if card is not None and (kinds or not exact):
            hits.append(SearchHit(card, score, kinds))
    return hits


class Catalog:
    """An in-memory index of parsed cards (the demo, the tests): unbounded, never saved."""

    def __init__(self, cards: Iterable[ExperimentCardV1] = ()) -> None:
        """Index `cards`; of two with one experiment id, the later one wins, as with `put`."""
        self._cards = {card.experiment_id: card for card in cards}
        self._engine = Engine.create()
        with self._engine.writing() as writer:
            for card in self._cards.values():
                writer.add(card)

    def __len__(self) -> int:
        return len(self._cards)

    def get(self, experiment_id: str) -> ExperimentCardV1 | None:
        """The indexed card with this experiment id, if any."""
        return self._cards.get(experiment_id)

    def put(self, card: ExperimentCardV1) -> None:
        """Add a card, or replace the card with the same experiment id."""
        with self._engine.writing() as writer:
            writer.put(card)
        self._cards[card.experiment_id] = card

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """Exact matches first, then BM25 lexical matches, at most `limit` hits in all.

        Raises:
            InvalidInput: the query is blank or longer than `MAX_QUERY_CHARS`, or `limit` is
                below 1.
        """
        text = checked_query(query, limit)
        ranking = self._engine.ranked(text, limit)
        return confirmed(ranking, [self._cards.get(key) for key, _, _ in ranking], text)
