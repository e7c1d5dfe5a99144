"""The Honcho indexer: durable outbox, delivery worker, Honcho adapter and card index states."""

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
from indexer._worker import (
    DeliveryReport,
    DeliveryWorker,
    MemoryService,
    Ownership,
    read_status,
)
from indexer.honcho_adapter import CardSearch, HonchoMemoryService, HonchoSettings, RemoteCardHit

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
    "OutboxEntry",
    "OutboxStats",
    "Outbox",
    "Ownership",
    "ReconcileReport",
    "RemoteCardHit",
    "RetryPolicy",
    "SessionTarget",
    "cards_session_id",
    "message_fingerprint",
    "read_status",
]
