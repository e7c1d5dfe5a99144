"""The Honcho adapter: the real SDK over the HTTP fake; errors translated; content never leaks."""

from __future__ import annotations

import httpx
import pytest
from honcho_helpers import BASE, KEY, settings
from outbox_helpers import make_entry

from cards import RemoteMisconfigured, RemoteRejected, RemoteUnauthorized, RemoteUnavailable
from cards._ids import artifact_id_for_bytes
from indexer import HonchoMemoryService, SessionTarget, cards_session_id

CARDS = SessionTarget(session_id=cards_session_id("trial-analysis"), kind="cards")


def test_delivery_creates_messages_with_metadata(fake, service):
    entry = make_entry(1, parts=2)
    service.deliver(entry.target, entry.messages)
    stored = fake.messages("ws", entry.target.session_id)
    assert [m.content for m in stored] == [m.content for m in entry.messages]
    assert stored[0].metadata["delivery_id"] == entry.delivery_id
    assert stored[0].peer_id == "artmem-assistant"


def test_the_cards_session_has_no_derivation_and_an_unobserved_assistant(fake, service):
    entry = make_entry(1)
    service.deliver(CARDS, entry.messages)
    session = fake.sessions("ws")[CARDS.session_id]
    assert session.configuration["reasoning"] == {"enabled": False}
    assert session.configuration["summary"] == {"enabled": False}
    assert fake.peers("ws")["artmem-assistant"].configuration.get("observe_me") is False
    # set up once per process: a second delivery is one request
    fake.clear_requests()
    service.deliver(CARDS, make_entry(2).messages)
    assert [r.kind for r in fake.requests] == ["message_create"]


def test_delivered_lists_by_delivery_id_across_pages(fake, service):
    target = SessionTarget(session_id="sess-a", kind="conversation")
    for n in range(3):
        service.deliver(target, make_entry(n, session="sess-a", parts=60).messages)
    wanted = make_entry(1, session="sess-a", parts=60)
    service.deliver(target, wanted.messages)  # a duplicate: 120 messages carry this id now
    found = service.delivered(target, wanted.delivery_id)
    assert len(found) == 120 and all(md["delivery_id"] == wanted.delivery_id for md in found)
    assert service.delivered(target, "0" * 64) == []


def test_bad_key_is_unauthorized(fake):
    svc = HonchoMemoryService(settings(), "wrong-key", fake.transport())
    with pytest.raises(RemoteUnauthorized):
        svc.deliver(CARDS, make_entry(1).messages)


def test_rejection_is_permanent_and_content_free(fake, service):
    secret = "the-hostile-card-text-" * 3
    entry = make_entry(1)
    long = entry.messages[0].model_copy(update={"content": secret})
    fake.fail_next(1, status=422, kind="message_create")
    with pytest.raises(RemoteRejected) as info:
        service.deliver(CARDS, [long])
    assert secret not in str(info.value) and secret not in info.value.message


@pytest.mark.parametrize(
    "inject",
    [
        lambda f: f.fail_next(1, status=503, kind="message_create"),
        lambda f: f.fail_next(1, status=429, kind="message_create"),
        lambda f: f.timeout_next(1, kind="message_create"),
        lambda f: f.commit_then_fail_next(1, status="disconnect", kind="message_create"),
        lambda f: setattr(f, "down", True),
    ],
)
def test_transient_failures_are_retryable(fake, service, inject):
    inject(fake)
    with pytest.raises(RemoteUnavailable) as info:
        service.deliver(CARDS, make_entry(1).messages)
    assert info.value.retryable


def test_more_than_100_messages_are_refused_before_sending(fake, service):
    entry = make_entry(1)
    with pytest.raises(RemoteRejected):
        service.deliver(CARDS, list(entry.messages) * 101)
    assert fake.requests == []


def test_missing_workspace_is_not_created_unless_allowed(fake):
    svc = HonchoMemoryService(settings(create_workspace=False), KEY, fake.transport())
    with pytest.raises(RemoteMisconfigured):
        svc.deliver(CARDS, make_entry(1).messages)
    assert fake.workspaces() == []
    with httpx.Client(transport=fake.transport(), base_url=BASE) as client:
        client.post("/v3/workspaces", json={"id": "ws"}, headers={"Authorization": f"Bearer {KEY}"})
    svc2 = HonchoMemoryService(settings(create_workspace=False), KEY, fake.transport())
    svc2.deliver(CARDS, make_entry(1).messages)
    assert len(fake.messages("ws")) == 1


def test_invalid_configured_ids_are_refused():
    with pytest.raises(RemoteRejected):
        HonchoMemoryService(settings(workspace_id="bad id"), KEY)


def _card_message(project: str, experiment: str, content: str, **extra):
    from indexer import OutboundMessage, message_fingerprint

    metadata = {
        "source": "artmem",
        "kind": "experiment-card",
        "project_id": project,
        "experiment_id": experiment,
        "artifact_id": artifact_id_for_bytes(content.encode()),
        "delivery_id": "a" * 64,
        **extra,
    }
    fp = message_fingerprint("artmem-assistant", content, metadata)
    return OutboundMessage(
        peer_id="artmem-assistant", content=content, metadata=metadata, fingerprint=fp
    )


def test_card_search_keeps_only_this_projects_valid_cards(fake, service):
    mine = "exp_" + "a" * 52
    theirs = "exp_" + "b" * 52
    service.deliver(CARDS, [_card_message("trial-analysis", mine, "cohort response table")])
    # a hostile or buggy server returns foreign and malformed cards in this session
    service.deliver(CARDS, [_card_message("other-project", theirs, "cohort response leak")])
    service.deliver(CARDS, [_card_message("trial-analysis", "exp_bad", "cohort response bad")])
    result = service.search_cards("trial-analysis", "cohort response", limit=10)
    assert [h.experiment_id for h in result.hits] == [mine]
    # the foreign card is filtered server-side; the malformed one is dropped and counted here
    assert result.dropped == 1
    request = fake.requests[-1]
    assert request.body["filters"] == {
        "metadata": {"kind": "experiment-card", "project_id": "trial-analysis"}
    }


def test_api_key_never_appears_in_repr(fake):
    svc = HonchoMemoryService(settings(), KEY, fake.transport())
    assert KEY not in repr(svc)


def test_a_long_lived_service_keeps_a_bounded_number_of_sessions(fake, service, monkeypatch):
    monkeypatch.setattr("indexer.honcho_adapter.MAX_SESSIONS", 2)
    targets = [SessionTarget(session_id=f"sess-{n}", kind="conversation") for n in range(3)]
    for n, target in enumerate(targets):
        service.deliver(target, make_entry(n, session=target.session_id).messages)
    assert len(service._sessions) == 2  # the oldest set-up was dropped
    fake.clear_requests()
    service.deliver(targets[0], make_entry(9, session="sess-0").messages)  # set up again
    kinds = [r.kind for r in fake.requests]
    assert kinds[-1] == "message_create" and len(kinds) > 1
    assert len(fake.messages("ws", "sess-0")) == 2
