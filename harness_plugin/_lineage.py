"""Lineage on the host: checking a record's parents, `artmem lineage`, freshness down the graph.

The parents a caller names (the CLI's `--derived-from`, the record tool's `derived_from`) must be
experiments of the caller's project, which the host picked: a name that is not one of its cards
(missing, or another project's) is refused before anything is written. The walks themselves are
pure (`cards.lineage`); this module reads the cards they need.
"""

from __future__ import annotations

from collections.abc import Sequence

from cards import ExperimentCardV1, InvalidInput, UnknownParent, excerpt
from cards.errors import ExperimentNotFound
from cards.lineage import (
    Ancestry,
    DerivedVerdict,
    ancestry,
    children_of,
    derived_freshness,
    descendants,
)
from cas import Store
from harness_plugin import _shortids
from harness_plugin._views import iso, printable

_ONLY_OWN = "a result may only be derived from experiments recorded in its own project"


def check_parents(store: Store, parents: Sequence[str], *, short: bool = False) -> list[str]:
    """The full ids of `parents`, each proven an experiment of `store`'s project.

    With `short`, a unique prefix names a parent (the CLI); a tool's caller gives full ids.

    Raises:
        InvalidId: a parent is not an experiment id (or prefix) at all.
        InvalidInput: a parent is named twice.
        UnknownParent: a parent is not a card of this project.
    """
    try:
        ids = [_shortids.expand(store, p) if short else p for p in parents]
    except ExperimentNotFound as exc:  # a prefix of no card: as a full id of none is said
        raise UnknownParent(f"{exc.message}; {_ONLY_OWN}") from exc
    if len(set(ids)) != len(ids):
        raise InvalidInput("derived_from names the same parent twice")
    loaded = store.load_cards(ids) if ids else []
    for parent, card in zip(ids, loaded, strict=True):
        if card is None:
            raise UnknownParent(
                f"parent {excerpt(parent)} is not an experiment of this project; {_ONLY_OWN}"
            )
    return ids


def ancestors_of(store: Store, card: ExperimentCardV1) -> Ancestry:
    """`card`'s ancestors, read from `store` a generation at a time."""
    return ancestry(card, store.load_cards)


def lineage_verdict(
    store: Store, card: ExperimentCardV1, current: str | None
) -> DerivedVerdict | None:
    """`card`'s freshness made the worst over its ancestry, or None when nothing is carried.

    A card without parents, or a call without a current source version, costs no read.
    """
    if not card.derived_from or current is None:
        return None
    return derived_freshness(card, ancestors_of(store, card), current)


def carry_freshness(
    view: dict[str, object], store: Store, card: ExperimentCardV1, current: str | None
) -> dict[str, object]:
    """A `show` view with its freshness made the worst over `card`'s ancestry.

    Adds `derived_from` and `stale_ancestors` (the ancestors that made the verdict worse), as
    `_views.resolve_result` does for a resolve.
    """
    verdict = lineage_verdict(store, card, current)
    view["derived_from"] = list(card.derived_from)
    view["stale_ancestors"] = [] if verdict is None else list(verdict.culprits)
    if verdict is not None:
        view["freshness"] = str(verdict.freshness)
        warnings = view.get("warnings")
        view["warnings"] = [*(warnings if isinstance(warnings, list) else ()), *verdict.warnings]
    return view


def lineage_view(store: Store, experiment_id: str) -> dict[str, object]:
    """An experiment's ancestors and descendants: `nodes` and `edges` (parent, child)."""
    card = store.load_card(experiment_id)
    up = ancestors_of(store, card)
    scan = store.scan_cards()
    children = children_of(scan.cards)
    down = descendants(card.experiment_id, children)
    by_id = {c.experiment_id: c for c in scan.cards}
    nodes = [_node(card, "self")]
    nodes += [_node(a, "ancestor") for a in up.cards]
    nodes += [_node(by_id[d], "descendant") for d in down if d in by_id]
    edges = set(up.edges)
    for node in (card.experiment_id, *down):
        edges |= {(node, child) for child in children.get(node, ()) if child in by_id}
    return {
        "experiment_id": card.experiment_id,
        "nodes": nodes,
        "edges": [{"parent": p, "child": c} for p, c in sorted(edges)],
        "missing": list(up.missing),
    }


def _node(card: ExperimentCardV1, role: str) -> dict[str, object]:
    return {
        "experiment_id": card.experiment_id,
        "role": role,
        "title": card.title,
        "source": card.source,
        "source_version": card.source_version,
        "created_at": iso(card.created_at),
        "derived_from": list(card.derived_from),
    }


def lineage_lines(view: dict[str, object]) -> list[str]:
    """`artmem lineage` for people: ancestors above, descendants below, one line each."""
    nodes: list[dict[str, str]] = view["nodes"]  # type: ignore[assignment]  # lineage_view's
    lines: list[str] = []
    for role, heading in (("ancestor", "ancestors"), ("self", None), ("descendant", "children")):
        chosen = [n for n in nodes if n["role"] == role]
        if heading is not None:
            lines.append(f"{heading}: {len(chosen) or 'none'}")
        for n in chosen:
            mark = "*" if role == "self" else " "
            origin = f"{printable(n['source'])}@{printable(n['source_version'])}"
            lines.append(f"{mark} {n['experiment_id']}  {origin}  {printable(n['title'])}")
    missing: list[str] = view["missing"]  # type: ignore[assignment]
    if missing:
        lines.append(f"unreadable ancestors: {', '.join(missing)}")
    return lines
