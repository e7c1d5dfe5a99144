"""Builders for outbox entries in tests."""

from __future__ import annotations

from datetime import UTC, datetime

from indexer import (
    ConversationRef,
    OutboundMessage,
    OutboxEntry,
    SessionTarget,
    message_fingerprint,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def make_entry(n: int, session: str = "sess-a", seq: int | None = None, parts: int = 1):
    """A conversation delivery whose id is the one its content gives (Honcho spec §12.2)."""
    contents = [f"message {n}.{i} for {session}" for i in range(parts)]
    ref = ConversationRef(
        workspace_id="ws",
        user_peer_id="artmem-user",
        project_id="proj",
        dsh_session_id=f"dsh-{session}",
        turn=n,
        event_seqs=[n],
        roles=["assistant"] * parts,
    )
    delivery = ref.delivery_id(session, contents)
    messages = []
    for i, content in enumerate(contents):
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
        conversation=ref,
        seq=n if seq is None else seq,
        admitted_at=T0,
    )
