"""Card index states: queued after admission, indexed on confirmed acceptance, reconciliation."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from conftest import make_metadata
from honcho_helpers import KEY, settings
from outbox_helpers import T0

from cards import IndexState, OutboxError
from cards.remote import project_card
from indexer import (
    CardIndexer,
    DeliveryWorker,
    HonchoMemoryService,
    Outbox,
    Ownership,
    RetryPolicy,
)
from indexer._policy import CircuitBreaker

HOSTILE_PATH = "/home/alice/secret/result.parquet"


@pytest.fixture
def setup(ws, fake, tmp_path):
    store = ws.store(initial_index_state=IndexState.PENDING)
    outbox = Outbox(str(tmp_path / "state"))
    indexer = CardIndexer(
        outbox=outbox, stores={store.project_id: store}, assistant_peer_id="artmem-assistant"
    )
    return store, outbox, indexer


def _worker(outbox, indexer, fake, now):
    ownership = Ownership(outbox.state_root)
    assert ownership.acquire()
    return DeliveryWorker(
        outbox=outbox,
        service=HonchoMemoryService(settings(), KEY, fake.transport()),
        ownership=ownership,
        policy=RetryPolicy(base_s=1, max_s=4),
        breaker=CircuitBreaker(),
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + timedelta(seconds=s)),
        rand=lambda: 0.5,
        on_ack=indexer.on_ack,
        on_dead=indexer.on_dead,
    )


def _record(ws, store, name, data, **meta):
    ws.export(name, data)
    return ws.record(store, name, **meta)


def test_record_admits_then_delivery_indexes(ws, fake, setup):
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"rows", summary=f"Result at {HOSTILE_PATH}").card
    assert card.index.state is IndexState.PENDING
    admission = indexer.admit(card, maybe_sent=False)
    assert admission.queued and admission.state is IndexState.QUEUED
    assert store.load_card(card.experiment_id).index.state is IndexState.QUEUED
    worker = _worker(outbox, indexer, fake, [T0])
    assert worker.run_once().delivered == 1
    assert store.load_card(card.experiment_id).index.state is IndexState.INDEXED
    (message,) = fake.messages("ws")
    assert message.metadata["experiment_id"] == card.experiment_id
    assert message.metadata["kind"] == "experiment-card"
    sent = b"".join(r.raw_body for r in fake.requests)
    assert HOSTILE_PATH.encode() not in sent and b"rows" not in sent
    assert str(ws.root).encode() not in sent


def test_admission_failure_leaves_the_card_pending(ws, setup, monkeypatch):
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"x").card

    def broken(entry):
        raise OutboxError("disk full")

    monkeypatch.setattr(outbox, "admit", broken)
    admission = indexer.admit(card, maybe_sent=False)
    assert not admission.queued and admission.state is IndexState.PENDING
    assert store.load_card(card.experiment_id).index.state is IndexState.PENDING


def test_empty_summary_after_redaction_skips_remote_indexing(ws, setup):
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"x", summary="alice@example.com").card
    admission = indexer.admit(card, maybe_sent=False)
    assert not admission.queued and admission.state is IndexState.FAILED
    stored = store.load_card(card.experiment_id)
    assert stored.index.last_error == admission.reason
    assert outbox.pending() == []


def test_an_indexed_card_is_not_queued_again(ws, fake, setup):
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"x").card
    indexer.admit(card, maybe_sent=False)
    _worker(outbox, indexer, fake, [T0]).run_once()
    again = _record(ws, store, "a.bin", b"x").card  # idempotent re-record
    assert not indexer.admit(again).queued
    assert outbox.pending() == [] and len(fake.messages("ws")) == 1


def test_a_changed_card_is_a_new_revision_and_an_old_ack_does_not_index_it(ws, fake, setup):
    store, outbox, indexer = setup
    first = _record(ws, store, "a.bin", b"x").card
    indexer.admit(first, maybe_sent=False)
    second = _record(ws, store, "a.bin", b"x", title="Better title").card
    assert second.index.state is IndexState.PENDING
    indexer.admit(second, maybe_sent=False)
    assert len(outbox.pending()) == 2
    worker = _worker(outbox, indexer, fake, [T0])
    worker.run_once()
    assert store.load_card(first.experiment_id).index.state is IndexState.INDEXED
    titles = [m.content for m in fake.messages("ws")]
    assert len(titles) == 2 and "Better title" in titles[1]


def test_rejection_marks_the_card_failed_and_reconcile_leaves_it(ws, fake, setup):
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"x").card
    indexer.admit(card, maybe_sent=False)
    fake.fail_next(1, status=422, kind="message_create")
    _worker(outbox, indexer, fake, [T0]).run_once()
    failed = store.load_card(card.experiment_id)
    assert failed.index.state is IndexState.FAILED
    assert failed.index.last_error == "indexer.remote_rejected" and failed.index.attempts == 1
    report = indexer.reconcile(batch=10)
    assert report.skipped == 1 and outbox.pending() == []


def test_reconcile_requeues_lost_and_exhausted_deliveries_without_duplicates(ws, fake, setup):
    store, outbox, indexer = setup
    lost = _record(ws, store, "a.bin", b"a").card  # committed, never admitted (a crash)
    exhausted = _record(ws, store, "b.bin", b"b").card
    indexer.admit(exhausted, maybe_sent=False)
    worker = _worker(outbox, indexer, fake, [T0])
    worker.run_once()  # delivered: in Honcho
    entry_id = json.loads(json.dumps(fake.messages("ws")[0].metadata))["delivery_id"]
    # pretend the acknowledgement was lost and the delivery later exhausted its retries
    store.update_index_status(
        exhausted.experiment_id,
        lambda _: msgspec.structs.replace(exhausted.index, state=IndexState.FAILED),
    )
    remote = project_card(exhausted)
    assert remote.delivery_id == entry_id  # a dead letter is a real document of that delivery
    outbox.dead_letter(indexer.entry_for(remote, exhausted), "indexer.retries_exhausted")
    report = indexer.reconcile(batch=10)
    assert report.admitted == 2
    assert all(e.maybe_sent for e in outbox.pending())
    worker.drain(60)
    for card in (lost, exhausted):
        assert store.load_card(card.experiment_id).index.state is IndexState.INDEXED
    assert sorted(m.metadata["experiment_id"] for m in fake.messages("ws")) == sorted(
        [lost.experiment_id, exhausted.experiment_id]
    )  # the exhausted one was already there: not uploaded twice


def test_reconcile_is_bounded_per_batch(ws, setup):
    store, outbox, indexer = setup
    for n in range(5):
        _record(ws, store, f"f{n}.bin", bytes([n]))
    report = indexer.reconcile(batch=2)
    assert report.examined == 2 and report.truncated and len(outbox.pending()) == 2


def test_metadata_helper_is_valid():
    assert make_metadata().title


def _edit_content(raw: bytes) -> bytes:
    doc = json.loads(raw)
    doc["messages"][0]["content"] += " (edited by hand)"
    return json.dumps(doc).encode()


DAMAGE = {
    "garbage": lambda raw: b"\x00\x9c not an outbox document",
    "empty": lambda raw: b"",
    "truncated": lambda raw: raw[: len(raw) // 3],
    "edited": _edit_content,
}


@pytest.mark.parametrize("repair_first", [False, True], ids=["reconcile", "check-then-reconcile"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_queued_card_whose_document_is_corrupt_is_admitted_afresh(
    ws, fake, setup, damage, repair_first
):
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"rows").card
    indexer.admit(card, maybe_sent=False)
    (entry,) = outbox.pending()
    path = Path(outbox.state_root, "outbox", "pending", entry.delivery_id + ".json")
    damaged = DAMAGE[damage](path.read_bytes())
    path.write_bytes(damaged)
    assert outbox.pending() == []  # nothing would ever deliver it: the card would stay queued
    assert store.load_card(card.experiment_id).index.state is IndexState.QUEUED
    if repair_first:  # the operator's check moves it aside; reconciliation re-admits
        assert outbox.check(repair=True).moved == 1
    report = indexer.reconcile(batch=10)
    assert (report.admitted, report.already_queued, report.skipped) == (1, 0, 0)
    (fresh,) = outbox.pending()
    assert fresh.delivery_id == entry.delivery_id and fresh.maybe_sent  # checks before sending
    corrupt = Path(outbox.state_root, "outbox", "dead-letter", entry.delivery_id + ".corrupt")
    assert corrupt.read_bytes() == damaged  # kept for the operator, never parsed
    assert store.load_card(card.experiment_id).index.state is IndexState.QUEUED
    _worker(outbox, indexer, fake, [T0]).drain(60)
    assert store.load_card(card.experiment_id).index.state is IndexState.INDEXED
    assert len(fake.messages("ws")) == 1
    assert indexer.reconcile(batch=10).examined == 0


def test_a_queued_card_whose_document_is_missing_is_admitted_afresh(ws, fake, setup):
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"rows").card
    indexer.admit(card, maybe_sent=False)
    (entry,) = outbox.pending()
    Path(outbox.state_root, "outbox", "pending", entry.delivery_id + ".json").unlink()
    report = indexer.reconcile(batch=10)
    assert report.admitted == 1 and [e.delivery_id for e in outbox.pending()] == [entry.delivery_id]
    _worker(outbox, indexer, fake, [T0]).drain(60)
    assert store.load_card(card.experiment_id).index.state is IndexState.INDEXED


def test_a_card_entry_is_bound_to_its_card(ws, setup):
    store, outbox, indexer = setup
    first = _record(ws, store, "a.bin", b"a").card
    second = _record(ws, store, "b.bin", b"b").card
    entry = indexer.entry_for(project_card(first), first)
    with pytest.raises(ValueError):
        entry.changed(card=entry.card.model_copy(update={"experiment_id": second.experiment_id}))
    with pytest.raises(ValueError):
        entry.changed(target={"session_id": "artmem-cards-elsewhere", "kind": "cards"})
    with pytest.raises(ValueError):
        entry.changed(messages=[*entry.messages, *entry.messages])


def test_a_queued_card_keeps_the_revision_its_state_is_about(ws, fake, setup, monkeypatch):
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"x").card
    indexer.admit(card, maybe_sent=False)
    queued = store.load_card(card.experiment_id)
    remote = project_card(card)
    assert queued.index.projection_revision == remote.projection_revision
    # The acknowledgement is matched against the kept revision: no projection on the way.
    import indexer._cards as cards_module

    def no_projection(_card):
        raise AssertionError("the card was projected again")

    monkeypatch.setattr(cards_module, "project_card", no_projection)
    _worker(outbox, indexer, fake, [T0]).run_once()
    indexed = store.load_card(card.experiment_id)
    assert indexed.index.state is IndexState.INDEXED
    assert indexed.index.projection_revision == remote.projection_revision


def test_an_ack_after_a_crash_before_queued_still_indexes_the_card(ws, fake, setup):
    # Admission wrote the outbox document, then the process died before marking the card
    # queued: the card is pending, without a kept revision, and the delivery still counts.
    store, outbox, indexer = setup
    card = _record(ws, store, "a.bin", b"x").card
    outbox.admit(indexer.entry_for(project_card(card), card, maybe_sent=False))
    assert store.load_card(card.experiment_id).index.state is IndexState.PENDING
    _worker(outbox, indexer, fake, [T0]).run_once()
    assert store.load_card(card.experiment_id).index.state is IndexState.INDEXED


def test_an_admission_does_not_mark_a_card_changed_in_between(ws, setup):
    store, outbox, indexer = setup
    first = _record(ws, store, "a.bin", b"x").card
    _record(ws, store, "a.bin", b"x", title="Changed meanwhile")
    admission = indexer.admit(first, maybe_sent=False)  # the projection of the old content
    assert admission.queued  # the old revision's document is in the outbox all the same
    current = store.load_card(first.experiment_id)
    assert current.index.state is IndexState.PENDING and current.title == "Changed meanwhile"
