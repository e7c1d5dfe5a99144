"""Reading DSH session events (Honcho spec §11.1): one exchange per completed root turn, no more.

A turn's exchange is its committed `user/message` events whose source is the person
(`data.source.kind == "user"`), in order, and the turn's final textual `assistant/message` (its
`text` parts only). Everything else is left out by construction: system and developer prompts
and `request/*` (not messages), plugin-injected messages (our own recall among them: source
`plugin`), tool calls and results (`tool-call` parts, `tool/*` events, source `tool`), images and
attachments (not `text` parts), `assistant/chunk` partials, reasoning and compaction events. Text
comes only from canonical content parts; an unknown object is never stringified.

A turn is captured only when its `turn/end` says `completed` and this process saw the turn from
its `turn/start`: a turn in flight when the worker restarted is skipped whole (its first events
went to the previous process), never captured in part. Buffers are per exact session id and
bounded (sessions, messages per turn, characters per message); a child session never captures.
The person's latest message per session is kept for consent (`memory_record`) and recall. DSH
commits step 1's `user/message` only after the `agent/pre-step` hook has run, so for recall the
turn's words are taken earlier from the inbox: the `agent/inbox/spliced` event targeting the
next turn with messages from the person, which precedes `turn/start`; that turn's `user/message`
replaces it when it arrives.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from harness_plugin.memory._conversation import Said

MAX_KEPT_CHARS = 100_000  # per message, before the configured bound (which is lower)


class Outcome(enum.StrEnum):
    """What one event did (content-free; counted in status)."""

    BUFFERED = "capture.buffered"
    IGNORED = "capture.ignored"  # an event capture does not use
    EXCLUDED_SOURCE = "capture.excluded_source"  # a message not from the person (plugin, tool)
    CHILD = "capture.child_session"
    REPLAYED = "capture.replayed"  # a sequence number already seen
    INVALID = "capture.invalid_event"
    NOT_COMPLETED = "capture.turn_not_completed"  # error, abort, cancellation
    INCOMPLETE = "capture.incomplete_turn"  # started before this process saw it
    NO_USER_MESSAGE = "capture.no_user_message"
    NO_ASSISTANT_TEXT = "capture.no_assistant_text"
    EXCHANGE = "capture.exchange"  # a completed turn: an exchange to admit


@dataclass(frozen=True, slots=True)
class UserMessage:
    """The person's latest committed message in a session (raw text, bounded)."""

    turn: int | None
    seq: int
    text: str


@dataclass
class _Turn:
    number: int
    user: list[Said] = field(default_factory=list)
    assistant: Said | None = None
    dropped_messages: int = 0


@dataclass
class _Session:
    cwd: str  # where this process first saw the session: its records stay in that project
    last_seq: int = -1
    turn: _Turn | None = None
    latest_user: UserMessage | None = None
    spliced: tuple[int, str] | None = None  # the person's words waiting for the next turn


@dataclass(frozen=True, slots=True)
class Seen:
    """The outcome of one event: the message buffered, or the exchange when a turn completed."""

    outcome: Outcome
    turn: int | None = None
    said: tuple[Said, ...] = ()
    dropped_messages: int = 0


