"""The composition root: stores, outbox, card indexer and the Honcho service, from configuration.

Start-up validates everything (a missing API key variable fails here, clearly); after a valid
start, remote failures never stop local work.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from cards import NotOwner
from harness_plugin._stores import build_store
from harness_plugin.config import Config

if TYPE_CHECKING:
    import httpx

    from cards import ExperimentCardV1
    from cas import Store
    from indexer import (
        CardAdmission,
        CardIndexer,
        DeliveryReport,
        DeliveryWorker,
        Outbox,
        Ownership,
        ReconcileReport,
    )
    from indexer.honcho_adapter import HonchoMemoryService


class SyncReport(msgspec.Struct):
    """What `artmem sync` did."""

    reconciled: ReconcileReport
    delivery: DeliveryReport
    circuit: str
    last_error: str | None


class Runtime:
    """Everything a host process needs, built once from a validated configuration."""

    def __init__(
        self,
        config: Config,
        environ: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = config
        self.environ: Mapping[str, str] = dict(os.environ) if environ is None else environ
        self.transport = transport
        self.stores: dict[str, Store] = {p.id: build_store(config, p.id) for p in config.projects}
        self.outbox: Outbox | None = None
        self.indexer: CardIndexer | None = None
        honcho = config.honcho
        if honcho.enabled:  # the indexer loads only with Honcho on
            from indexer import CardIndexer, Outbox

            honcho.api_key(self.environ)  # fail at start, not at the first delivery
            self.outbox = Outbox(config.state_root)
            self.indexer = CardIndexer(
                outbox=self.outbox, stores=self.stores, assistant_peer_id=honcho.assistant_peer_id
            )

    def admit(self, card: ExperimentCardV1, *, new_revision: bool) -> CardAdmission:
        """Queue a committed card for Honcho (never raises: the local record already stands)."""
        if self.indexer is None:
            from indexer import CardAdmission

            return CardAdmission(False, card)
        return self.indexer.admit(card, maybe_sent=not new_revision)

    def service(self) -> HonchoMemoryService:
        """The Honcho client; only built (and the SDK only loaded) when something needs it."""
        from indexer.honcho_adapter import HonchoMemoryService, HonchoSettings

        honcho = self.config.honcho
        settings = HonchoSettings(
            base_url=honcho.base_url,
            workspace_id=honcho.workspace_id,
            user_peer_id=honcho.user_peer_id,
            assistant_peer_id=honcho.assistant_peer_id,
            timeout_s=honcho.timeout_s,
            create_workspace=honcho.create_workspace,
            observe_assistant=self.config.capture.observe_assistant,
        )
        return HonchoMemoryService(settings, honcho.api_key(self.environ), self.transport)

    def worker(self, ownership: Ownership, service: HonchoMemoryService) -> DeliveryWorker:
        """A delivery worker wired to the card indexer's hooks."""
        from indexer import DeliveryWorker, RetryPolicy

        assert self.outbox is not None and self.indexer is not None
        honcho = self.config.honcho
        return DeliveryWorker(
            outbox=self.outbox,
            service=service,
            ownership=ownership,
            policy=RetryPolicy(honcho.retry_base_s, honcho.retry_max_s, honcho.max_attempts),
            max_sessions=honcho.max_sessions_in_flight,
            on_ack=self.indexer.on_ack,
            on_dead=self.indexer.on_dead,
        )

    def sync(self, deadline_s: float | None = None) -> SyncReport:
        """Reconcile card states, then deliver until empty or the deadline (Honcho spec §29.1).

        Raises:
            NotOwner: another worker owns the state root.
        """
        if self.outbox is None or self.indexer is None:
            raise NotOwner("honcho is disabled in the configuration: nothing to sync")
        from indexer import Ownership

        ownership = Ownership(self.config.state_root)
        if not ownership.acquire():
            raise NotOwner("another artmem worker owns this state root; it delivers instead")
        service = self.service()
        try:
            reconciled = self.indexer.reconcile(self.config.honcho.reconcile_batch)
            worker = self.worker(ownership, service)
            delivery = worker.drain(deadline_s or self.config.honcho.drain_timeout_s)
            return SyncReport(
                reconciled, delivery, str(worker.breaker.state), worker.breaker.last_error
            )
        finally:
            service.close()
            ownership.release()
