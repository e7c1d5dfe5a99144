"""Retiring a removed experiment's Honcho copy through the outbox (`artmem rm`).

Honcho has no message delete. A removed experiment is retired by one more message in the
project's cards session, sent through the outbox like any card delivery: its metadata says
`kind: "experiment-retired"` and names the experiment (no content of the card; the text is a
fixed sentence). artmem's own searches drop the hits of a retired experiment (`cas`'s
retirement marker, and a card search only ever asks for `kind: "experiment-card"`); the old
card message itself stays in Honcho until an operator deletes the cards session (README,
"Retention, backup and deletion"). Deliveries of the experiment's card still waiting in the
outbox are withdrawn first, so a card removed before it was sent never reaches Honcho.
"""

from __future__ import annotations

from datetime import datetime

from cards import ExperimentId, ProjectId
from cards.remote import card_delivery_id, projection_revision
from indexer._entry import (
    ENTRY_SCHEMA_VERSION,
    CardRef,
    MetadataValue,
    OutboundMessage,
    OutboxEntry,
    SessionTarget,
    cards_session_id,
    message_fingerprint,
)
from indexer._outbox import Outbox

RETIRED_KIND = "experiment-retired"
RETIREMENT_TEXT = "An operator removed this experiment from artmem; its earlier card is retired."


def retirement_entry(
    outbox: Outbox,
    assistant_peer_id: str,
    *,
    project_id: str,
    experiment_id: str,
    artifact_id: str,
    retired_at: datetime,
) -> OutboxEntry:
    """The outbox entry that retires one experiment's Honcho copy."""
    base: dict[str, MetadataValue] = {
        "source": "artmem",
        "kind": RETIRED_KIND,
        "project_id": project_id,
        "experiment_id": experiment_id,
        "artifact_id": artifact_id,
        "retired_at": retired_at.isoformat(),
        "schema_version": 1,
    }
    revision = projection_revision(RETIREMENT_TEXT, base)
    delivery_id = card_delivery_id(ProjectId(project_id), ExperimentId(experiment_id), revision)
    metadata = {**base, "projection_revision": revision, "delivery_id": delivery_id}
    message = OutboundMessage(
        peer_id=assistant_peer_id,
        content=RETIREMENT_TEXT,
        metadata=metadata,
        fingerprint=message_fingerprint(assistant_peer_id, RETIREMENT_TEXT, metadata),
    )
    return OutboxEntry(
        schema_version=ENTRY_SCHEMA_VERSION,
        delivery_id=delivery_id,
        target=SessionTarget(session_id=cards_session_id(project_id), kind="cards"),
        messages=[message],
        card=CardRef(
            project_id=project_id, experiment_id=experiment_id, projection_revision=revision
        ),
        seq=outbox.next_seq(),
        admitted_at=retired_at,
    )


def retire(
    outbox: Outbox,
    assistant_peer_id: str,
    *,
    project_id: str,
    experiment_id: str,
    artifact_id: str,
    retired_at: datetime,
) -> int:
    """Withdraw the experiment's waiting card deliveries and queue its retirement.

    Returns how many waiting deliveries were withdrawn.

    Raises:
        OutboxError: the outbox could not be written (nothing was queued).
    """
    withdrawn = 0
    for entry in outbox.pending():
        ref = entry.card
        if ref is not None and (ref.project_id, ref.experiment_id) == (project_id, experiment_id):
            outbox.ack(entry.delivery_id)
            withdrawn += 1
    outbox.admit(
        retirement_entry(
            outbox,
            assistant_peer_id,
            project_id=project_id,
            experiment_id=experiment_id,
            artifact_id=artifact_id,
            retired_at=retired_at,
        )  # fmt: skip
    )
    return withdrawn
