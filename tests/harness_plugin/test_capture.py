"""Capture (Honcho spec §11): exactly one exchange per completed root turn reaches Honcho."""

from __future__ import annotations

import pytest
from conversation_helpers import (
    ASSISTANT_TEXT,
    TOOL_ARGUMENTS,
    USER_TEXT,
    Conversation,
    renumbered,
    sample_events,
    turn_events,
)
from hypothesis import given
from hypothesis import strategies as st

from cards import ConfigError, honcho_session_id
from harness_plugin.config import config_from_mapping
from harness_plugin.memory._capture import EventTracker, Outcome, text_of


@pytest.fixture
def conv(tmp_path):
    conversation = Conversation(tmp_path)
    yield conversation
    conversation.host.close()


def test_the_recorded_turn_is_one_exchange_with_exact_metadata(conv):
    replies = conv.feed(sample_events())
    captured = [r["captured"] for r in replies if r["captured"]]
    assert len(captured) == 1 and all(r["accepted"] for r in replies)
    assert conv.fake.requests == []  # admission is local: nothing waited on the network
    conv.deliver()
    user, assistant = conv.messages()
    assert (user.content, assistant.content) == (USER_TEXT, ASSISTANT_TEXT)
    assert (user.peer_id, assistant.peer_id) == ("user", "artmem-assistant")
    session = honcho_session_id("main-session-1")
    assert user.session_id == session and assistant.session_id == session
    expected = {
        "source": "artmem", "layer": "conversation", "kind": "exchange", "schema_version": 1,
        "delivery_id": captured[0], "dsh_session_id": "main-session-1", "dsh_event_seq": 4,
        "dsh_turn": 1, "dsh_agent_kind": "root", "project_id": "trial-analysis",
        "user_peer_id": "user", "role": "user", "plugin_version": "0.1.0",
    }  # fmt: skip
    metadata = dict(user.metadata)
    assert metadata.pop("captured_at") and metadata.pop("message_fingerprint")
    assert metadata == expected
    assert assistant.metadata["dsh_event_seq"] == 24 and assistant.metadata["role"] == "assistant"
    (stored,) = conv.fake.sessions("artmem-dev").values()
    assert stored.metadata == {"source": "artmem", "dsh_session_id": "main-session-1"}
    assert stored.peers["user"]["observe_me"] is True
    assert stored.peers["artmem-assistant"]["observe_me"] is False  # observation off by default
    sent = b"".join(r.raw_body for r in conv.fake.requests)
    assert TOOL_ARGUMENTS.encode() not in sent and b"tool-result" not in sent


def test_messages_are_redacted_as_they_arrive_not_when_the_turn_ends(conv, monkeypatch):
    """The turn's end waits for a durable write; it should not wait for redaction too."""
    import cards.redaction
    import harness_plugin.memory._conversation as conversation

    calls: list[str] = []

    def counting(text, **kwargs):
        calls.append(text)
        return cards.redaction.redact(text, **kwargs)

    monkeypatch.setattr(conversation, "redact", counting)
    events = turn_events(1, "the key is " + "sk-live-" + "0123456789abcdef", "noted, and redacted")
    *before_end, end = events
    conv.feed(before_end)
    assert len(calls) == 2  # the user's message and the answer, on arrival
    (reply,) = conv.feed([end])
    assert reply["captured"] and len(calls) == 2  # nothing redacted again at the end
    conv.deliver()
    user, _ = conv.messages()
    assert "sk-live" not in user.content and "[redacted:" in user.content


@pytest.mark.parametrize("end", ["error", "aborted", "cancelled", "max-steps"])
def test_a_turn_that_did_not_complete_is_not_captured(conv, end):
    replies = conv.feed(turn_events(1, "keep this private", "partial", end=end))
    assert replies[-1] == {
        "accepted": True,
        "captured": None,
        "skipped": "capture.turn_not_completed",
    }
    assert list(conv.outbox_bytes()) == []


def test_a_child_session_never_captures(conv):
    replies = conv.feed(sample_events(), session="child-session-1", root=False)
    assert all(r["captured"] is None for r in replies)
    assert {r["skipped"] for r in replies} == {"capture.child_session"}
    assert list(conv.outbox_bytes()) == []


