"""Issue 28 in the store: edit a card conditionally, remove experiments, collect garbage."""

from __future__ import annotations

import json
import os
import time

import pytest
from bucket_helpers import Host, bucket, keys_below, s3_endpoint
from conftest import PROJECT, Workspace, fingerprint

from cards import IndexState
from cards.errors import EditConflict, ExperimentNotFound, InvalidInput
from cas import (
    CardEdit,
    Retention,
    Store,
    card_revision,
    collect_bucket_garbage,
    collect_garbage,
    edit_card,
    fsck,
    remove_experiments,
    retired_among,
)
from cas._lifecycle import AUDIT

__all__ = ["bucket", "s3_endpoint"]  # fixtures, imported for pytest

NOW_GRACE = Retention(grace_s=0, quarantine_s=0)


def audit_lines(store: Store) -> list[bytes]:
    """Every audit line of the project, oldest first (read as an operator reads the keys)."""
    with store._opened(create=False) as room:
        if room is None:
            return []
        return [room.keys.read(entry.key).data for entry in room.keys.list(f"{AUDIT}/")]


def _edit(store, exp, **change):  # type: ignore[no-untyped-def]
    card = store.load_card(exp)
    return edit_card(store, exp, CardEdit(**change), if_revision=card_revision(card))


def test_an_edit_needs_no_source_file_and_keeps_the_identity(ws: Workspace) -> None:
    store = ws.store(initial_index_state=IndexState.PENDING)
    path = ws.export("r.csv", b"a,b\n1,2\n")
    recorded = ws.record(store, "r.csv")
    path.unlink()  # the original is gone
    exp = recorded.card.experiment_id
    edited = _edit(
        store, exp, title="Fixed title", add_tags=("rnaseq",), remove_tags=("cohort",),
        columns=("x", "y"),
    )  # fmt: skip
    card = store.load_card(exp)
    assert card.title == "Fixed title" and card.tags == ["response", "rnaseq"]
    assert card.columns == ["x", "y"] and card.experiment_id == exp
    assert card.artifact == recorded.card.artifact and card.index.state is IndexState.PENDING
    assert edited.changed == ("title", "tags", "columns")
    assert edited.revision == card_revision(card) != edited.before


def test_an_edit_to_what_the_card_says_writes_nothing(ws: Workspace) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    exp = ws.record(store, "r.csv").card.experiment_id
    before = store.load_card(exp)
    edited = _edit(store, exp, title=before.title, add_tags=("cohort",))
    assert edited.changed == () and store.load_card(exp) == before


def test_a_stale_revision_is_a_conflict_and_writes_nothing(ws: Workspace) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    exp = ws.record(store, "r.csv").card.experiment_id
    seen = card_revision(store.load_card(exp))
    edit_card(store, exp, CardEdit(title="First editor"), if_revision=seen)
    with pytest.raises(EditConflict) as caught:
        edit_card(store, exp, CardEdit(title="Second editor"), if_revision=seen)
    assert "show" in caught.value.message and caught.value.revision != seen
    assert store.load_card(exp).title == "First editor"


def test_the_index_status_is_not_a_revision(ws: Workspace) -> None:
    store = ws.store(initial_index_state=IndexState.PENDING)
    ws.export("r.csv", b"a\n1\n")
    exp = ws.record(store, "r.csv").card.experiment_id
    seen = card_revision(store.load_card(exp))
    from cards import IndexStatus

    store.update_index_status(exp, lambda _: IndexStatus(state=IndexState.QUEUED))
    edit_card(store, exp, CardEdit(summary="Still mine"), if_revision=seen)
    assert store.load_card(exp).summary == "Still mine"


@pytest.mark.parametrize(
    "change",
    [{"title": ""}, {"title": "x" * 1000}, {"add_tags": ("bad\ntag",)}, {"remove_tags": ("no",)}],
)
def test_bad_edits_are_refused(ws: Workspace, change: dict[str, object]) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    exp = ws.record(store, "r.csv").card.experiment_id
    before = store.load_card(exp)
    with pytest.raises(InvalidInput):
        _edit(store, exp, **change)
    assert store.load_card(exp) == before


def test_rm_removes_the_card_audits_it_and_keeps_the_bytes_until_gc(ws: Workspace) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    recorded = ws.record(store, "r.csv")
    exp, aid = recorded.card.experiment_id, recorded.card.artifact.artifact_id
    (removed,) = remove_experiments(store, [exp], who="ops@lab")
    assert removed.object_shared is False and removed.bytes == 4
    with pytest.raises(ExperimentNotFound):
        store.load_card(exp)
    assert store.has_object(aid) and fsck(store).ok
    (line,) = audit_lines(store)
    audit = json.loads(line)
    assert audit["who"] == "ops@lab" and audit["experiment_id"] == exp
    assert set(audit) == {"action", "at", "who", "experiment_id", "artifact_id", "bytes"}
    assert retired_among(store, [exp]) == {exp}
    dry = collect_garbage(store, NOW_GRACE, apply=False)
    assert [i.kind for i in dry.reclaimed] == ["object"] and store.has_object(aid)
    applied = collect_garbage(store, NOW_GRACE, apply=True)
    assert applied.bytes == 4 and not store.has_object(aid) and fsck(store).ok
    again = ws.record(store, "r.csv")  # recorded again: the bytes come back, not retired
    assert again.card.experiment_id == exp and retired_among(store, [exp]) == set()


