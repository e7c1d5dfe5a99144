"""The Honcho indexer: durable outbox, delivery worker, Honcho adapter and card index states.

Names load lazily (PEP 562): a local-only command never loads the Honcho SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from indexer._admission import CardAdmission
    from indexer._cards import CardIndexer, ReconcileReport
    from indexer._entry import (
        ConversationRef,
        OutboundMessage,
        OutboxEntry,
        SessionTarget,
        cards_session_id,
        message_fingerprint,
    )
    from indexer._lexical import fused_order, matches_lexically, shaped_queries
    from indexer._outbox import Outbox, OutboxStats
    from indexer._policy import CircuitBreaker, RetryPolicy
    from indexer._retire import retire
    from indexer._search import CardSearch, MemoryHit, MemorySearch, RemoteCardHit, UserContext
    from indexer._worker import (
        DeliveryReport,
        DeliveryWorker,
        Ownership,
        read_status,
    )
    from indexer.honcho_adapter import HonchoMemoryService, HonchoSettings

_EXPORTS = {
    "CardAdmission": "indexer._admission",
    "CardIndexer": "indexer._cards",
    "ReconcileReport": "indexer._cards",
    "ConversationRef": "indexer._entry",
    "OutboundMessage": "indexer._entry",
    "OutboxEntry": "indexer._entry",
    "SessionTarget": "indexer._entry",
    "cards_session_id": "indexer._entry",
    "message_fingerprint": "indexer._entry",
    "fused_order": "indexer._lexical",
    "matches_lexically": "indexer._lexical",
    "shaped_queries": "indexer._lexical",
    "Outbox": "indexer._outbox",
    "OutboxStats": "indexer._outbox",
    "RetryPolicy": "indexer._policy",
    "retire": "indexer._retire",
    "CircuitBreaker": "indexer._policy",
    "CardSearch": "indexer._search",
    "RemoteCardHit": "indexer._search",
    "MemoryHit": "indexer._search",
    "MemorySearch": "indexer._search",
    "UserContext": "indexer._search",
    "DeliveryReport": "indexer._worker",
    "DeliveryWorker": "indexer._worker",
    "Ownership": "indexer._worker",
    "read_status": "indexer._worker",
    "HonchoMemoryService": "indexer.honcho_adapter",
    "HonchoSettings": "indexer.honcho_adapter",
}

__all__ = [
    "CardAdmission",
    "CardIndexer",
    "CardSearch",
    "CircuitBreaker",
    "ConversationRef",
    "DeliveryReport",
    "DeliveryWorker",
    "HonchoMemoryService",
    "HonchoSettings",
    "MemoryHit",
    "MemorySearch",
    "OutboundMessage",
    "Outbox",
    "OutboxEntry",
    "OutboxStats",
    "Ownership",
    "ReconcileReport",
    "RemoteCardHit",
    "RetryPolicy",
    "SessionTarget",
    "UserContext",
    "cards_session_id",
    "fused_order",
    "matches_lexically",
    "message_fingerprint",
    "read_status",
    "retire",
    "shaped_queries",
]


def __getattr__(name: str) -> object:
    """Load an exported name's module on first use (PEP 562) and keep the name here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The exported names."""
    return sorted(_EXPORTS)