def test_plugin_and_tool_messages_are_excluded(conv):
    events = turn_events(1, "what did we decide about cohorts?", "We kept three cohorts.")
    injected = {"type": "user/message", "seq": 0, "data": {
        "content": [{"type": "text", "text": "[Honcho memory — untrusted recalled context] old"}],
        "source": {"kind": "plugin", "plugin": "artmem"}, "role": "user"}}  # fmt: skip
    tool_result = {"type": "user/message", "seq": 0, "data": {
        "content": [{"type": "text", "text": "TOOL OUTPUT 42"}],
        "source": {"kind": "tool", "callId": "c1"}, "role": "user"}}  # fmt: skip
    events[3:3] = [injected, tool_result]  # after the person's message, inside the turn
    conv.feed(renumbered(events, 0))
    conv.deliver()
    contents = [m.content for m in conv.messages()]
    assert contents == ["what did we decide about cohorts?", "We kept three cohorts."]


def test_only_text_parts_are_read_and_unknown_objects_never_stringified(conv):
    parts = [
        {"type": "image", "data": "iVBORw0KGgo=", "mediaType": "image/png"},
        {"type": "text", "text": "see the plot"},
        {"type": "file", "name": "secret.csv"},
        {"type": "text", "text": {"not": "a string"}},
    ]
    conv.feed(turn_events(1, parts, "It shows a rise."))
    conv.deliver()
    assert [m.content for m in conv.messages()] == ["see the plot", "It shows a rise."]
    sent = b"".join(r.raw_body for r in conv.fake.requests)
    assert b"iVBORw0KGgo" not in sent and b"secret.csv" not in sent and b"not" not in sent


def test_an_image_only_message_and_a_tool_only_answer_capture_nothing(conv):
    image = [{"type": "image", "data": "AAAA"}]
    replies = conv.feed(turn_events(1, image, None))
    assert replies[-1]["skipped"] == "capture.no_user_message"


def test_secrets_are_redacted_before_anything_is_written(conv):
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    conv.feed(turn_events(1, f"use token {token} for the API", f"Done with {token}."))
    written = b"".join(conv.outbox_bytes())
    assert written and token.encode() not in written and token[:12].encode() not in written
    conv.deliver()
    sent = b"".join(r.raw_body for r in conv.fake.requests)
    assert token[:12].encode() not in sent


def test_a_turn_of_only_secrets_is_skipped_as_empty(conv):
    key = "AKIA" + "QWERTYUIOPASDFGH"
    replies = conv.feed(turn_events(1, key, key))
    assert replies[-1]["skipped"] == "capture.empty_after_redaction"


def test_huge_messages_are_truncated_deterministically_or_skipped(tmp_path):
    huge = "word " * 20_000  # 100,000 characters
    truncating = Conversation(tmp_path / "t", capture={"mode": "completed-root-turns",
                                                        "max_message_chars": 1000})  # fmt: skip
    first = truncating.feed(turn_events(1, huge, "ok"))[-1]["captured"]
    truncating.deliver()
    (user, _) = truncating.messages()
    assert len(user.content) <= 1000
    again = Conversation(tmp_path / "t2", capture={"mode": "completed-root-turns",
                                                    "max_message_chars": 1000})  # fmt: skip
    assert again.feed(turn_events(1, huge, "ok"))[-1]["captured"] == first  # deterministic
    skipping = Conversation(tmp_path / "s", capture={"mode": "completed-root-turns",
                                                      "oversize": "skip"})  # fmt: skip
    assert skipping.feed(turn_events(1, huge, "ok"))[-1]["skipped"] == "capture.too_long"
    for c in (truncating, again, skipping):
        c.host.close()


def test_a_turn_already_in_flight_at_restart_is_skipped_whole(conv):
    events = sample_events()
    replies = conv.feed(events[5:])  # a new process sees the turn from its middle
    assert replies[-1]["skipped"] == "capture.incomplete_turn"
    assert list(conv.outbox_bytes()) == []


