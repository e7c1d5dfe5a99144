"""The catalog's index: exact keys and BM25 postings over numbered card slots, packable to bytes.

A card enters as an `Entry` (its experiment id, recency, exact keys and weighted term counts)
and takes a slot number. Each term's postings (`_catalog_postings.Postings`) list its cards by
slot and by rank. `pack` turns the index into plain values (postings as arrays of machine
integers per term) that `marshal` stores and loads in milliseconds; an index made by `unpack`
keeps each term's postings as bytes until a search or a change first needs them, and then copies
them once: loading 100,000 cards costs no per-posting work, and neither does a first search.

Ranking (spec §30.1): exact matches first with score 1.0, newest first; lexical hits follow,
ranked by Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's idf) over one virtual field in which a title
or tag token counts `HEAVY_WEIGHT` times. Lexical scores are divided by the query's best lexical
score. Ties go to the most recently updated card, then to the smaller experiment id. Only the
cards that can rank are scored (`_catalog_rank.top_scores`): a common word costs about as
much as a rare one.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterable
from operator import itemgetter

import msgspec

from cas._catalog_postings import PACK_SHAPE, SLOT_CODE, Packed, Postings, count_packed
from cas._catalog_rank import Bm25, BoundCache, dense_from, top_scores

__all__ = ["B", "EXACT_KINDS", "K1", "PACK_SHAPE", "Entry", "TermIndex"]

K1 = 1.2
B = 0.75
# A search of several common words keeps their impact bounds (one 4-byte field per slot and
# term) for the next one, kept up to date through changes: terms of at least
# CACHE_MIN_POSTINGS cards, at most CACHE_MAX_ENTRIES fields in all (96 MB: 240 terms at
# 100,000 cards), the term of fewest cards out first. The second search of several words
# bounds every term held by 1/16 of the cards (`_catalog_rank.dense_from`) at once
# (`TermIndex._warm`), into half the cache: at 100,000 cards of `bench_catalog`, all 104 such
# terms (48 MB held 60 of them, and the other 44 were each built on first use, about 1 ms each).
CACHE_MIN_POSTINGS = 256
CACHE_MAX_ENTRIES = 24_000_000
EXACT_KINDS = ("experiment_id", "artifact_id", "query_fingerprint", "tag", "source_version")
_LETTER = {"artifact_id": "a", "query_fingerprint": "q", "tag": "t", "source_version": "s"}
_KIND = {letter: kind for kind, letter in _LETTER.items()}
_UNIT = "\x1f"  # the unit separator: no card value holds a control character

# (-updated_at, experiment_id): ascending order is newest first, ties by experiment id.
OrderKey = tuple[float, str]
# kind -> value -> slots holding it (packed: one bytes object, not a list of ints, to load)
_ExactIndex = dict[str, dict[str, bytes]]


class _Descending(msgspec.Struct, frozen=True):
    """A string that sorts in reverse (ties among equally old cards: the larger id is older)."""

    value: str

    def __lt__(self, other: _Descending) -> bool:
        return self.value > other.value


class Entry(msgspec.Struct, frozen=True):
    """What the index keeps of one card.

    Attributes:
        key: The experiment id.
        updated: `updated_at` as a POSIX timestamp (recency).
        exact: (kind, value) pairs an exact query may hit, tags casefolded.
        tf: Weighted term frequencies of the card's descriptive fields.
    """

    key: str
    updated: float
    exact: tuple[tuple[str, str], ...]
    tf: dict[str, int]


class TermIndex:
    """Exact keys and BM25 postings of at most a few hundred thousand cards."""

    def __init__(
        self,
        *,
        cache_min_postings: int = CACHE_MIN_POSTINGS,
        cache_max_entries: int = CACHE_MAX_ENTRIES,
    ) -> None:
        self._cache = BoundCache(cache_min_postings, cache_max_entries)
        self._slot_of: dict[str, int] = {}
        self._keys: list[str | None] = []  # slot -> experiment id; None: a free slot
        self._updated: list[float] = []
        self._doc_len: list[int] = []
        # One string per slot, not a tuple: `marshal` loads 100,000 strings in a fraction of
        # the time it takes for as many tuples.
        self._doc_terms: list[str] = []  # slot -> its terms, space-separated (for removal)
        self._doc_exact: list[str] = []  # slot -> its exact keys (`_joined_exact`)
        self._free: list[int] = []
        self._ages: list[tuple[float, _Descending]] | None = None  # built by `oldest`
        self._exact: _ExactIndex = {kind: {} for kind in EXACT_KINDS[1:]}
        self._postings: dict[str, Postings] = {}
        self._packed: dict[str, Packed] = {}  # not touched since loaded
        self._total_len = 0

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, key: object) -> bool:
        return key in self._slot_of

    def keys(self) -> Iterable[str]:
        """The experiment ids held."""
        return self._slot_of.keys()

    def order(self, key: str) -> OrderKey:
        """The recency key of a held card: ascending is newest first."""
        return (-self._updated[self._slot_of[key]], key)

    def oldest(self) -> str:
        """The least recent held card (the index must not be empty).

        A heap of (updated, key descending) finds it in logarithmic time: a full catalog
        evicts once per new card, and a scan over every card each time made filling a
        100,000-card catalog quadratic. Entries of removed or re-added cards are dropped
        lazily; the heap is rebuilt when they outnumber the live ones.
        """
        ages = self._ages
        if ages is None or len(ages) > 2 * len(self._slot_of) + 64:
            ages = self._ages = [
                (self._updated[s], _Descending(k)) for k, s in self._slot_of.items()
            ]
            heapq.heapify(ages)
        while True:
            updated, key = ages[0]
            slot = self._slot_of.get(key.value)
            if slot is not None and self._updated[slot] == updated:
                return key.value
            heapq.heappop(ages)

    # -- changes ---------------------------------------------------------------------------

    def add(self, entry: Entry) -> None:
        """Index a card whose key is not held yet."""
        slot = self._free.pop() if self._free else len(self._keys)
        if slot == len(self._keys):
            self._keys.append(None)
            self._updated.append(0.0)
            self._doc_len.append(0)
            self._doc_terms.append("")
            self._doc_exact.append("")
        self._slot_of[entry.key] = slot
        self._keys[slot] = entry.key
        self._updated[slot] = entry.updated
        if self._ages is not None:
            heapq.heappush(self._ages, (entry.updated, _Descending(entry.key)))
        self._doc_exact[slot] = _joined_exact(entry.exact)
        for kind, value in entry.exact:
            held = self._exact[kind]
            held[value] = held.get(value, b"") + array(SLOT_CODE, (slot,)).tobytes()
        self._doc_terms[slot] = " ".join(entry.tf)
        self._doc_len[slot] = length = sum(entry.tf.values())
        self._total_len += length
        cached = len(self._cache) > 0  # a bulk build skips the lookups
        for term, weight in entry.tf.items():
            postings = self._postings_of(term)
            if postings is None:
                postings = self._postings[term] = Postings()
            postings.add(slot, weight, length)
            if cached:
                self._cache.held(postings, slot, weight, length)

    def remove(self, key: str) -> None:
        """Drop a held card."""
        slot = self._slot_of.pop(key)
        for kind, value in _split_exact(self._doc_exact[slot]):
            slots = array(SLOT_CODE, self._exact[kind][value])
            slots.remove(slot)
            if slots:
                self._exact[kind][value] = slots.tobytes()
            else:
                del self._exact[kind][value]
        for term in self._doc_terms[slot].split():
            postings = self._postings_of(term)
            assert postings is not None
            postings.remove(slot, self._doc_len[slot])
            self._cache.held(postings, slot, 0, 0)
            if not postings:
                del self._postings[term]
        self._total_len -= self._doc_len[slot]
        self._keys[slot], self._doc_len[slot], self._updated[slot] = None, 0, 0.0
        self._doc_terms[slot], self._doc_exact[slot] = "", ""
        self._free.append(slot)

    # -- search ----------------------------------------------------------------------------

    def exact_matches(self, text: str) -> dict[str, tuple[str, ...]]:
        """Experiment id to the exact-match kinds that `text` hits, in `EXACT_KINDS` order."""
        found: dict[str, list[str]] = {}
        if text in self._slot_of:
            found[text] = ["experiment_id"]
        probes = {"artifact_id": text, "query_fingerprint": text}
        probes |= {"tag": text.casefold(), "source_version": text}
        for kind, probe in probes.items():
            for slot in array(SLOT_CODE, self._exact[kind].get(probe, b"")):
                key = self._keys[slot]
                assert key is not None
                found.setdefault(key, []).append(kind)
        return {key: tuple(kinds) for key, kinds in found.items()}

    def lexical(self, terms: list[str], count: int, skip: set[str]) -> list[tuple[str, float]]:
        """The `count` best lexical hits not in `skip`, scored against the best of all."""
        skipped = {self._slot_of[key] for key in skip}
        scores = self._bm25(terms, count + len(skipped))
        if not scores:
            return []
        top = max(scores.values())
        for slot in skipped:
            scores.pop(slot, None)
        best = self._best(scores, count)
        hits = []
        for slot in best:
            key = self._keys[slot]
            assert key is not None
            hits.append((key, min(scores[slot] / top, 1.0)))
        return hits

    def _slot_order(self, slot: int) -> OrderKey:
        key = self._keys[slot]
        assert key is not None
        return (-self._updated[slot], key)

    def _bm25(self, terms: list[str], wanted: int) -> dict[int, float]:
        """BM25 scores, scaled by one positive constant, of a set of cards holding the best.

        The set holds the `wanted` best cards and every card tied with the last of them (see
        `top_scores`). Scores are divided by the rarest term's idf: normalising by the best
        score removes the constant again.
        """
        weighted = self._weighted_terms(terms)
        if not weighted:
            return {}
        first_idf = weighted[0][0]
        factored = [(1.0, self._postings_of(weighted[0][1]))]
        factored += [(idf / first_idf, self._postings_of(term)) for idf, term in weighted[1:]]
        bm25 = self._bm25_of()
        if len(factored) > 1:
            self._warm(bm25)
        return top_scores(
            [(factor, postings) for factor, postings in factored if postings is not None],
            wanted,
            bm25,
        )

    def _warm(self, bm25: Bm25) -> None:
        """Bound the frequent terms at once, on the second search of several words.

        (The second since the bounds were last dropped.) Terms of at least `dense_from` cards
        (1/16 of them), most frequent first, into at most half the cache. Built one by one on
        first use, each would cost a later search up to a few milliseconds (at 100,000 cards,
        about 100 terms); a one-shot search never pays.
        """
        cache = self._cache
        cache.fit(bm25)
        cache.searches += 1
        if cache.searches != 2:
            return
        least = dense_from(bm25)
        fields = len(self._doc_len)
        room = cache.max_entries // 2
        for held, term in sorted(((self._holding(t), t) for t in self._terms()), reverse=True):
            if held < least or room < fields:
                break
            postings = self._postings_of(term)
            if postings is not None:
                bm25.bounds(postings)
                room -= fields

    def _terms(self) -> list[str]:
        """Every term some card holds."""
        return [*self._postings, *self._packed]

    def _bm25_of(self) -> Bm25:
        count = len(self._slot_of)
        avg = self._total_len / count if count else 1.0
        base, slope = K1 * (1.0 - B), K1 * B / (avg or 1.0)
        return Bm25(base, slope, K1 + 1.0, self._doc_len, self._cache)

    def _weighted_terms(self, terms: list[str]) -> list[tuple[float, str]]:
        """(idf, term) of the terms that occur in some card, highest idf first."""
        n = len(self._slot_of)
        weighted = [(_idf(n, holding), term) for term in terms if (holding := self._holding(term))]
        return sorted(weighted, key=lambda pair: (-pair[0], pair[1]))

    def _holding(self, term: str) -> int:
        """How many cards hold `term`, without unpacking its postings."""
        postings = self._postings.get(term)
        if postings is not None:
            return len(postings)
        packed = self._packed.get(term)
        return 0 if packed is None else count_packed(packed)

    def _postings_of(self, term: str) -> Postings | None:
        postings = self._postings.get(term)
        if postings is None and term in self._packed:
            postings = self._postings[term] = Postings.unpack(self._packed.pop(term))
        return postings

    def _best(self, scores: dict[int, float], count: int) -> list[int]:
        """The `count` best-ranked slots: score descending, then recency, then experiment id."""
        top = heapq.nlargest(count, scores.items(), key=itemgetter(1))
        if len(top) < count:
            return sorted(scores, key=lambda slot: (-scores[slot], self._slot_order(slot)))
        threshold = top[-1][1]
        # Many cards may tie at the cut (equal tf and length); pick among them by recency.
        above = [slot for slot, score in top if score > threshold]
        tied = [slot for slot, score in scores.items() if score == threshold]
        above.sort(key=lambda slot: (-scores[slot], self._slot_order(slot)))
        return above + heapq.nsmallest(count - len(above), tied, key=self._slot_order)

    # -- packing ---------------------------------------------------------------------------

    def pack(self) -> tuple[object, ...]:
        """The index as plain values `marshal` stores (postings packed per term)."""
        packed = dict(self._packed)
        for term, postings in self._postings.items():
            packed[term] = postings.pack(self._doc_len)
        return (
            self._keys,
            self._updated,
            self._doc_len,
            self._doc_terms,
            self._doc_exact,
            self._exact,
            packed,
        )

    @classmethod
    def unpack(cls, value: object) -> TermIndex:
        """An index from what `pack` returned (after a `marshal` round trip).

        Raises:
            ValueError: `value` does not have the shape `pack` gives.
        """
        if not isinstance(value, tuple) or len(value) != 7:
            raise ValueError("not a packed term index")
        keys, updated, doc_len, doc_terms, doc_exact, exact, packed = value
        columns = (keys, updated, doc_len, doc_terms, doc_exact)
        if not all(isinstance(c, list) and len(c) == len(keys) for c in columns):
            raise ValueError("the packed slot columns differ in length")
        if not isinstance(exact, dict) or set(exact) != set(EXACT_KINDS[1:]):
            raise ValueError("the packed exact keys are malformed")
        if not isinstance(packed, dict) or not all(
            isinstance(parts, tuple) and len(parts) == 4 and all(type(p) is bytes for p in parts)
            for parts in packed.values()
        ):
            raise ValueError("the packed postings are malformed")
        index = cls()
        index._keys, index._updated, index._doc_len = keys, updated, doc_len
        index._doc_terms, index._doc_exact = doc_terms, doc_exact
        index._exact, index._packed = exact, packed
        index._slot_of = {key: slot for slot, key in enumerate(keys) if key is not None}
        index._free = [slot for slot, key in enumerate(keys) if key is None]
        index._total_len = sum(doc_len)
        return index


def _joined_exact(exact: tuple[tuple[str, str], ...]) -> str:
    """Exact keys as one string: each a kind letter and its value, separated by `_UNIT`.

    Raises:
        ValueError: a value holds the separator (card values hold no control characters).
    """
    if any(_UNIT in value for _, value in exact):
        raise ValueError("an exact key holds a control character")
    return _UNIT.join(_LETTER[kind] + value for kind, value in exact)


def _split_exact(joined: str) -> list[tuple[str, str]]:
    return [(_KIND[part[0]], part[1:]) for part in joined.split(_UNIT)] if joined else []


def _idf(cards: int, holding: int) -> float:
    # Lucene's idf: never negative, so a term in most cards still adds a little.
    return math.log(1.0 + (cards - holding + 0.5) / (holding + 0.5))