def test_rm_of_an_unknown_id_removes_nothing(ws: Workspace) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    exp = ws.record(store, "r.csv").card.experiment_id
    unknown = "exp_" + "a" * 52
    with pytest.raises(ExperimentNotFound):
        remove_experiments(store, [exp, unknown], who="ops")
    assert store.load_card(exp).experiment_id == exp and audit_lines(store) == []


def test_a_shared_object_stays_when_one_of_its_cards_goes(ws: Workspace) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    first = ws.record(store, "r.csv").card
    second = ws.record(store, "r.csv", query_fingerprint=fingerprint("other")).card
    (removed,) = remove_experiments(store, [first.experiment_id], who="ops")
    assert removed.object_shared
    report = collect_garbage(store, NOW_GRACE, apply=True)
    assert report.reclaimed == [] and report.referenced == 1
    assert store.resolve(second.experiment_id).card.artifact == second.artifact


def test_gc_keeps_what_is_younger_than_the_grace_period(ws: Workspace) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    exp = ws.record(store, "r.csv").card.experiment_id
    remove_experiments(store, [exp], who="ops")
    report = collect_garbage(store, Retention(grace_s=3600), apply=True)
    assert report.reclaimed == [] and report.young == 1
    later = collect_garbage(store, Retention(grace_s=3600), apply=True, now=time.time() + 7200)
    assert [i.kind for i in later.reclaimed] == ["object"]


def test_gc_collects_stale_stages_and_old_quarantine_but_no_live_stage(ws: Workspace) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    ws.record(store, "r.csv")
    project = ws.project_dir(store)
    stale = project / "tmp" / "stage-object-1-00.tmp"
    stale.write_bytes(b"crash leftover")
    (project / "quarantine").mkdir(mode=0o700)
    (project / "quarantine" / "art_x.20260101T000000Z").write_bytes(b"corrupt")
    old = time.time() - 86_400
    os.utime(stale, (old, old))
    report = collect_garbage(store, Retention(grace_s=3600, quarantine_s=0), apply=True)
    assert sorted(i.kind for i in report.reclaimed) == ["quarantined", "stage"]
    assert not stale.exists() and not any((project / "quarantine").iterdir())


def test_an_unreadable_card_stops_the_collection_of_objects(ws: Workspace) -> None:
    store = ws.store()
    ws.export("r.csv", b"a\n1\n")
    exp = ws.record(store, "r.csv").card.experiment_id
    remove_experiments(store, [exp], who="ops")
    (ws.project_dir(store) / "cards" / ("exp_" + "b" * 52 + ".json")).write_bytes(b"{")
    report = collect_garbage(store, NOW_GRACE, apply=True)
    assert report.unreadable_cards == 1 and report.reclaimed == []


# -- on a bucket ------------------------------------------------------------------------------


def test_a_bucket_edits_conditionally_removes_and_collects_through_trash(
    ws: Workspace, s3_endpoint: str, bucket: str
) -> None:
    store = Host(s3_endpoint, bucket, ws.root / "state").store(PROJECT)
    ws.export("r.csv", b"a\n1\n")
    card = ws.record(store, "r.csv").card
    exp, aid = card.experiment_id, card.typed_artifact_id
    seen = card_revision(card)
    edit_card(store, exp, CardEdit(title="Bucket title"), if_revision=seen)
    with pytest.raises(EditConflict):
        edit_card(store, exp, CardEdit(title="Lost update"), if_revision=seen)
    assert store.load_card(exp).title == "Bucket title"
    remove_experiments(store, [exp], who="ops")
    assert retired_among(store, [exp]) == {exp} and len(audit_lines(store)) == 1
    object_key = store.objects.keys.object(aid)
    dry = collect_bucket_garbage(store, NOW_GRACE, apply=False)
    assert [i.kind for i in dry.reclaimed] == ["object"]
    assert object_key in keys_below(s3_endpoint, bucket)
    applied = collect_bucket_garbage(store, NOW_GRACE, apply=True)
    keys = keys_below(s3_endpoint, bucket)
    assert applied.bytes == 4 and object_key not in keys
    assert any("/trash/" in key for key in keys) and fsck(store).ok  # reversible until next gc
    later = collect_bucket_garbage(store, NOW_GRACE, apply=True)
    assert {i.kind for i in later.reclaimed} == {"trash"}
    assert not any("/trash/" in key for key in keys_below(s3_endpoint, bucket))


def test_a_bucket_gc_puts_back_an_object_a_card_named_meanwhile(
    ws: Workspace, s3_endpoint: str, bucket: str
) -> None:
    store = Host(s3_endpoint, bucket, ws.root / "state").store(PROJECT)
    ws.export("r.csv", b"a\n1\n")
    card = store.load_card(ws.record(store, "r.csv").card.experiment_id)
    remove_experiments(store, [card.experiment_id], who="ops")
    collect_bucket_garbage(store, NOW_GRACE, apply=True)  # the object is in trash now
    assert store.objects.cards.write(
        card, None
    )  # a record that adopted it wrote its card meanwhile
    report = collect_bucket_garbage(store, NOW_GRACE, apply=True)
    assert report.restored == 1 and fsck(store).ok
    assert store.resolve(card.experiment_id).card.artifact == card.artifact
