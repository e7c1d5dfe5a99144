"""Every Honcho call the adapter makes, on the HTTP fake and (``-m live``) on both real instances.

The same assertions run on each: a cards session set up with reasoning and summaries off, card
messages with their metadata, the duplicate defence's lookup by delivery id, scoped card and
memory searches (a foreign project's or person's message never comes back), the person's context,
and a workspace that must exist. Each live run owns a fresh workspace and deletes it as the
evaluation does (sessions first).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import httpx
import pytest
from honcho_helpers import KEY, settings

from cards import RemoteMisconfigured
from cards._ids import artifact_id_for_bytes, honcho_session_id
from indexer import (
    HonchoMemoryService,
    OutboundMessage,
    SessionTarget,
    cards_session_id,
    message_fingerprint,
)
from indexer.testing import FakeHoncho, delete_workspace

LIVE = {"live": "HONCHO_BASE_URL", "live-semantic": "HONCHO_EMBED_BASE_URL"}
PROJECT = "trial-analysis"


@pytest.fixture(
    params=[
        "fake-http",
        pytest.param("live", marks=pytest.mark.live),
        pytest.param("live-semantic", marks=pytest.mark.live),
    ]
)
def server(request) -> Iterator[tuple[str, str]]:
    """(base URL, a fresh workspace id)."""
    workspace = f"artmem-adapter-{uuid.uuid4().hex[:12]}"
    if request.param == "fake-http":
        with FakeHoncho(api_key=KEY).serve() as base_url:
            yield base_url, workspace
        return
    base_url = os.environ.get(LIVE[request.param])
    if not base_url:
        pytest.skip(f"set {LIVE[request.param]} (tools/honcho-env.sh)")
    try:
        yield base_url, workspace
    finally:
        with httpx.Client(base_url=base_url, timeout=20) as admin:
            assert delete_workspace(admin, workspace) == []


@contextlib.contextmanager
def _service(server, **overrides) -> Iterator[HonchoMemoryService]:
    base_url, workspace = server
    service = HonchoMemoryService(
        settings(base_url=base_url, workspace_id=workspace, **overrides), KEY
    )
    try:
        yield service
    finally:
        service.close()


def _message(content: str, metadata: dict[str, object], peer: str = "artmem-assistant"):
    fingerprint = message_fingerprint(peer, content, metadata)
    return OutboundMessage(
        peer_id=peer, content=content, metadata=metadata, fingerprint=fingerprint
    )


def _card(project: str, experiment: str, content: str, delivery: str):
    return _message(content, {
        "source": "artmem", "kind": "experiment-card", "project_id": project,
        "experiment_id": experiment, "artifact_id": artifact_id_for_bytes(content.encode()),
        "query_fingerprint": "f" * 64, "source_version": "v1", "delivery_id": delivery,
        "projection_revision": 1, "schema_version": 1,
    })  # fmt: skip


def test_cards_are_delivered_found_by_delivery_id_and_searched_in_their_project(server):
    mine, theirs = "exp_" + "a" * 52, "exp_" + "b" * 52
    cards = SessionTarget(session_id=cards_session_id(PROJECT), kind="cards")
    foreign = SessionTarget(session_id=cards_session_id("other-project"), kind="cards")
    with _service(server) as service:
        service.deliver(cards, [_card(PROJECT, mine, "Cohort response table", "1" * 64)])
        service.deliver(foreign, [_card("other-project", theirs, "Cohort response leak", "2" * 64)])
        (found,) = service.delivered(cards, "1" * 64)
        assert found["experiment_id"] == mine and found["projection_revision"] == 1
        assert service.delivered(cards, "3" * 64) == []
        hits = service.search_cards(PROJECT, "cohort response", limit=10)
        assert [h.experiment_id for h in hits.hits] == [mine]
        assert hits.dropped == 0  # the foreign card never came back: the filter is the server's


def test_conversation_is_searched_for_this_project_and_person_only(server):
    scope = {"source": "artmem", "layer": "conversation", "kind": "note", "role": "user"}
    target = SessionTarget(
        session_id=honcho_session_id("s-1"), kind="conversation", dsh_session_id="s-1"
    )
    with _service(server) as service:
        said = "our lab reports every assay result in millimolar units"
        service.deliver(target, [
            _message(said, {**scope, "project_id": PROJECT, "user_peer_id": "alice",
                            "delivery_id": "4" * 64}, peer="alice"),
            _message(said, {**scope, "project_id": "other-project", "user_peer_id": "alice",
                            "delivery_id": "5" * 64}, peer="alice"),
            _message(said, {**scope, "project_id": PROJECT, "user_peer_id": "bob",
                            "delivery_id": "6" * 64}, peer="bob"),
        ])  # fmt: skip
        found = service.search_memory(PROJECT, "assay units", limit=10)
        assert [(h.content, h.kind, h.role) for h in found.hits] == [(said, "note", "user")]
        assert found.dropped == 0
        context = service.user_context()  # no deriver here: empty, but the call and shape hold
        assert isinstance(context.representation, str) and isinstance(context.peer_card, list)


def test_a_missing_workspace_is_refused_unless_it_may_be_created(server):
    target = SessionTarget(session_id=cards_session_id(PROJECT), kind="cards")
    with _service(server, create_workspace=False) as service:
        with pytest.raises(RemoteMisconfigured):
            service.deliver(target, [_card(PROJECT, "exp_" + "c" * 52, "x", "7" * 64)])
