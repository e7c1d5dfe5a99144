"""Lineage, pure: a card's ancestors and descendants, and freshness carried down the graph.

A card names its parents (`ExperimentCardV1.derived_from`), fixed when it is first written, so
every parent existed before its child and the graph has no cycle. The walks here still keep a
visited set and a node bound: cards are read from disk and are untrusted.

No I/O: the host passes a loader (`load_cards`: ids to cards, `None` for one not found).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import msgspec

from cards.policy import Freshness, freshness

if TYPE_CHECKING:
    from cards.card import ExperimentCardV1

MAX_NODES = 10_000  # the default cards-per-project quota: a walk never reads more
# How bad a verdict is: the worst over a card and its ancestors is the card's derived verdict.
SEVERITY = {
    Freshness.NOT_CHECKED: 0,
    Freshness.FRESH: 1,
    Freshness.UNVERIFIABLE: 2,
    Freshness.STALE: 3,
}

Loader = Callable[[Sequence[str]], Sequence["ExperimentCardV1 | None"]]


class Ancestry(msgspec.Struct, frozen=True):
    """A card's ancestors (nearest first), their edges, and parents that could not be read."""

    cards: tuple[ExperimentCardV1, ...]
    edges: tuple[tuple[str, str], ...]  # (parent, child)
    missing: tuple[str, ...]


def ancestry(card: ExperimentCardV1, load_cards: Loader, limit: int = MAX_NODES) -> Ancestry:
    """Every ancestor of `card`, breadth first, read by `load_cards` one generation at a time."""
    seen = {card.experiment_id}
    found: list[ExperimentCardV1] = []
    edges: list[tuple[str, str]] = []
    missing: list[str] = []
    generation = [card]
    while generation and len(found) < limit:
        wanted: list[str] = []
        for child in generation:
            for parent in child.derived_from:
                edges.append((parent, child.experiment_id))
                if parent not in seen:
                    seen.add(parent)
                    wanted.append(parent)
        wanted = wanted[: limit - len(found)]
        loaded = load_cards(wanted) if wanted else []
        generation = [c for c in loaded if c is not None]
        missing += [i for i, c in zip(wanted, loaded, strict=True) if c is None]
        found += generation
    return Ancestry(cards=tuple(found), edges=tuple(edges), missing=tuple(missing))


def children_of(cards: Iterable[ExperimentCardV1]) -> dict[str, list[str]]:
    """Each experiment's children (ids, newest first as `cards` come), from every card's parents."""
    children: dict[str, list[str]] = {}
    for card in cards:
        for parent in card.derived_from:
            children.setdefault(parent, []).append(card.experiment_id)
    return children


def descendants(start: str, children: dict[str, list[str]], limit: int = MAX_NODES) -> list[str]:
    """Every descendant of `start`, breadth first, bounded by `limit`."""
    seen = {start}
    order: list[str] = []
    frontier = [start]
    while frontier and len(order) < limit:
        following: list[str] = []
        for node in frontier:
            for child in children.get(node, ()):
                if child not in seen:
                    seen.add(child)
                    order.append(child)
                    following.append(child)
        frontier = following
    return order[:limit]


class DerivedVerdict(msgspec.Struct, frozen=True):
    """The worst freshness over a card and its ancestors from the same source."""

    freshness: Freshness
    culprits: tuple[str, ...]  # the ancestors whose own verdict is that worst one
    warnings: tuple[str, ...]


def derived_freshness(
    card: ExperimentCardV1, ancestors: Ancestry, current: str | None
) -> DerivedVerdict:
    """`card`'s verdict against `current`, made worse by any ancestor of the same source.

    `current` is the caller's version of `card.source`; an ancestor from another source is not
    compared with it. An ancestor that could not be read makes the verdict unverifiable.
    """
    own = freshness(card.source_version, current)
    verdicts = {
        a.experiment_id: freshness(a.source_version, current)
        for a in ancestors.cards
        if a.source == card.source
    }
    if current is not None:
        verdicts |= dict.fromkeys(ancestors.missing, Freshness.UNVERIFIABLE)
    worst = max([own, *verdicts.values()], key=SEVERITY.__getitem__)
    culprits = tuple(i for i, v in verdicts.items() if v is worst and SEVERITY[v] > 1)
    warnings = tuple(_warning(i, verdicts[i], i in ancestors.missing) for i in culprits)
    return DerivedVerdict(freshness=worst, culprits=culprits, warnings=warnings)


def _warning(experiment_id: str, verdict: Freshness, missing: bool) -> str:
    if missing:
        return f"unverifiable ancestor {experiment_id}: its card cannot be read"
    if verdict is Freshness.STALE:
        return (
            f"stale ancestor {experiment_id}: it was derived from another version of this "
            "source, so this result is stale too"
        )
    return f"unverifiable ancestor {experiment_id}: its source version is unknown"
