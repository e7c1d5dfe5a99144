"""Builders for outbox entries in tests."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from indexer import OutboundMessage, OutboxEntry, SessionTarget, message_fingerprint

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def make_entry(n: int, session: str = "sess-a", seq: int | None = None, parts: int = 1):
    delivery = hashlib.sha256(f"delivery-{session}-{n}".encode()).hexdigest()
    messages = []
    for i in range(parts):
        content = f"message {n}.{i} for {session}"
        metadata = {"delivery_id": delivery, "source": "artmem", "part": i}
        fp = message_fingerprint("artmem-assistant", content, metadata)
        if parts > 1:
            metadata["message_fingerprint"] = fp
        messages.append(
            OutboundMessage(
                peer_id="artmem-assistant", content=content, metadata=metadata, fingerprint=fp
            )
        )
    return OutboxEntry(
        schema_version=1,
        delivery_id=delivery,
        target=SessionTarget(session_id=session, kind="conversation"),
        messages=messages,
        seq=n if seq is None else seq,
        admitted_at=T0,
    )
