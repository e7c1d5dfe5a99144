"""The exact top-k search over postings (`_catalog_postings`): BM25 impacts and their bounds.

`top_scores` picks one of four exact paths. One word: the head of each run holds its best
cards. Several words holding few cards in all: every card, term after term. Several words led
by a rare one whose best cards already outscore all that the others can add: only that word's
cards are scored (term-at-a-time with MaxScore's cut). Else bounds: a card's impact in a term,
rounded up to one of `_LEVELS` steps, is a 32-bit field of a Python integer per group of
`_GROUP` slots (`BoundCache`, kept up to date through changes), so one integer multiply and
add per term and group bounds the query's score of 4,096 cards at once, in C; a carry into
each field's top bit marks the cards whose bound beats the running `wanted`-th best score,
and only those are scored exactly. A word held by fewer than 1/16 of the cards gets bounds of
its own (kept) on its second use; on its first, it shares the query's joint bounds with the
other such words: building bounds costs the same whatever a word's size, so one build for
them all costs less than one each. Every path gives the same floats a full pass gives: each
card's terms are summed in the same order.
"""

from __future__ import annotations

import heapq
import operator
import sys
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from functools import lru_cache
from itertools import repeat

import msgspec

from cas._catalog_postings import Postings, key_parts

# Pruning compares float sums; this margin keeps a rounding error from dropping a tied card.
_SLACK = 1e-9
# Looking one card up by bisection costs about as much as this many steps through postings.
_BISECT_COST = 16
# Words holding at most this many cards in all are scored card by card (term-at-a-time, no
# pruning): measured cheaper than bounds, which such words rarely have cached.
_FEW_POSTINGS = 4_096
# The rare-word path: at most this many cards in the rarest word (measured: beyond it the
# bounds path is faster at 100,000 cards).
_FIRST_MAX = 2_048
# Bounds: an impact (below K1 + 1) rounds up to one of _LEVELS steps, a factor (at most 1)
# to one of 2**_WEIGHT_BITS; their products summed over terms stay below _FLAG, the top bit
# of a 32-bit field (_FIELD_CODE), while fewer than 2**31 / (4097 * 1025) = 511 terms.
_LEVELS, _WEIGHT_BITS = 4_095, 10
_FIELD_CODE, _FIELD_BYTES, _FLAG = "I", 4, 1 << 31
_GROUP = 4_096  # slots per integer: 16 KiB, so a group's few candidates cost little to find
_UP = 1.0 + 1e-9  # rounds every bound up past any float rounding of the exact sum
_FLAT_SHIFT = 6  # a term adding at most floor >> _FLAT_SHIFT is bounded by a constant
_HEADROOM = 1.03  # cached bounds hold until the average card length grows by 3 %
_FEW = 8  # up to this many marked cards in a group are scored without reading their bounds
_DENSE_SHARE = 16  # a term held by 1/16 of the cards always has bounds of its own
_ONCE_MAX = 65_536  # terms remembered as bounded once (`BoundCache.first_use`)


