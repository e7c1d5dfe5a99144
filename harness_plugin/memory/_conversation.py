"""A conversational delivery (Honcho spec §11.2–§11.3, §12.2): bounded, redacted, identified.

An exchange (a completed root turn), a note (`memory_record`) and a correction (`memory_correct`)
all become one outbox entry for the harness session's Honcho session. Before anything is
written, every text is normalised (NFC, LF), bounded, and redacted with the same redactor as the
cards; a message empty after redaction is dropped, and a delivery with nothing left is skipped.
The delivery id is computed from the post-redaction payload, so capturing the same turn twice is
one delivery. Metadata says where a message came from and what it is, never more: unknown
fields (repository, task lineage) are omitted, not invented.

Redaction costs about 1.3 µs per character; `Redactions.prepare` runs it when a message arrives,
so the event that completes a turn, which also waits for a durable write, finds it done (a small
memo per worker keyed by text and bound; a different bound at the end redacts again).
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cards import honcho_session_id
from cards.redaction import RedactionResult, redact, remove_placeholders
from harness_plugin.config._memory import CaptureConfig, Oversize
from indexer import (
    ConversationRef,
    OutboundMessage,
    OutboxEntry,
    SessionTarget,
    message_fingerprint,
)

SOURCE = "artmem"
LAYER = "conversation"  # Honcho search filters on this, the project and the person
SCHEMA_VERSION = 1
HONCHO_MAX_CHARS = 25_000
PLUGIN_VERSION = "0.1.0"


class Skip(enum.StrEnum):
    """Why nothing was admitted (content-free; counted in status)."""

    TOO_LONG = "capture.too_long"
    EMPTY = "capture.empty_after_redaction"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who and where, from configuration and the host's caller: never from the model."""

    workspace_id: str
    user_peer_id: str
    assistant_peer_id: str
    project_id: str
    dsh_session_id: str


@dataclass(frozen=True, slots=True)
class Said:
    """One message to deliver: its role (`user` or `assistant`), event seq and raw text."""

    role: str
    seq: int
    text: str


@dataclass(frozen=True, slots=True)
class Built:
    """An entry to admit, with what sanitising did to get there."""

    entry: OutboxEntry
    redactions: int
    truncated: bool


def build_entry(
    who: Identity,
    turn: int,
    said: Sequence[Said],
    *,
    kind: str,
    limits: CaptureConfig,
    now: datetime,
    seq: int,
    extra: dict[str, str] | None = None,
    redactions: Redactions | None = None,
) -> Built | Skip:
    """The outbox entry for `said` in `who`'s harness session, or why there is none.

    `kind` is `exchange`, `note` or `correction`; `extra` adds metadata (`note_kind`,
    `supersedes`); `redactions` may hold the messages' redactions already. Messages keep their
    order.
    """
    budget = limits.max_exchange_chars
    kept: list[tuple[Said, str]] = []
    count, truncated = 0, False
    for item in said:
        bound = min(limits.max_message_chars, budget)
        if len(item.text) > bound:
            if limits.oversize is Oversize.SKIP:
                return Skip.TOO_LONG
            truncated = True
        if bound <= 0:
            continue
        if redactions is not None:
            result = redactions.of(item.text, bound)
        else:
            result = redact(item.text, max_chars=bound)
        count += result.redactions
        text = result.text.strip()[:HONCHO_MAX_CHARS]
        if not remove_placeholders(text).strip():
            continue
        budget -= len(item.text[:bound])
        kept.append((item, text))
    if not kept:
        return Skip.EMPTY
    session = honcho_session_id(who.dsh_session_id)
    ref = ConversationRef(
        workspace_id=who.workspace_id,
        user_peer_id=who.user_peer_id,
        project_id=who.project_id,
        dsh_session_id=who.dsh_session_id,
        turn=turn,
        event_seqs=[item.seq for item, _ in kept],
        roles=[_role(kind, item.role) for item, _ in kept],
    )
    delivery_id = ref.delivery_id(session, [text for _, text in kept])
    messages = [
        _message(
            who, item, text, kind=kind, turn=turn, delivery_id=delivery_id, now=now, extra=extra
        )
        for item, text in kept
    ]
    entry = OutboxEntry(
        schema_version=1,
        delivery_id=delivery_id,
        target=SessionTarget(
            session_id=session, kind="conversation", dsh_session_id=who.dsh_session_id
        ),
        messages=messages,
        conversation=ref,
        seq=seq,
        admitted_at=now,
    )
    return Built(entry, count, truncated)


class Redactions:
    """Redaction results of the latest messages, by text and bound (thread-safe)."""

    def __init__(self, max_entries: int = 32) -> None:
        self._max_entries = max_entries
        self._results: OrderedDict[tuple[str, int], RedactionResult] = OrderedDict()
        self._lock = threading.Lock()

    def prepare(self, text: str, limits: CaptureConfig) -> None:
        """Redact an arriving message now, with the bound its exchange will most likely give."""
        self.of(text, min(limits.max_message_chars, limits.max_exchange_chars))

    def of(self, text: str, bound: int) -> RedactionResult:
        """`redact(text, max_chars=bound)`, computed once while it stays among the latest."""
        key = (text, bound)
        with self._lock:
            result = self._results.get(key)
            if result is not None:
                self._results.move_to_end(key)
                return result
        result = redact(text, max_chars=bound)  # outside the lock: other sessions go on
        with self._lock:
            self._results[key] = result
            while len(self._results) > self._max_entries:
                self._results.popitem(last=False)
        return result


def _role(kind: str, role: str) -> str:
    """The role in the delivery identity: an exchange's speaker, or the kind of a note."""
    return role if kind == "exchange" else kind


def _message(
    who: Identity,
    item: Said,
    text: str,
    kind: str,
    turn: int,
    delivery_id: str,
    now: datetime,
    extra: dict[str, str] | None,
) -> OutboundMessage:
    peer = who.user_peer_id if item.role == "user" else who.assistant_peer_id
    metadata: dict[str, str | int | bool] = {
        "source": SOURCE,
        "layer": LAYER,
        "kind": kind,
        "schema_version": SCHEMA_VERSION,
        "dsh_session_id": who.dsh_session_id,
        "dsh_event_seq": item.seq,
        "dsh_turn": turn,
        "dsh_agent_kind": "root",
        "project_id": who.project_id,
        "user_peer_id": who.user_peer_id,
        "role": item.role,
        "captured_at": now.isoformat(),
        "plugin_version": PLUGIN_VERSION,
        **(extra or {}),
    }
    fingerprint = message_fingerprint(peer, text, metadata)
    metadata |= {"delivery_id": delivery_id, "message_fingerprint": fingerprint}
    return OutboundMessage(peer_id=peer, content=text, metadata=metadata, fingerprint=fingerprint)
