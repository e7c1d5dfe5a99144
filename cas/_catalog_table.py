"""The catalog's table of card files: each file's stamp, and its problem or its card's facts.

The table is what lets a catch-up parse only the changed files, and what says which cards the
index holds: exactly the `cards_per_project` newest valid ones (`bound`). Pure: the catalog reads
and writes it (`_catalog_files`), and loads the cards `bound` asks for.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from cards.errors import ArtifactError
from cas._catalog_engine import order_key
from cas._layout import CARD_SUFFIX

if TYPE_CHECKING:
    from cards.card import ExperimentCardV1
    from cas._cardfiles import CardRead, CardStamp


class Row(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """One card file: its stamp, and its problem code or its card's facts."""

    stamp: tuple[int | str, ...] | None
    problem: str | None = None
    state: str | None = None  # the card's index state
    updated: int = 0  # `order_key` of the card
    rank: int = 0
    indexed: bool = False  # among the `max_cards` newest: in the index


Table = dict[str, Row]


class Changes(msgspec.Struct):
    """What the index must do: cards to put (by experiment id), ids to delete."""

    puts: dict[str, ExperimentCardV1] = msgspec.field(default_factory=dict)
    deletes: set[str] = msgspec.field(default_factory=set)
    changed: bool = False  # whether the table or the index must change


def stamps(table: Table) -> dict[str, CardStamp]:
    """Card file name -> the stamp it was read at."""
    return {name: row.stamp for name, row in table.items() if row.stamp is not None}


def record(table: Table, reads: Iterable[CardRead], changes: Changes) -> None:
    """Record `reads` in `table`, and in `changes` what the index must put or delete."""
    for read in reads:
        name, card = read.name, read.card
        if card is None:  # unchanged since its stamp
            continue
        row = table.get(name)
        key = name.removesuffix(CARD_SUFFIX)
        changes.changed = True
        if isinstance(card, ArtifactError):
            if row is not None and row.indexed:
                changes.deletes.add(key)
            table[name] = Row(read.stamp, problem=str(card.code))
            changes.puts.pop(key, None)
            continue
        updated, rank = order_key(card)
        indexed = row is not None and row.indexed
        table[name] = Row(read.stamp, None, str(card.index.state), updated, rank, indexed)
        changes.puts[key] = card
        changes.deletes.discard(key)


def forget(table: Table, names: Iterable[str], changes: Changes) -> None:
    """Drop the rows of card files that are gone (their cards leave the index)."""
    for name in names:
        row = table.pop(name)
        changes.changed = True
        if row.indexed:
            changes.deletes.add(name.removesuffix(CARD_SUFFIX))


def bound(table: Table, max_cards: int, changes: Changes) -> list[str]:
    """Index exactly the `max_cards` newest valid cards; the ids to load and put.

    Every row ends marked as the index will hold it once `changes` and the loaded cards are
    written.
    """
    valid = [name for name, row in table.items() if row.problem is None]
    keep = None  # all of them: no ranking needed (the usual case)
    if len(valid) > max_cards:
        keep = set(
            heapq.nsmallest(max_cards, valid, key=lambda n: (-table[n].updated, table[n].rank))
        )
    missing = []
    for name in valid:
        row = table[name]
        if keep is None or name in keep:
            key = None if row.indexed else name.removesuffix(CARD_SUFFIX)
            if key is not None and key not in changes.puts:
                missing.append(key)
                changes.changed = True
            row.indexed = True
            continue
        key = name.removesuffix(CARD_SUFFIX)
        if row.indexed or key in changes.puts:
            changes.puts.pop(key, None)
            changes.deletes.add(key)
            changes.changed = True
        row.indexed = False
    return missing


def counts(table: Table) -> tuple[int, int, dict[str, int]]:
    """(valid cards, skipped files, valid cards by index state)."""
    states: dict[str, int] = {}
    for row in table.values():
        if row.problem is None:
            states[str(row.state)] = states.get(str(row.state), 0) + 1
    valid = sum(states.values())
    return valid, len(table) - valid, states