def test_replayed_events_are_one_delivery(conv):
    first = [r["captured"] for r in conv.feed(sample_events()) if r["captured"]]
    replay = conv.feed(sample_events())
    assert {r["skipped"] for r in replay} == {"capture.replayed"}
    restarted = conv.new_host()  # and a new process fed the same turn again
    assert restarted.memory is not None
    cwd = conv.cwd()
    again = [restarted.memory.append("main-session-1", cwd, True, e) for e in sample_events()]
    assert [r["captured"] for r in again if r["captured"]] == first
    restarted.close()
    conv.deliver()
    assert len(conv.messages()) == 2


def test_an_ambiguous_remote_outcome_leaves_one_copy(conv):
    conv.feed(sample_events())
    conv.fake.commit_then_fail_next(kind="message_create")
    conv.deliver()  # the server stored it, the worker saw a failure
    conv.deliver()  # the retry finds the delivery id there and sends nothing
    assert len(conv.messages()) == 2


def test_sessions_do_not_share_buffers(conv):
    a = turn_events(1, "alpha question", None)[:-1]  # session A's turn is still open
    conv.feed(a, session="sess-a")
    b = turn_events(1, "beta question", "beta answer")
    conv.feed(b, session="sess-b")
    end = {"type": "turn/end", "seq": 99, "data": {"turn": 1, "reason": {"kind": "completed"}}}
    conv.feed([end], session="sess-a")
    conv.deliver()
    contents = {m.session_id: m.content for m in conv.messages() if m.metadata["role"] == "user"}
    assert contents == {honcho_session_id("sess-b"): "beta question"}  # A had no answer


def test_capture_off_keeps_nothing(tmp_path):
    off = Conversation(tmp_path, capture={"mode": "off"})
    assert off.feed(sample_events())[-1]["skipped"] == "capture.off"
    assert list(off.outbox_bytes()) == []
    off.host.close()


def test_capture_and_recall_need_honcho_and_strict_values(tmp_path):
    base = {
        "artifact_root": str(tmp_path / "a"), "rlm_root": str(tmp_path / "r"),
        "state_root": str(tmp_path / "s"),
        "projects": [{"id": "p", "root": str(tmp_path / "w")}],
    }  # fmt: skip
    for section in ({"capture": {"mode": "completed-root-turns"}},
                    {"recall": {"mode": "first-root-step"}}):  # fmt: skip
        with pytest.raises(ConfigError, match="needs Honcho"):
            config_from_mapping(base | section)
    for bad in ({"mode": "everything"}, {"max_message_chars": "100"}, {"unknown": 1}):
        with pytest.raises(ConfigError):
            config_from_mapping(base | {"capture": bad})


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_text_of_reads_only_text_parts(content):  # fmt: skip
    text = text_of(content)
    expected = [] if not isinstance(content, list) else [
        p["text"] for p in content
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        and p["text"]
    ]  # fmt: skip
    assert text == "\n".join(expected)


@given(
    st.lists(
        st.sampled_from(
            [
                "turn/start",
                "user/message",
                "assistant/message",
                "turn/end",
                "tool/call",
                "assistant/chunk",
            ]
        ),
        max_size=30,
    ),
    st.lists(st.sampled_from(["completed", "error"]), min_size=30, max_size=30),
)
def test_an_exchange_only_ever_comes_from_a_whole_completed_turn(kinds, reasons):  # fmt: skip
    tracker = EventTracker(max_sessions=4, max_turn_messages=3)
    started = None
    for seq, kind in enumerate(kinds):
        data: dict = {"turn": 1}
        if kind == "user/message":
            data = {"content": [{"type": "text", "text": f"u{seq}"}], "source": {"kind": "user"}}
        elif kind == "assistant/message":
            data = {"turn": 1, "message": {"content": [{"type": "text", "text": f"a{seq}"}],
                                           "source": {"kind": "model"}}}  # fmt: skip
        elif kind == "turn/end":
            data = {"turn": 1, "reason": {"kind": reasons[seq]}}
        seen = tracker.append("s", root=True, event={"type": kind, "seq": seq, "data": data})
        if kind == "turn/start":
            started = seq
        if seen.outcome is Outcome.EXCHANGE:
            assert started is not None and reasons[seq] == "completed"
            assert seen.said[-1].role == "assistant"
            assert all(started < s.seq < seq for s in seen.said)
            assert 1 <= len([s for s in seen.said if s.role == "user"]) <= 3
        if kind == "turn/end":
            started = None
