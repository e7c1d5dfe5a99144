"""One term's postings in two orders, packed for the catalog file (ranked by `_catalog_rank`).

A term's postings are kept twice, as arrays of machine integers that `pack` turns into bytes
and `unpack` back with one copy (no per-posting work, so a first search touches nothing twice):

- by slot (`slots`, `tfs`): the weighted term frequency of any card, by bisection;
- by rank (`ranked`, with integer `keys` a bisection reads directly): weighted term frequency
  descending, then card length ascending. Within one term frequency a shorter card always has
  the larger BM25 impact, so each run of equal frequency lists its cards best first (equal
  impacts in any order), whatever the average length is.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

# Packed postings: slots and rank keys as unsigned 32-bit, weighted term frequencies as
# unsigned 16-bit (a card's fields hold at most a few thousand tokens).
SLOT_CODE, TF_CODE = "I", "H"
PACK_SHAPE = (array(SLOT_CODE).itemsize, array(TF_CODE).itemsize)
# A rank key: (0xFFFF - tf) << 16 | card length, so ascending keys are tf descending, then
# length ascending; lengths are bounded far below 2**16 (`_catalog.MAX_FIELD_TOKENS`).
_TF_SHIFT, _MAX = 16, 0xFFFF
Packed = tuple[bytes, bytes, bytes, bytes]


def rank_key(tf: int, length: int) -> int:
    """Where a card holding a term `tf` times, `length` tokens long, goes in the rank order."""
    return (_MAX - tf) << _TF_SHIFT | min(length, _MAX)


def key_parts(key: int) -> tuple[int, int]:
    """The (term frequency, card length) of a rank key."""
    return _MAX - (key >> _TF_SHIFT), key & _MAX


class Postings:
    """The cards holding one term, by slot and by rank."""

    __slots__ = ("_runs", "keys", "ranked", "slots", "tfs")

    def __init__(self) -> None:
        self.slots, self.tfs = array(SLOT_CODE), array(TF_CODE)
        # None until first needed: a bulk build adds in any order and sorts once.
        self.ranked: array[int] | None = None
        self.keys: array[int] | None = None  # rank_key of each card of `ranked`
        self._runs: list[tuple[int, int, int]] | None = None

    def __len__(self) -> int:
        return len(self.slots)

    def tf(self, slot: int) -> int:
        """The card's weighted term frequency; 0 if it does not hold the term."""
        slots = self.slots
        at = bisect_left(slots, slot)
        return self.tfs[at] if at < len(slots) and slots[at] == slot else 0

    def add(self, slot: int, tf: int, length: int) -> None:
        """Hold a card (`slot` not held yet) `length` tokens long."""
        at = bisect_left(self.slots, slot)
        self.slots.insert(at, slot)
        self.tfs.insert(at, tf)
        if self.ranked is not None and self.keys is not None:
            key = rank_key(tf, length)
            place = bisect_right(self.keys, key)
            self.ranked.insert(place, slot)
            self.keys.insert(place, key)
        self._runs = None

    def remove(self, slot: int, length: int) -> None:
        """Drop a held card `length` tokens long."""
        at = bisect_left(self.slots, slot)
        tf = self.tfs[at]
        del self.slots[at], self.tfs[at]
        if self.ranked is not None and self.keys is not None:
            key = rank_key(tf, length)
            low = bisect_left(self.keys, key)
            place = self.ranked.index(slot, low, bisect_right(self.keys, key, low))
            del self.ranked[place], self.keys[place]
        self._runs = None

    def ranking(
        self, doc_len: list[int]
    ) -> tuple[array[int], array[int], list[tuple[int, int, int]]]:
        """The cards by rank, their rank keys, and the runs of equal frequency (tf, start, end)."""
        ranked, keys = self._ranked(doc_len)
        if self._runs is None:
            runs, start = [], 0
            while start < len(keys):
                tf = _MAX - (keys[start] >> _TF_SHIFT)
                end = bisect_left(keys, (_MAX - tf + 1) << _TF_SHIFT, start)
                runs.append((tf, start, end))
                start = end
            self._runs = runs
        return ranked, keys, self._runs

    def _ranked(self, doc_len: list[int]) -> tuple[array[int], array[int]]:
        if self.ranked is None or self.keys is None:
            keys = [
                rank_key(tf, doc_len[slot]) for slot, tf in zip(self.slots, self.tfs, strict=True)
            ]
            order = sorted(range(len(keys)), key=keys.__getitem__)
            self.ranked = array(SLOT_CODE, [self.slots[i] for i in order])
            self.keys = array(SLOT_CODE, [keys[i] for i in order])
        return self.ranked, self.keys

    def pack(self, doc_len: list[int]) -> Packed:
        """Plain bytes for `marshal`: both orders."""
        ranked, keys = self._ranked(doc_len)
        return (self.slots.tobytes(), self.tfs.tobytes(), ranked.tobytes(), keys.tobytes())

    @classmethod
    def unpack(cls, packed: Packed) -> Postings:
        """Postings from what `pack` returned (one copy of each array, no per-posting work).

        Raises:
            ValueError: the four parts do not describe one set of postings.
        """
        postings = cls()
        slots, tfs, ranked, keys = packed
        postings.slots.frombytes(slots)
        postings.tfs.frombytes(tfs)
        postings.ranked, postings.keys = array(SLOT_CODE, ranked), array(SLOT_CODE, keys)
        if not len(postings.slots) == len(postings.tfs) == len(postings.ranked) == len(keys) // 4:
            raise ValueError("packed postings of unequal lengths")
        return postings


def count_packed(packed: Packed) -> int:
    """How many cards packed postings hold, without unpacking them."""
    return len(packed[0]) // PACK_SHAPE[0]