class BoundCache:
    """Each card's impact bound (`Bm25.bounds`) in the terms searched lately, kept up to date.

    Levels assume an average card length `_HEADROOM` above the one they were first built for
    (an impact grows with the average length), so they stay upper bounds until the average
    outgrows that, and all are dropped (`fit`); a change sets the changed card's fields
    (`held`). Only terms of at least `min_postings` cards, at most `max_entries` fields
    (4 bytes each) in all; the term of fewest cards (the cheapest to build again) out first:
    measured, least recently used out first rebuilt the largest terms over and over when
    the queries' terms did not all fit.
    """

    def __init__(self, min_postings: int, max_entries: int) -> None:
        self.min_postings, self.max_entries = min_postings, max_entries
        self._bounds: dict[Postings, list[int]] = {}
        self._entries = 0
        self._once: set[Postings] = set()  # bounded once, for one query only (`first_use`)
        self._base = self._slope = self._scale = 0.0  # what the levels assume; 0: none yet
        self.searches = 0  # searches that used bounds since they were last dropped

    def __len__(self) -> int:
        return len(self._bounds)

    def fit(self, bm25: Bm25) -> None:
        """Drop every bound unless it holds (and is not too loose) for `bm25`'s impacts."""
        slope = self._slope
        if (bm25.base, bm25.scale) == (self._base, self._scale) and (
            slope <= bm25.slope <= slope * _HEADROOM * _HEADROOM
        ):
            return
        self._bounds.clear()
        self._entries = self.searches = 0
        self._base, self._scale, self._slope = bm25.base, bm25.scale, bm25.slope / _HEADROOM

    def level(self, tf: int, length: int) -> int:
        """A bound of the impact, in whole steps of scale / `_LEVELS` (at most `_LEVELS` + 1)."""
        return _level(self._base, self._slope, self._scale, tf, length)

    def first_use(self, postings: Postings) -> bool:
        """Whether a term below `dense_from` is bounded for the first time (and note it).

        Such a term is bounded with the query's other first-use terms in one set of integers
        that is not kept (`Bm25.joint_bounds`); on its second use it gets bounds of its own, kept.
        One search's words need not displace the words searched again and again.
        """
        if postings in self._once:
            return False
        if len(self._once) >= _ONCE_MAX:
            self._once.clear()
        self._once.add(postings)
        return True

    def get(self, postings: Postings, groups: int) -> list[int] | None:
        """A term's cached bounds over `groups` groups, if any."""
        cached = self._bounds.get(postings)
        if cached is None:
            return None
        cached.extend([0] * (groups - len(cached)))  # slots added since
        return cached

    def put(self, postings: Postings, bounds: list[int]) -> None:
        """Keep a term's bounds if it is frequent enough and they fit."""
        fields = len(bounds) * _GROUP
        if len(postings) < self.min_postings or fields > self.max_entries:
            return
        self._bounds[postings] = bounds
        self._entries += fields
        while self._entries > self.max_entries:  # the cheapest to build again out first
            cheapest = min(self._bounds, key=len)
            self._entries -= len(self._bounds.pop(cheapest)) * _GROUP

    def held(self, postings: Postings, slot: int, tf: int, length: int) -> None:
        """Set one card's field in a term's cached bounds (tf 0: the card left the term)."""
        bounds = self._bounds.get(postings)
        if bounds is None:
            return
        group, at = divmod(slot, _GROUP)
        bounds.extend([0] * (group + 1 - len(bounds)))
        shift = at * _FIELD_BYTES * 8
        level = self.level(tf, length) if tf else 0
        bounds[group] = bounds[group] & ~(0xFFFFFFFF << shift) | level << shift


