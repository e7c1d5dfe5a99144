"""The conversational layer of one worker: capture, first-step recall and the three memory tools.

Everything on a caller's path is local: `events/append` reads an event, and for a completed root
turn writes one outbox document (the delivery worker sends it later); it never waits on Honcho.
Recall waits on Honcho only up to its deadline and fails open. Scope comes from the host's
caller and the configuration, never from an argument.

Consent, stronger than Honcho spec §14: `memory_record` and `memory_correct` accept only content
that the person plainly said in their latest message of the calling root session (`_consent`: whole
clauses, not withheld, asked, quoted or denied). The model's own claims, text from another
session and a child agent's call are refused with `memory.consent_refused`; a call naming a
session from another project's directory than where that session started, with
`memory.project_mismatch`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from cards import (
    ArtifactError,
    ConsentRefused,
    InvalidRequest,
    OutboxError,
    ProjectMismatch,
    UnknownProject,
    results,
    wire_memory,
)
from cards.redaction import outbound_query
from fsedge import utc_now
from harness_plugin._catalogs import LiveCatalog
from harness_plugin._runtime import Runtime
from harness_plugin.config._memory import CaptureMode, RecallMode
from harness_plugin.memory._capture import EventTracker, Outcome, UserMessage, count_of
from harness_plugin.memory._consent import Refusal, consent, kept_clauses, withholds
from harness_plugin.memory._conversation import Built, Identity, Redactions, Said, Skip, build_entry
from harness_plugin.memory._recall import Recall, RecallFailed, item_text, superseded_ids
from harness_plugin.memory._recall_search import answered, fuse, submit_searches
from indexer import MemoryHit

if TYPE_CHECKING:
    from indexer.honcho_adapter import HonchoMemoryService

_QUIET = {Outcome.BUFFERED, Outcome.IGNORED}


@dataclass
class ConversationMemory:
    """Capture, recall and the memory tools over one runtime's outbox and Honcho client."""

    runtime: Runtime
    service: HonchoMemoryService
    pool: Executor
    catalogs: Mapping[str, LiveCatalog] = field(default_factory=dict)
    on_admitted: Callable[[], None] = lambda: None
    clock: Callable[[], datetime] = utc_now
    counters: Counter[str] = field(default_factory=Counter)
    tracker: EventTracker = field(init=False)
    recall: Recall = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _redactions: Redactions = field(default_factory=Redactions, init=False)

    def __post_init__(self) -> None:
        capture = self.runtime.config.capture
        self.tracker = EventTracker(
            capture.max_sessions, capture.max_turn_messages, capture.max_message_chars
        )
        self.recall = Recall(
            self.runtime.config.recall,
            lambda: self.service,
            self.pool,
            self.runtime.config.state_root,
        )

    # -- capture ------------------------------------------------------------------------------

    def append(self, session_id: str, cwd: str, root: bool, event: object) -> dict[str, object]:
        """Take one DSH event (`events/append`); admits an exchange when a root turn completed.

        Raises:
            InvalidRequest: `event` is not an object.
        """
        if not isinstance(event, Mapping):
            raise InvalidRequest("events/append needs params.event, a DSH session event object")
        with self._lock:  # one reader thread in the worker; the lock keeps direct callers safe
            seen = self.tracker.append(session_id, root=root, event=event, cwd=cwd)
        self.count(str(seen.outcome))
        if seen.outcome is Outcome.BUFFERED and seen.said:
            if self.runtime.config.capture.mode is not CaptureMode.OFF:
                self._redactions.prepare(seen.said[0].text, self.runtime.config.capture)
        if seen.outcome is not Outcome.EXCHANGE:
            skipped = None if seen.outcome in _QUIET else str(seen.outcome)
            return {"accepted": seen.outcome is not Outcome.INVALID, "captured": None,
                    "skipped": skipped}  # fmt: skip
        assert seen.turn is not None
        if self.runtime.config.capture.mode is CaptureMode.OFF:
            return self._skipped("capture.off")
        try:
            who = self._identity(session_id, cwd)
        except UnknownProject:
            return self._skipped("capture.unknown_project")
        except ProjectMismatch:
            return self._skipped("capture.project_mismatch")
        if seen.dropped_messages:
            self.count("capture.truncated_messages")
        said = list(seen.said)
        if any(item.role == "user" and withholds(item.text) for item in said):
            said = _without_withheld(said)  # "my key is X, keep it out of any notes"
            self.count("capture.withheld")
            if not said:
                return self._skipped("capture.withheld")
        built = self._build(who, seen.turn, said, kind="exchange")
        if isinstance(built, Skip):
            return self._skipped(str(built))
        if not self._admit(built):
            return self._skipped("capture.outbox_unavailable")
        self.count("capture.captured")
        return {"accepted": True, "captured": built.entry.delivery_id, "skipped": None}

    # -- recall -------------------------------------------------------------------------------

    def first_step(
        self, session_id: str, cwd: str, root: bool, params: Mapping[str, object]
    ) -> dict[str, object]:
        """`recall/first-step`: the block to inject for this step, or null and a reason.

        Raises:
            InvalidRequest: `turn` or `step` is not a non-negative integer.
        """
        turn, step = count_of(params.get("turn")), count_of(params.get("step"))
        if turn is None or step is None:
            raise InvalidRequest("recall/first-step needs integer params.turn and params.step")
        if self.runtime.config.recall.mode is RecallMode.OFF:
            return self._no_inject("recall.off")
        try:
            project = self.runtime.config.project_for(cwd)
        except UnknownProject:
            return self._no_inject("recall.unknown_project")
        latest = self.tracker.latest_user(session_id)
        query = latest.text if latest is not None and latest.turn == turn else None
        injection, reason = self.recall.first_step(
            session_id=session_id, project_id=project, root=root, turn=turn, step=step,
            query=query, experiments=self._experiments(project),
        )  # fmt: skip
        if injection is None:
            return {"inject": None, "reason": reason}
        return {"inject": injection.to_dict(), "reason": None}

    def recall_tool(self, cwd: str, args: wire_memory.RecallArgs) -> results.RecallResult:
        """`memory_recall`: a bounded answer from the person's context and project memory."""
        project = self.runtime.config.project_for(cwd)
        try:
            context, hits = self.recall.reads(project, args.question)
        except RecallFailed as exc:
            return results.RecallResult(status="unavailable", reason=exc.reason)
        recalled = self.recall.bound_items(context, hits)
        replaced = superseded_ids(hits)
        limit = self.runtime.config.recall.max_item_chars
        items = [_item(hit, limit, hit.message_id in replaced) for hit in hits]
        answer = self._dialectic(args.question) if self.runtime.config.recall.dialectic else None
        return results.RecallResult(
            status="ok",
            global_context=list(recalled.global_items),
            project=[item for item in items if item.text],
            answer=answer,
        )

    # -- explicit notes -----------------------------------------------------------------------

    def note(
        self,
        session_id: str,
        cwd: str,
        root: bool,
        content: str,
        *,
        kind: str,
        extra: dict[str, str],
    ) -> results.NoteResult:
        """`memory_record` (`kind` note) and `memory_correct` (`kind` correction).

        Raises:
            ConsentRefused: a child agent called, or `content` is not a plain statement of the
                person's latest message of this session.
            ProjectMismatch: `cwd` is in another project than where the session started.
            UnknownProject: the caller's directory is in no configured project.
        """
        if not root:
            self.count("memory.consent_refused.child")
            raise ConsentRefused("only the root agent may record memory, not a child agent")
        latest = self._consented(session_id, content)
        try:
            who = self._identity(session_id, cwd)
        except ProjectMismatch:
            self.count("memory.consent_refused.project_mismatch")
            raise
        said = [Said("user", latest.seq, content)]
        built = self._build(who, latest.turn or 0, said, kind=kind, extra=extra)
        if isinstance(built, Skip):
            return results.NoteResult(recorded=False, reason=str(built))
        if not self._admit(built):
            return results.NoteResult(recorded=False, reason="capture.outbox_unavailable")
        self.count(f"memory.{kind}")
        return results.NoteResult(recorded=True, delivery_id=built.entry.delivery_id, queued=True)

    def _consented(self, session_id: str, content: str) -> UserMessage:
        """The person's latest message, in which `content` is their own plain statement.

        Raises:
            ConsentRefused: it is not (the message says why).
        """
        latest = self.tracker.latest_user(session_id)
        refusal = Refusal.UNGROUNDED if latest is None else consent(content, latest.text)
        if refusal is not None or latest is None:
            refusal = refusal or Refusal.UNGROUNDED
            self.count(f"memory.consent_refused.{refusal}")
            raise ConsentRefused(_REFUSALS[refusal])
        return latest

    def search(self, cwd: str, query: str, limit: int) -> list[results.RecalledItem]:
        """Project-scoped conversational hits for `memory_search` (empty on any failure)."""
        project = self.runtime.config.project_for(cwd)
        outbound = outbound_query(query, self.runtime.config.recall.max_query_chars)
        if outbound is None:
            return []
        deadline = time.monotonic() + self.runtime.config.honcho.search_timeout_s
        searches = submit_searches(self.pool, self.service, project, outbound, limit)
        try:
            hits = fuse(outbound, answered(searches, deadline, time.monotonic))[:limit]
        except (FutureTimeout, ArtifactError):
            self.count("memory_search.conversation_unavailable")
            return []
        limit_chars = self.runtime.config.recall.max_item_chars
        replaced = superseded_ids(hits)
        items = (_item(h, limit_chars, h.message_id in replaced) for h in hits)
        return [item for item in items if item.text]

    def metrics(self) -> dict[str, int]:
        """Content-free counts: capture outcomes, recall, consent."""
        with self._lock:
            mine = Counter(self.counters)
        return dict(sorted((mine + self.recall.metrics()).items()))

    def count(self, event: str) -> None:
        """Count a content-free event."""
        with self._lock:
            self.counters[event] += 1

    # -- internals ----------------------------------------------------------------------------

    def _identity(self, session_id: str, cwd: str) -> Identity:
        """Who records: the project of `cwd`, which must be the one where the session started.

        Raises:
            UnknownProject: `cwd` (or the session's first directory) is in no project.
            ProjectMismatch: the session started in another project.
        """
        honcho = self.runtime.config.honcho
        project = self.runtime.config.project_for(cwd)
        started = self.tracker.started_in(session_id)
        if (
            started is not None
            and started != cwd
            and self.runtime.config.project_for(started) != project
        ):
            raise ProjectMismatch(
                "this session started in another project; its memory stays there (call from "
                "the session's own project directory)"
            )
        return Identity(
            workspace_id=honcho.workspace_id,
            user_peer_id=honcho.user_peer_id,
            assistant_peer_id=honcho.assistant_peer_id,
            project_id=project,
            dsh_session_id=session_id,
        )

    def _build(
        self,
        who: Identity,
        turn: int,
        said: list[Said],
        *,
        kind: str,
        extra: dict[str, str] | None = None,
    ) -> Built | Skip:
        assert self.runtime.outbox is not None
        built = build_entry(
            who, turn, said, kind=kind, limits=self.runtime.config.capture, now=self.clock(),
            seq=self.runtime.outbox.next_seq(), extra=extra, redactions=self._redactions,
        )  # fmt: skip
        if isinstance(built, Skip):
            self.count(str(built))
        else:
            if built.redactions:
                self.count("capture.redacted")
            if built.truncated:
                self.count("capture.truncated")
        return built

    def _admit(self, built: Built) -> bool:
        assert self.runtime.outbox is not None
        try:
            self.runtime.outbox.admit(built.entry)
        except OutboxError:
            return False
        self.on_admitted()
        return True

    def _skipped(self, reason: str) -> dict[str, object]:
        self.count(reason)
        return {"accepted": True, "captured": None, "skipped": reason}

    def _no_inject(self, reason: str) -> dict[str, object]:
        self.count(reason)
        return {"inject": None, "reason": reason}

    def _experiments(self, project: str) -> Callable[[str], list[str]] | None:
        config = self.runtime.config.recall
        if not config.include_experiments:
            return None
        catalog = self.catalogs.get(project)
        if catalog is None:
            return None

        def cards(query: str) -> list[str]:
            lines = []
            for hit in catalog.search(query[: config.max_query_chars], config.max_experiments):
                card = hit.card
                text, _ = item_text(f"{card.experiment_id}: {card.title}", config.max_item_chars)
                lines.append(f"{text} (card, {card.created_at.date().isoformat()})")
            return lines

        return cards

    def _dialectic(self, question: str) -> str | None:
        timeout = self.runtime.config.recall.dialectic_timeout_ms / 1000
        outbound = outbound_query(question, self.runtime.config.recall.max_query_chars)
        if outbound is None:
            return None
        future = self.pool.submit(self.service.dialectic, outbound, timeout)
        try:
            answer = future.result(timeout=timeout)
        except (FutureTimeout, ArtifactError):
            self.count("memory_recall.dialectic_unavailable")
            return None
        text, _ = item_text(answer, self.runtime.config.recall.max_item_chars * 2)
        return text or None


_REFUSALS = {
    Refusal.UNGROUNDED: "memory records only what the user said: the content must be whole "
    "sentences or clauses of the user's latest message of this session (quote it)",
    Refusal.WITHHELD: "the user asked not to keep this: nothing after their refusal (or what it "
    "points back to) is recorded",
    Refusal.QUESTION: "that is a question in the user's message, not a statement to record",
    Refusal.REPORTED: "that is quoted or reported speech in the user's message, not the user's "
    "own statement",
    Refusal.DENIED: "the user's message denies that, or says it only as a joke or a hypothesis",
}


def _item(hit: MemoryHit, limit: int, superseded: bool = False) -> results.RecalledItem:
    text, _ = item_text(hit.content, limit)
    return results.RecalledItem(
        text=text, kind=hit.kind, role=hit.role, note_kind=hit.note_kind,
        supersedes=hit.supersedes, superseded=superseded, date=hit.created_at[:10] or None,
        message_id=hit.message_id,
    )  # fmt: skip


def _without_withheld(said: list[Said]) -> list[Said]:
    """The person's messages without what they withheld; no answer (it may repeat it)."""
    kept = [Said(s.role, s.seq, kept_clauses(s.text)) for s in said if s.role == "user"]
    return [s for s in kept if s.text]
