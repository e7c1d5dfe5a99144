"""What admitting a card did: its own module, so a host with Honcho off loads no indexer."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from cards import ExperimentCardV1, IndexState


class CardAdmission(msgspec.Struct, frozen=True):
    """What admitting a card's projection did, and the card as it stands afterwards."""

    queued: bool
    card: ExperimentCardV1
    reason: str | None = None

    @property
    def state(self) -> IndexState:
        """The card's index state after admission."""
        return self.card.index.state
