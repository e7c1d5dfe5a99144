"""Recall on either kind of Honcho: the searches it sends, how it fuses them, what it shows.

The scenario of the first real-server trial runs on the fake (lexical and semantic) and, under
``-m live``, on both instances that ``../shared/tools/honcho-env.sh`` starts: a person says
something in one session, and a later session's question finds it.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import httpx
import pytest
from conversation_helpers import Conversation, turn_events
from host_helpers import KEY, caller
from hypothesis import given
from hypothesis import strategies as st

from harness_plugin._status import _search_mode
from harness_plugin.worker._caller import Caller
from indexer import MemoryHit, MemorySearch, fused_order, shaped_queries
from indexer._lexical import MAX_LEXICAL_QUERIES, SPECIAL
from indexer.testing import FakeHoncho, delete_workspace

SAID = "Our lab reports every assay result in millimolar units."
ASKED = "Which units does our lab report assay results in?"
LIVE = {"live": "HONCHO_BASE_URL", "live-semantic": "HONCHO_EMBED_BASE_URL"}


@pytest.fixture(
    params=[
        "lexical",
        "semantic",
        pytest.param("live", marks=pytest.mark.live),
        pytest.param("live-semantic", marks=pytest.mark.live),
    ]
)
def conv(request, tmp_path):
    if request.param not in LIVE:
        fake = FakeHoncho(api_key=KEY, search_mode=request.param)
        conversation = Conversation(tmp_path, fake=fake)
        conversation.search_mode = request.param
        yield conversation
        conversation.host.close()
        return
    base_url = os.environ.get(LIVE[request.param])
    if not base_url:
        pytest.skip(f"set {LIVE[request.param]} (tools/honcho-env.sh)")
    workspace = f"artmem-recall-{uuid.uuid4().hex[:12]}"
    conversation = Conversation(tmp_path, base_url=base_url, honcho={"workspace_id": workspace})
    conversation.search_mode = "semantic" if request.param == "live-semantic" else "lexical"
    try:
        yield conversation
    finally:
        conversation.host.close()
        with httpx.Client(base_url=base_url, timeout=20) as admin:
            assert delete_workspace(admin, workspace) == []


def _record_then_ask(conv, question):
    conv.feed(turn_events(1, f"Please remember this: {SAID}", "Noted."), session="s-one")
    arguments = {"content": SAID, "kind": "fact"}
    who = Caller.model_validate(caller(conv.tmp, session="s-one"))
    assert conv.host.call("memory_record", arguments, who)["recorded"]
    conv.deliver()
    events = turn_events(1, question, None, start_seq=100)[:3]
    conv.feed(events, session="s-two")
    return conv.first_step("s-two", 1)


def test_a_question_finds_what_was_said_in_another_session(conv):
    reply = _record_then_ask(conv, ASKED)
    assert reply["reason"] is None
    assert SAID in reply["inject"]["text"]
    assert _search_mode(conv.config.state_root) in ("lexical", "semantic")


def test_a_question_about_nothing_said_gets_no_block(conv):
    # A server with embeddings returns every message, with no cut-off: recall must not.
    reply = _record_then_ask(conv, "What is the randomisation seed of the bootstrap?")
    assert reply == {"inject": None, "reason": "recall.empty"}


def test_the_search_mode_the_server_offered_is_shown(conv):
    _record_then_ask(conv, ASKED)
    expected = (
        "semantic"
        if "semantic" in conv.fake.search_mode
        or conv.base_url
        and (conv.base_url == os.environ.get("HONCHO_EMBED_BASE_URL"))
        else "lexical"
    )
    assert _search_mode(conv.config.state_root) == expected
    recorded = json.loads(
        (Path(conv.config.state_root) / "recall" / "honcho-search.json").read_text()
    )
    assert recorded["search"] == expected


# -- the pure parts ---------------------------------------------------------------------------


@given(st.text(max_size=300))
def test_shaped_queries_are_bounded_distinct_and_punctuation_free(question):
    queries = shaped_queries(question)
    assert len(queries) == len(set(queries)) <= 1 + MAX_LEXICAL_QUERIES
    if question:
        assert queries[0] == question
    for lexical in queries[1:]:
        assert not SPECIAL.search(lexical) and lexical.strip()


def test_the_question_then_all_its_words_then_the_rarest_alone():
    assert shaped_queries(ASKED) == [
        ASKED, "units lab report assay results", "results", "report", "units",
    ]  # fmt: skip
    assert shaped_queries("genes gene") == ["genes gene", "genes"]  # one stem, one word


def test_fusion_ranks_by_the_question_and_drops_what_shares_no_word():
    answers = [
        [("a", "lunch on friday"), ("b", SAID)],  # a semantic server's fill comes first
        [("b", SAID), ("c", "units of the assay plates")],
    ]
    assert fused_order(ASKED, answers) == ["b", "c"]


def _hit(message_id, content):
    return MemoryHit("note", "user", content, message_id, "dsh_x", "2026-12-01T00:00:00+00:00")


def test_fuse_dedupes_by_message_and_by_text():
    from harness_plugin.memory._recall_search import fuse

    same = [_hit("m1", SAID), _hit("m2", SAID), _hit("m3", "assay units differ by site")]
    answers = [("q1", MemorySearch(same)), ("q2", MemorySearch([_hit("m1", SAID)]))]
    assert [h.message_id for h in fuse(ASKED, answers)] == ["m1", "m3"]
