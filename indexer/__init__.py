"""The Honcho indexer: durable outbox, delivery worker, Honcho adapter and card index states.

Names load lazily (PEP 562): a local-only command never loads the Honcho SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cards.lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from indexer._cards import CardAdmission, CardIndexer, ReconcileReport
    from indexer._entry import (
        CardRef,
        OutboundMessage,
        OutboxEntry,
        SessionTarget,
        cards_session_id,
        message_fingerprint,
    )
    from indexer._outbox import Admission, DeadLetter, Outbox, OutboxStats
    from indexer._policy import CircuitBreaker, CircuitState, RetryPolicy
    from indexer._search import CardSearch, RemoteCardHit
    from indexer._worker import (
        DeliveryReport,
        DeliveryWorker,
        MemoryService,
        Ownership,
        read_status,
    )
    from indexer.honcho_adapter import HonchoMemoryService, HonchoSettings

_EXPORTS = {
    "CardAdmission": "indexer._cards",
    "CardIndexer": "indexer._cards",
    "ReconcileReport": "indexer._cards",
    "CardRef": "indexer._entry",
    "OutboundMessage": "indexer._entry",
    "OutboxEntry": "indexer._entry",
    "SessionTarget": "indexer._entry",
    "cards_session_id": "indexer._entry",
    "message_fingerprint": "indexer._entry",
    "Admission": "indexer._outbox",
    "DeadLetter": "indexer._outbox",
    "Outbox": "indexer._outbox",
    "OutboxStats": "indexer._outbox",
    "CircuitBreaker": "indexer._policy",
    "CircuitState": "indexer._policy",
    "RetryPolicy": "indexer._policy",
    "CardSearch": "indexer._search",
    "RemoteCardHit": "indexer._search",
    "DeliveryReport": "indexer._worker",
    "DeliveryWorker": "indexer._worker",
    "MemoryService": "indexer._worker",
    "Ownership": "indexer._worker",
    "read_status": "indexer._worker",
    "HonchoMemoryService": "indexer.honcho_adapter",
    "HonchoSettings": "indexer.honcho_adapter",
}

__all__ = [
    "Admission",
    "CardAdmission",
    "CardIndexer",
    "CardRef",
    "CardSearch",
    "CircuitBreaker",
    "CircuitState",
    "DeadLetter",
    "DeliveryReport",
    "DeliveryWorker",
    "HonchoMemoryService",
    "HonchoSettings",
    "MemoryService",
    "OutboundMessage",
    "Outbox",
    "OutboxEntry",
    "OutboxStats",
    "Ownership",
    "ReconcileReport",
    "RemoteCardHit",
    "RetryPolicy",
    "SessionTarget",
    "cards_session_id",
    "message_fingerprint",
    "read_status",
]


__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