@dataclass
class EventTracker:
    """Per-session turn buffers fed by `events/append` (not thread-safe: one reader thread)."""

    max_sessions: int = 256
    max_turn_messages: int = 20
    max_message_chars: int = MAX_KEPT_CHARS  # kept per message: one more than the bound shows
    _sessions: OrderedDict[str, _Session] = field(default_factory=OrderedDict, init=False)

    def append(
        self, session_id: str, *, root: bool, event: Mapping[str, object], cwd: str = ""
    ) -> Seen:
        """Take one DSH event of `session_id` (`root` and `cwd` from the host's caller)."""
        kind, seq, data = event.get("type"), count_of(event.get("seq")), event.get("data")
        if not isinstance(kind, str) or seq is None or not isinstance(data, Mapping):
            return Seen(Outcome.INVALID)
        if not root:
            return Seen(Outcome.CHILD)
        session = self._session(session_id, cwd)
        if seq <= session.last_seq:
            return Seen(Outcome.REPLAYED)
        session.last_seq = seq
        if kind == "agent/inbox/spliced":
            return self._spliced(session, seq, data)
        if kind == "turn/start":
            number = count_of(data.get("turn"))
            session.turn = _Turn(number) if number is not None else None
            if number is not None and session.spliced is not None:
                spliced_seq, text = session.spliced
                session.latest_user = UserMessage(number, spliced_seq, text)
            session.spliced = None
            return Seen(Outcome.BUFFERED)
        if kind == "user/message":
            return self._user(session, seq, data)
        if kind == "assistant/message":
            return self._assistant(session, seq, data)
        if kind == "turn/end":
            return self._end(session, data)
        return Seen(Outcome.IGNORED)

    def latest_user(self, session_id: str) -> UserMessage | None:
        """The person's latest committed message in `session_id`, if this process saw one."""
        session = self._sessions.get(session_id)
        return session.latest_user if session is not None else None

    def started_in(self, session_id: str) -> str | None:
        """The working directory of the first event this process saw of `session_id`."""
        session = self._sessions.get(session_id)
        return session.cwd if session is not None else None

    def _session(self, session_id: str, cwd: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session(cwd)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)  # its turn in flight is lost: never partial
        else:
            self._sessions.move_to_end(session_id)
        return session

    def _spliced(self, session: _Session, seq: int, data: Mapping[str, object]) -> Seen:
        """The person's queued words for the next turn (recall's query, never captured)."""
        inserted = data.get("inserted")
        if data.get("target") != "next-turn" or not isinstance(inserted, list) or not inserted:
            return Seen(Outcome.IGNORED)  # e.g. the turn claiming its inbox: nothing inserted
        texts = [
            text_of(message.get("content"))
            for message in inserted
            if isinstance(message, Mapping) and _source_kind(message.get("source")) == "user"
        ]
        text = "\n".join(t for t in texts if t)
        if text:
            session.spliced = (seq, text)
        return Seen(Outcome.IGNORED)

    def _user(self, session: _Session, seq: int, data: Mapping[str, object]) -> Seen:
        if _source_kind(data.get("source")) != "user":
            return Seen(Outcome.EXCLUDED_SOURCE)
        text = text_of(data.get("content"))[: self.max_message_chars + 1]
        if not text:
            return Seen(Outcome.IGNORED)  # an image or attachment alone
        turn = session.turn
        session.latest_user = UserMessage(turn.number if turn else None, seq, text)
        if turn is not None:
            if len(turn.user) < self.max_turn_messages:
                turn.user.append(Said("user", seq, text))
                return Seen(Outcome.BUFFERED, turn.number, (turn.user[-1],))
            turn.dropped_messages += 1
        return Seen(Outcome.BUFFERED)

    def _assistant(self, session: _Session, seq: int, data: Mapping[str, object]) -> Seen:
        message = data.get("message")
        turn = session.turn
        if not isinstance(message, Mapping) or turn is None or data.get("turn") != turn.number:
            return Seen(Outcome.IGNORED)
        if _source_kind(message.get("source")) != "model":
            return Seen(Outcome.EXCLUDED_SOURCE)
        text = text_of(message.get("content"))[: self.max_message_chars + 1]
        if not text:
            return Seen(Outcome.BUFFERED)
        turn.assistant = Said("assistant", seq, text)  # the last textual one is final
        return Seen(Outcome.BUFFERED, turn.number, (turn.assistant,))

    def _end(self, session: _Session, data: Mapping[str, object]) -> Seen:
        turn, session.turn = session.turn, None
        number = data.get("turn")
        if turn is None or number != turn.number:
            return Seen(Outcome.INCOMPLETE)
        reason = data.get("reason")
        if not isinstance(reason, Mapping) or reason.get("kind") != "completed":
            return Seen(Outcome.NOT_COMPLETED, turn.number)
        if not turn.user:
            return Seen(Outcome.NO_USER_MESSAGE, turn.number)
        if turn.assistant is None:
            return Seen(Outcome.NO_ASSISTANT_TEXT, turn.number)
        said = (*turn.user, turn.assistant)
        return Seen(Outcome.EXCHANGE, turn.number, said, turn.dropped_messages)


def text_of(content: object) -> str:
    """The text of canonical content parts (`{"type": "text", "text": str}`), joined by newlines.

    Any other part (images, files, tool calls and results, reasoning) contributes nothing, and
    nothing that is not a list of parts is read at all.
    """
    if not isinstance(content, list):
        return ""
    texts: list[str] = []
    size = 0
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "text":
            text = part.get("text")
            if isinstance(text, str) and text:
                texts.append(text[: MAX_KEPT_CHARS - size])
                size += len(texts[-1])
                if size >= MAX_KEPT_CHARS:
                    break
    return "\n".join(texts)


def _source_kind(source: object) -> object:
    return source.get("kind") if isinstance(source, Mapping) else None


def count_of(value: object) -> int | None:
    """`value` if it is a non-negative int (not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
