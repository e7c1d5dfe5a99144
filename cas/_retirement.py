"""Which experiments an operator removed: the retirement markers `artmem rm` leaves.

`retired/<experiment_id>` below the project (a file, or a key of the bucket, written by
`cas._lifecycle.remove_experiments`). The host's searches read them to drop a removed
experiment's Honcho copy, which Honcho cannot delete. This module only reads: it is what a
search may load, where the module that removes is the operator's alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from cards import parse_experiment_id
from cards.errors import CardInvalid, ExperimentNotFound
from cas._store import Store

RETIRED = "retired"


def retired_among(store: Store, experiment_ids: Sequence[str]) -> set[str]:
    """Which of these experiments an operator removed (`rm`) and no card names again."""
    if not experiment_ids:
        return set()
    with store._opened(create=False) as room:
        if room is None:
            return set()
        retired = set()
        for exp_id in experiment_ids:
            if room.keys.stat(f"{RETIRED}/{parse_experiment_id(exp_id)}") is None:
                continue
            try:
                room.cards.read(parse_experiment_id(exp_id))
            except (ExperimentNotFound, CardInvalid):
                retired.add(exp_id)
        return retired
