"""Card index states (Honcho spec §29.1 steps 5–7, §29.2): admission, outcomes and reconciliation.

A committed card is admitted to the outbox; acknowledgements and dead letters come back as card
states; reconciliation re-admits cards whose delivery was lost, exhausted or corrupt.

States: `pending` (committed locally, not admitted), `queued` (durably in the outbox: not yet
searchable), `indexed` (Honcho confirmed it), `failed` (dead-lettered, or the projection was
skipped), `disabled` (Honcho is off).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

import msgspec

from cards import (
    ArtifactError,
    ExperimentCardV1,
    IndexState,
    IndexStatus,
    OutboxError,
)
from cards.remote import ProjectionSkipped, RemoteCard, project_card
from cas import Store
from fsedge import utc_now
from indexer._admission import CardAdmission
from indexer._entry import (
    ENTRY_SCHEMA_VERSION,
    CardRef,
    OutboundMessage,
    OutboxEntry,
    SessionTarget,
    cards_session_id,
    message_fingerprint,
)
from indexer._outbox import Outbox
from indexer._outbox_files import CORRUPT
from indexer._worker import EXHAUSTED

Clock = Callable[[], datetime]
# Dead letters for these reasons may be retried by reconciliation; a rejection may not. A
# corrupt document never reached a verdict from Honcho, so its card gets a fresh admission.
RETRYABLE_DEAD = frozenset({EXHAUSTED, CORRUPT})


@dataclass
class ReconcileReport:
    """Counts from one reconciliation pass."""

    examined: int = 0
    admitted: int = 0
    already_queued: int = 0
    skipped: int = 0
    failed: int = 0
    truncated: bool = False


@dataclass
class CardIndexer:
    """Turns committed cards into outbox deliveries and outcomes back into card states."""

    outbox: Outbox
    stores: Mapping[str, Store]
    assistant_peer_id: str
    clock: Clock = utc_now

    def entry_for(
        self, remote: RemoteCard, card: ExperimentCardV1, *, maybe_sent: bool = False
    ) -> OutboxEntry:
        """The outbox entry of one card projection (one message, by the assistant peer)."""
        metadata = dict(remote.metadata)
        message = OutboundMessage(
            peer_id=self.assistant_peer_id,
            content=remote.content,
            metadata=metadata,
            fingerprint=message_fingerprint(self.assistant_peer_id, remote.content, metadata),
        )
        return OutboxEntry(
            schema_version=ENTRY_SCHEMA_VERSION,
            delivery_id=remote.delivery_id,
            target=SessionTarget(session_id=cards_session_id(card.project_id), kind="cards"),
            messages=[message],
            card=CardRef(
                project_id=card.project_id,
                experiment_id=card.experiment_id,
                projection_revision=remote.projection_revision,
            ),
            seq=self.outbox.next_seq(),
            admitted_at=self.clock(),
            maybe_sent=maybe_sent,
        )

    def admit(
        self,
        card: ExperimentCardV1,
        *,
        maybe_sent: bool = True,
        remote: RemoteCard | ProjectionSkipped | None = None,
    ) -> CardAdmission:
        """Admit a committed card's projection; the local record succeeds whatever happens here.

        `maybe_sent=False` only for a projection revision that was just created (a new or
        changed card): nothing of it can be on the server yet, so the first attempt skips the
        duplicate check. An indexed card is left alone. `remote` is the card's projection when
        the caller has it already.
        """
        if card.index.state is IndexState.INDEXED:
            return CardAdmission(False, card)
        if remote is None:
            remote = project_card(card)
        if isinstance(remote, ProjectionSkipped):
            reason = str(remote.reason)
            failed = self._move(card, remote_revision=None, state=IndexState.FAILED, error=reason)
            return CardAdmission(False, failed, reason)
        entry = self.entry_for(remote, card, maybe_sent=maybe_sent)
        try:
            self.outbox.admit(entry)
        except OutboxError as exc:
            return CardAdmission(False, card, str(exc.code))
        try:
            updated = self._move(
                card, remote.projection_revision, IndexState.QUEUED, None, admitted=card
            )
        except ArtifactError as exc:  # queued in the outbox all the same; reconcile fixes it
            return CardAdmission(True, card, str(exc.code))
        return CardAdmission(True, updated)

    def on_ack(self, entry: OutboxEntry, code: str) -> None:
        """Honcho accepted a card delivery: mark the card indexed if it is still that revision."""
        del code
        if entry.card is not None:
            self._move_ref(entry, IndexState.INDEXED, None)

    def on_dead(self, entry: OutboxEntry, code: str) -> None:
        """A card delivery was dead-lettered: mark the card failed (if still that revision)."""
        if entry.card is not None:
            self._move_ref(entry, IndexState.FAILED, code, entry.attempts)

    def reconcile(self, batch: int) -> ReconcileReport:
        """Re-admit pending, failed-but-retryable and lost queued cards, at most `batch` of them.

        A queued card is lost when its pending document is missing, or is corrupt (then moved
        to dead-letter on the way, and the card admitted afresh).
        """
        report = ReconcileReport()
        for store in self.stores.values():
            for card in store.scan_cards().cards:
                if card.index.state in (IndexState.INDEXED, IndexState.DISABLED):
                    continue
                if report.examined >= batch:
                    report.truncated = True
                    return report
                report.examined += 1
                self._reconcile_card(card, report)
        return report

    def _reconcile_card(self, card: ExperimentCardV1, report: ReconcileReport) -> None:
        remote = project_card(card)
        if isinstance(remote, ProjectionSkipped):
            report.skipped += 1
            return
        delivery_id = remote.delivery_id
        if self.outbox.is_pending(delivery_id):
            report.already_queued += 1
            self._move(card, remote.projection_revision, IndexState.QUEUED, None, admitted=card)
            return
        dead = self.outbox.dead_reason(delivery_id)
        if dead is not None and dead not in RETRYABLE_DEAD:
            report.skipped += 1  # a permanent rejection stays failed until the card changes
            return
        if dead is not None:
            self.outbox.revive(delivery_id)
        outcome = self.admit(card, remote=remote)
        if outcome.queued:
            report.admitted += 1
        else:
            report.failed += 1

    def _move_ref(
        self, entry: OutboxEntry, state: IndexState, error: str | None, attempts: int = 0
    ) -> None:
        ref = entry.card
        assert ref is not None
        store = self.stores.get(ref.project_id)
        if store is None:
            return
        try:
            card = store.load_card(ref.experiment_id)
            self._move(card, ref.projection_revision, state, error, attempts)
        except ArtifactError:
            return  # the card is gone or unreadable: nothing to mark

    def _move(
        self,
        card: ExperimentCardV1,
        remote_revision: str | None,
        state: IndexState,
        error: str | None,
        attempts: int = 0,
        *,
        admitted: ExperimentCardV1 | None = None,
    ) -> ExperimentCardV1:
        """Set a card's state, deciding under the store's lock against the card as it is then.

        A state about a projection revision applies only while the card still has that
        revision (a re-record in between starts a new delivery of its own), and `queued` never
        overwrites `indexed` of the same revision (the worker may have been faster). The card
        keeps the revision its state is about, so an acknowledgement is matched without
        projecting the card again; an admission (`admitted`, the card that was projected) holds
        while the card is unchanged apart from its index status.
        """
        now = self.clock()

        def decide(current: ExperimentCardV1) -> IndexStatus | None:
            if remote_revision is not None:
                if admitted is not None:
                    if not _same_but_index(current, admitted):
                        return None
                elif _revision(current) != remote_revision:
                    return None
            if state is IndexState.QUEUED and current.index.state is IndexState.INDEXED:
                return None
            return IndexStatus(
                state=state,
                attempts=min(attempts or current.index.attempts, 1_000_000),
                last_error=error,
                updated_at=now,
                projection_revision=remote_revision,
            )

        return self.stores[card.project_id].update_index_status(card.experiment_id, decide)


def _same_but_index(current: ExperimentCardV1, card: ExperimentCardV1) -> bool:
    return msgspec.structs.replace(current, index=card.index) == card


def _revision(card: ExperimentCardV1) -> str | None:
    """The projection revision of `card`: kept in its index status once admitted.

    A pending card (admitted, then a crash before it was marked queued) and a card written
    before revisions were kept are projected again.
    """
    if card.index.projection_revision is not None:
        return card.index.projection_revision
    remote = project_card(card)
    if isinstance(remote, ProjectionSkipped):
        return None
    return remote.projection_revision