class Bm25(msgspec.Struct, frozen=True):
    """What a term's BM25 impact in a card depends on, besides its term frequency."""

    base: float  # K1 * (1 - B)
    slope: float  # K1 * B / average card length
    scale: float  # K1 + 1
    doc_len: list[int]  # slot -> card length
    cache: BoundCache

    def impact(self, tf: int, slot: int) -> float:
        """(K1 + 1) * tf / (tf + K1 * (1 - B + B * dl / avgdl))."""
        return self.scale * tf / (tf + (self.base + self.slope * self.doc_len[slot]))

    def level(self, tf: int, slot: int) -> int:
        """The impact rounded up to a whole step of scale / `_LEVELS` (at most `_LEVELS` + 1)."""
        return _level(self.base, self.slope, self.scale, tf, self.doc_len[slot])

    def bounds(self, postings: Postings) -> list[int]:
        """Per `_GROUP` slots, an integer bounding the term's impact in each card, from above.

        Its 32-bit field i holds the bound for the group's i-th card, in steps of scale /
        `_LEVELS` (0: the card lacks the term), from `BoundCache.level`. Built through the
        rank order: cards of one key (frequency and length) share a bound.
        """
        cache, doc_len = self.cache, self.doc_len
        cache.fit(self)
        cached = cache.get(postings, -(-len(doc_len) // _GROUP))
        if cached is not None:
            return cached
        ranked, keys, runs = postings.ranking(doc_len)
        fields = array(_FIELD_CODE, bytes(_FIELD_BYTES * len(doc_len)))
        into = repeat(fields)  # operator.setitem through map: the cheapest scatter measured
        for tf, start, end in runs:
            while start < end:
                stop = bisect_right(keys, keys[start], start, end)
                level = repeat(cache.level(tf, doc_len[ranked[start]]))
                deque(map(operator.setitem, into, ranked[start:stop], level), maxlen=0)
                start = stop
        bounds = _grouped(fields)
        cache.put(postings, bounds)
        return bounds

    def joint_bounds(self, weighted: Sequence[tuple[int, Postings]]) -> list[int]:
        """Per group, an integer whose field i bounds the sum of weight * level over the terms.

        For one query, not kept: one `_grouped` conversion for all the terms, where bounds of
        their own would cost one each (a 400 KB array and 25 `int.from_bytes` at 100,000
        cards, whatever the term's size). The levels are `level`'s, by rank key; a card holding
        several of the terms gets the sum of its levels.
        """
        doc_len = self.doc_len
        fields = array(_FIELD_CODE, bytes(_FIELD_BYTES * len(doc_len)))
        into = repeat(fields)
        for number, (weight, postings) in enumerate(weighted):
            ranked, keys, _ = postings.ranking(doc_len)
            levels = {key: weight * self._key_level(key) for key in set(keys)}
            values = map(levels.__getitem__, keys)
            if number:  # most cards hold one of the terms: add to what the others set
                values = map(operator.add, map(fields.__getitem__, ranked), values)
            deque(map(operator.setitem, into, ranked, values), maxlen=0)
        return _grouped(fields)

    def _key_level(self, key: int) -> int:
        """`level` of a card of rank key `key` (its frequency and length)."""
        return _level(self.base, self.slope, self.scale, *key_parts(key))


def _level(base: float, slope: float, scale: float, tf: int, length: int) -> int:
    """The impact scale * tf / (tf + (base + slope * length)), rounded up to a whole step.

    Steps of scale / `_LEVELS`; at most `_LEVELS` + 1, since the impact stays below `scale`.
    """
    impact = scale * tf / (tf + (base + slope * length))
    return int(impact * (_LEVELS / scale * _UP)) + 1


def top_scores(
    terms: Sequence[tuple[float, Postings]], wanted: int, bm25: Bm25
) -> dict[int, float]:
    """Scores of a set of cards that surely holds the `wanted` best (and every tie with them).

    `terms` are (factor, postings) in the order their contributions are summed, the first with
    the largest factor (1.0); a card's score is the sum of factor * impact over the terms it
    holds. Measured at 100,000 cards (`benchmarks/bench_search_words.py`, CPU time, hits
    re-read, a busy 2-CPU machine): several words' p95 went from 30 ms (term-at-a-time MaxScore
    over dictionaries of impacts) to 8.7 ms on a first pass over the queries and 7.4 ms on a
    second; the other paths stay where they cost less than bounds.
    """
    if not terms:
        return {}
    if len(terms) == 1:
        factor, postings = terms[0]
        return {slot: factor * impact for slot, impact in _heads(postings, wanted, bm25).items()}
    if sum(len(postings) for _, postings in terms) <= _FEW_POSTINGS:
        return _every_card(terms, bm25)
    ceilings = [
        factor * max(bm25.impact(tf, ranked[start]) for tf, start, _ in runs)
        for factor, (ranked, _, runs) in ((f, p.ranking(bm25.doc_len)) for f, p in terms)
    ]
    scores = _rare_first(terms, wanted, bm25, ceilings)
    return _by_bounds(terms, wanted, bm25) if scores is None else scores


def _heads(postings: Postings, wanted: int, bm25: Bm25) -> dict[int, float]:
    """The impacts of the first `wanted` cards of each run and of any tied with the last.

    They hold the term's `wanted` best cards and every card tied with the last of them: any
    other card has `wanted` cards of larger impact before it in its own run.
    """
    ranked, keys, runs = postings.ranking(bm25.doc_len)
    found: dict[int, float] = {}
    for tf, start, end in runs:
        stop = min(end, start + wanted)
        if stop < end:  # equal keys (frequency and length) have equal impacts
            stop = bisect_right(keys, keys[stop - 1], stop, end)
        for slot in ranked[start:stop]:
            found[slot] = bm25.impact(tf, slot)
    return found


def _every_card(terms: Sequence[tuple[float, Postings]], bm25: Bm25) -> dict[int, float]:
    """Every card of the terms, scored term after term (few postings in all)."""
    scores: dict[int, float] = {}
    get, impact = scores.get, bm25.impact
    for factor, postings in terms:
        for slot, tf in zip(postings.slots, postings.tfs, strict=True):
            scores[slot] = get(slot, 0.0) + factor * impact(tf, slot)
    return scores


def _rare_first(
    terms: Sequence[tuple[float, Postings]], wanted: int, bm25: Bm25, ceilings: list[float]
) -> dict[int, float] | None:
    """Score only the cards of the first term, if they are few and surely hold the answer.

    They do when the first term's `wanted`-th best contribution beats all the other terms
    can add to a card lacking it; the others then update only the cards still in the running
    (MaxScore's cut). None when that does not hold, or the first term is not rare.
    """
    factor, first = terms[0]
    if len(first) > _FIRST_MAX:
        return None
    heads = _heads(first, wanted, bm25)
    bound = sum(ceilings[1:])
    if len(heads) < wanted or factor * _kth(heads, wanted) <= bound * (1.0 + 2 * _SLACK):
        return None
    impact = bm25.impact
    scores = {
        slot: factor * impact(tf, slot) for slot, tf in zip(first.slots, first.tfs, strict=True)
    }
    for (factor, postings), ceiling in zip(terms[1:], ceilings[1:], strict=True):
        scores = _still_in_running(scores, wanted, bound)
        _update_scored(scores, postings, factor, bm25)
        bound -= ceiling
    return scores


def _by_bounds(
    terms: Sequence[tuple[float, Postings]], wanted: int, bm25: Bm25
) -> dict[int, float]:
    """Score exactly only the cards whose rounded-up bound beats the `wanted`-th best so far.

    Seeded with every card of the rare terms and the best cards of the others (`_seeded`),
    then one group of `_GROUP` slots after another: the query's bound of each card of the
    group is one integer sum, and `_over` marks the cards whose bound is above `floor`, the
    running `wanted`-th best score in the same units, rounded down. A few marked cards are
    scored as found; many, best bound first until the bound falls to the floor. A term that
    can add at most a sliver of the seeded floor (a word most cards hold) adds its best level
    to every card's bound instead (`lift`): it needs no bounds of its own. Terms held by fewer
    than `dense_from` cards and bounded for the first time share one integer per group built
    for this query alone (`Bm25.joint_bounds`).
    """
    weights, bits = _weights(terms)
    units = (1 << bits) * _LEVELS / bm25.scale / _UP  # bound units per score unit, rounded down
    scores = _seeded(terms, wanted, bm25)
    top = heapq.nlargest(wanted, scores.values())
    heapq.heapify(top)
    floor = int(top[0] * units) if len(top) >= wanted else 0
    lift, kept, bounds, joint = 0, [], [], []
    cache, least, groups = bm25.cache, dense_from(bm25), -(-len(bm25.doc_len) // _GROUP)
    cache.fit(bm25)
    for weight, (_, postings) in zip(weights, terms, strict=True):
        if len(postings) < cache.min_postings:
            continue  # a rare term: `_seeded` scored every card holding it
        ranked, _, runs = postings.ranking(bm25.doc_len)
        most = weight * max(bm25.level(tf, ranked[start]) for tf, start, _ in runs)
        unbounded = len(postings) < least and cache.get(postings, groups) is None
        if most <= floor >> _FLAT_SHIFT and lift + most <= floor >> 1:  # keeps floor > lift
            lift += most
        elif unbounded and cache.first_use(postings):
            joint.append((weight, postings))
        else:
            kept.append(weight)
            bounds.append(bm25.bounds(postings))
    if joint:
        kept.append(1)
        bounds.append(bm25.joint_bounds(joint))
    slots = len(bm25.doc_len)
    for number, parts in enumerate(zip(*bounds, strict=True)):
        products = map(int.__mul__, kept, parts)
        total = next(products)  # sum() would start with a copy: 0 + the first product
        for product in products:
            total += product
        size = min(_GROUP, slots - number * _GROUP)
        over = _over(total, size, floor - lift)
        if not over:
            continue
        if over.bit_count() <= _FEW:  # a few cards: score each (cheaper than reading bounds)
            found = _marked(over, number * _GROUP)
        else:  # many: best bound first, until the bound falls to the floor
            found = _flagged(over, total, size, number * _GROUP)
        for bound, slot in found:
            if bound + lift <= floor:
                break
            if slot not in scores:
                scores[slot] = score = _score(slot, terms, bm25)
                floor = _pushed(top, score, wanted, units, floor)
    return scores


def _seeded(terms: Sequence[tuple[float, Postings]], wanted: int, bm25: Bm25) -> dict[int, float]:
    """The scores of every card of the rare terms, and of the best cards of the others.

    Rare: fewer cards than the cache's minimum. The others' best cards are taken term after
    term, until `wanted` cards are scored.
    """
    rare = [postings for _, postings in terms if len(postings) < bm25.cache.min_postings]
    scores = {slot: _score(slot, terms, bm25) for slot in {s for p in rare for s in p.slots}}
    for _, postings in terms:
        if len(scores) >= wanted:
            break
        heads = _heads(postings, wanted, bm25)
        for slot in heapq.nlargest(wanted, heads, key=heads.__getitem__):
            if slot not in scores:
                scores[slot] = _score(slot, terms, bm25)
    return scores


def dense_from(bm25: Bm25) -> int:
    """The fewest cards a term must hold to get bounds of its own on its first use."""
    return max(bm25.cache.min_postings, len(bm25.doc_len) // _DENSE_SHARE)


def _grouped(fields: array[int]) -> list[int]:
    """32-bit fields as one little-endian integer per `_GROUP` of them."""
    if sys.byteorder == "big":
        fields.byteswap()
    raw, size = memoryview(fields).cast("B"), _GROUP * _FIELD_BYTES
    return [int.from_bytes(raw[at : at + size], "little") for at in range(0, len(raw), size)]


def _pushed(top: list[int | float], score: float, wanted: int, units: float, floor: int) -> int:
    """Keep `score` in the heap of the `wanted` best; the floor (in bound units) they give."""
    if len(top) < wanted:
        heapq.heappush(top, score)
    elif score > top[0]:
        heapq.heapreplace(top, score)
    return int(top[0] * units) if len(top) >= wanted else floor


def _weights(terms: Sequence[tuple[float, Postings]]) -> tuple[list[int], int]:
    """Each factor rounded up to a multiple of 2**-bits, and those bits.

    The most bits that keep any card's bound (a sum of weight * level, each level at most
    `_LEVELS` + 1) below `_FLAG`.

    Raises:
        ValueError: no weights fit (factors far above 1, or hundreds of thousands of terms).
    """
    for bits in range(_WEIGHT_BITS, -1, -1):
        weights = [int(factor * (1 << bits) * _UP) + 1 for factor, _ in terms]
        if sum(weights) * (_LEVELS + 1) < _FLAG:
            return weights, bits
    raise ValueError("too many or too large factors to bound in 32 bits")


def _over(total: int, fields: int, cut: int) -> int:
    """The top bit of each of the `fields` 32-bit fields of `total` holding more than `cut`.

    Adding _FLAG - cut - 1 carries into a field's top bit exactly when it holds more than
    `cut` (no field of `total` reaches `_FLAG`, so no carry crosses into the next field).
    """
    ones = _ones(fields)
    return (total + _lifts(fields, cut)) & (ones << 31)


@lru_cache(maxsize=4)
def _ones(fields: int) -> int:
    """An integer with 1 in each of `fields` 32-bit fields."""
    return int.from_bytes(b"\x01\x00\x00\x00" * fields, "little")


@lru_cache(maxsize=16)
def _lifts(fields: int, cut: int) -> int:
    """_FLAG - cut - 1 in each of `fields` 32-bit fields."""
    return (_FLAG - cut - 1) * _ones(fields)


def _marked(over: int, first: int) -> list[tuple[int, int]]:
    """(_FLAG, slot) of the fields whose top bit `over` holds, last first (one bit scan each).

    _FLAG stands for their bounds, unread: no bound reaches it.
    """
    found = []
    while over:
        top = over.bit_length() - 1
        found.append((_FLAG, first + (top >> 5)))
        over ^= 1 << top
    return found


def _flagged(over: int, total: int, fields: int, first: int) -> list[tuple[int, int]]:
    """(bound, slot) of the fields whose top bit `over` holds, best bound first."""
    marks = over.to_bytes(fields * _FIELD_BYTES, "little")
    values = array(_FIELD_CODE, total.to_bytes(fields * _FIELD_BYTES, "little"))
    if sys.byteorder == "big":
        values.byteswap()
    found = []
    at = marks.find(0x80)
    while at >= 0:
        found.append((values[at >> 2], first + (at >> 2)))
        at = marks.find(0x80, at + 1)
    found.sort(reverse=True)
    return found


def _score(slot: int, terms: Sequence[tuple[float, Postings]], bm25: Bm25) -> float:
    score = 0.0
    for factor, postings in terms:
        tf = postings.tf(slot)
        if tf:
            score = score + factor * bm25.impact(tf, slot)
    return score


def _kth(scores: dict[int, float], wanted: int) -> float:
    return heapq.nlargest(wanted, scores.values())[-1]


def _update_scored(scores: dict[int, float], postings: Postings, factor: float, bm25: Bm25) -> None:
    """Add a term's contribution to the cards already in `scores` only."""
    if len(postings) < len(scores) * _BISECT_COST:
        for slot, tf in zip(postings.slots, postings.tfs, strict=True):
            if slot in scores:
                scores[slot] += factor * bm25.impact(tf, slot)
    else:
        for slot in scores:
            tf = postings.tf(slot)
            if tf:
                scores[slot] += factor * bm25.impact(tf, slot)


def _still_in_running(scores: dict[int, float], wanted: int, bound: float) -> dict[int, float]:
    """The scored cards that can still reach the `wanted` best, given that no unscored card can.

    `bound` is the most the remaining terms can add to any card (below the `wanted`-th best
    score): a card whose score plus `bound` stays below that threshold is out (scores only
    grow).
    """
    threshold = _kth(scores, wanted)
    floor = threshold - (bound + threshold) * _SLACK
    return {slot: score for slot, score in scores.items() if score + bound >= floor}
