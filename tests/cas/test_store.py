"""Record and resolve: atomic, idempotent, project-scoped, and failing closed."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from datetime import UTC, datetime, timedelta

import pytest
from conftest import SESSION, fingerprint

from cards import (
    DEFAULT_LIMITS,
    Freshness,
    IndexState,
    IndexStatus,
    InvalidId,
    InvalidInput,
    ObjectMissing,
    parse_card,
)
from cards._ids import artifact_id_for_bytes
from cards.errors import (
    CardInvalid,
    ExperimentNotFound,
    IntegrityError,
    QuotaExceeded,
    StoreIOError,
    UnsupportedVersion,
)
from cas import IntegrityMode, VerificationCache
from cas._layout import USAGE
from fsedge import parse_manifest


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def _object_path(ws, store, card):
    return ws.artifact_root.joinpath(
        *store.layout.root, *store.layout.object_path(card.typed_artifact_id)
    )


def test_record_then_resolve_returns_the_exact_bytes(ws):
    data = os.urandom(10_000)
    ws.export("r.bin", data)
    store = ws.store()
    recorded = ws.record(store, "r.bin")
    card = recorded.card
    assert card.artifact.artifact_id == artifact_id_for_bytes(data)
    assert card.artifact.sha256 == hashlib.sha256(data).hexdigest()
    assert card.artifact.bytes == len(data)
    assert card.project_id == "trial-analysis" and card.session_id == SESSION
    assert not recorded.deduplicated and recorded.card_created
    resolved = store.resolve(card.experiment_id)
    with open(resolved.path, "rb") as handle:
        assert handle.read() == data
    # The record proved the bytes as it wrote them: no rehash needed (see test_integrity_modes).
    assert not resolved.hashed and resolved.freshness is Freshness.NOT_CHECKED
    assert resolved.path == str(_object_path(ws, store, card))


def test_layout_permissions_and_canonical_card(ws):
    ws.export("r.bin", b"payload")
    store = ws.store()
    card = ws.record(store, "r.bin").card
    obj = _object_path(ws, store, card)
    assert stat.S_IMODE(obj.stat().st_mode) == 0o400
    project = ws.project_dir(store)
    card_file = project / "cards" / f"{card.experiment_id}.json"
    assert stat.S_IMODE(card_file.stat().st_mode) == 0o600
    for d in (project, project / "objects", project / "cards", project / "tmp", obj.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    raw = card_file.read_bytes()
    assert parse_card(raw) == card
    assert (
        raw
        == json.dumps(
            json.loads(raw), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    )
    manifest_raw = obj.with_name(obj.name + ".chunks").read_bytes()
    assert hashlib.sha256(manifest_raw).hexdigest() == card.chunk_manifest_sha256
    assert parse_manifest(manifest_raw).size == len(b"payload")
    assert list((project / "tmp").iterdir()) == []


def test_chunk_manifest_covers_every_4_mib_chunk(ws):
    import xxhash

    chunk = 4 * 1024 * 1024
    data = os.urandom(chunk * 2 + 5)
    ws.export("r.bin", data)
    store = ws.store()
    card = ws.record(store, "r.bin").card
    obj = _object_path(ws, store, card)
    manifest = parse_manifest(obj.with_name(obj.name + ".chunks").read_bytes())
    assert len(manifest.digests) == 3
    for index, digest in enumerate(manifest.digests):
        offset, length = manifest.span(index)
        assert xxhash.xxh3_128_digest(data[offset : offset + length]) == digest


def test_empty_file_can_be_recorded(ws):
    ws.export("empty.bin", b"")
    store = ws.store()
    card = ws.record(store, "empty.bin").card
    assert card.artifact.bytes == 0
    assert store.resolve(card.experiment_id).path


def test_re_record_is_idempotent_and_keeps_the_card(ws):
    ws.export("r.bin", b"same bytes")
    store = ws.store(clock=Clock())
    first = ws.record(store, "r.bin")
    second = ws.record(store, "r.bin")
    assert second.deduplicated and not second.card_created and not second.card_updated
    assert second.card == first.card
    assert any("deduplicated" in w for w in second.warnings)


def test_re_record_updates_descriptive_fields_only(ws):
    ws.export("r.bin", b"same bytes")
    store = ws.store(clock=Clock(), initial_index_state=IndexState.PENDING)
    first = ws.record(store, "r.bin").card
    store.update_index_status(
        first.experiment_id, lambda _: IndexStatus(state=IndexState.INDEXED, attempts=1)
    )
    second = ws.record(store, "r.bin", title="A better title", tags=["new"]).card
    assert second.experiment_id == first.experiment_id
    assert second.title == "A better title"
    assert second.tags == ["cohort", "response", "new"]  # a re-record adds tags
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert second.artifact.created_at == first.artifact.created_at
    assert second.index.state is IndexState.PENDING  # a new projection must be indexed again
    assert store.load_card(first.experiment_id) == second


def test_same_bytes_with_another_fingerprint_is_another_experiment(ws):
    ws.export("r.bin", b"bytes")
    store = ws.store()
    a = ws.record(store, "r.bin").card
    b = ws.record(store, "r.bin", query_fingerprint=fingerprint("other")).card
    assert a.experiment_id != b.experiment_id
    assert a.artifact.artifact_id == b.artifact.artifact_id
    assert store.usage().objects == 1 and store.usage().cards == 2


def test_no_cross_project_deduplication(ws):
    ws.export("r.bin", b"shared bytes")
    one, two = ws.store("project-one"), ws.store("project-two")
    card_one = ws.record(one, "r.bin").card
    card_two = ws.record(two, "r.bin").card
    assert not ws.record(two, "r.bin").card_created
    assert card_one.experiment_id != card_two.experiment_id
    path_one = _object_path(ws, one, card_one)
    path_two = _object_path(ws, two, card_two)
    assert path_one != path_two and path_one.stat().st_ino != path_two.stat().st_ino
    with pytest.raises(ExperimentNotFound):
        two.resolve(card_one.experiment_id)


def test_unknown_source_version_warns(ws):
    ws.export("r.bin", b"x")
    recorded = ws.record(ws.store(), "r.bin", source_version="unknown")
    assert any("unverifiable" in w for w in recorded.warnings)


@pytest.mark.parametrize(
    ("current", "state", "warned"),
    [
        (None, Freshness.NOT_CHECKED, False),
        ("snapshot-2026-11-01", Freshness.FRESH, False),
        ("snapshot-2026-12-01", Freshness.STALE, True),
        ("unknown", Freshness.UNVERIFIABLE, True),
    ],
)
def test_resolve_freshness(ws, current, state, warned):
    ws.export("r.bin", b"x")
    store = ws.store()
    card = ws.record(store, "r.bin").card
    resolved = store.resolve(card.experiment_id, current)
    assert resolved.freshness is state
    assert bool(resolved.warnings) == warned


def test_resolve_rejects_malformed_input(ws):
    store = ws.store()
    with pytest.raises(InvalidId):
        store.resolve("exp_../../x")
    ws.export("r.bin", b"x")
    card = ws.record(store, "r.bin").card
    with pytest.raises(InvalidInput):
        store.resolve(card.experiment_id, "bad\nversion")


def test_resolve_of_unknown_experiment_fails(ws):
    ws.export("r.bin", b"x")
    store = ws.store()
    card = ws.record(store, "r.bin").card
    missing = card.experiment_id[:-1] + ("a" if card.experiment_id[-1] != "a" else "b")
    with pytest.raises(ExperimentNotFound):
        store.resolve(missing)
    with pytest.raises(ExperimentNotFound):
        ws.store("empty-project").resolve(card.experiment_id)


def _flip_byte_keep_mtime(path) -> None:
    st = path.stat()
    path.chmod(0o600)
    with open(path, "r+b") as handle:
        first = handle.read(1)
        handle.seek(0)
        handle.write(bytes([first[0] ^ 0xFF]))
    path.chmod(0o400)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_flipped_byte_with_mtime_restored_fails_in_a_fresh_process_cache(ws):
    ws.export("r.bin", os.urandom(5000))
    store = ws.store()
    card = ws.record(store, "r.bin").card
    store.resolve(card.experiment_id)
    _flip_byte_keep_mtime(_object_path(ws, store, card))
    with pytest.raises(IntegrityError):
        ws.store().resolve(card.experiment_id)  # new cache: as a new process


def test_flipped_byte_with_mtime_restored_fails_even_after_a_cached_verification(ws):
    ws.export("r.bin", os.urandom(5000))
    store = ws.store()
    card = ws.record(store, "r.bin").card
    assert not store.resolve(card.experiment_id).hashed  # proven when it was written
    _flip_byte_keep_mtime(_object_path(ws, store, card))  # ctime moves: the cache misses
    with pytest.raises(IntegrityError):
        store.resolve(card.experiment_id)


def test_truncated_object_fails_closed(ws):
    ws.export("r.bin", b"0123456789")
    store = ws.store()
    card = ws.record(store, "r.bin").card
    path = _object_path(ws, store, card)
    path.chmod(0o600)
    os.truncate(path, 5)
    with pytest.raises(IntegrityError):
        store.resolve(card.experiment_id)


def test_missing_object_fails_closed(ws):
    ws.export("r.bin", b"x")
    store = ws.store()
    card = ws.record(store, "r.bin").card
    _object_path(ws, store, card).unlink()
    with pytest.raises(ObjectMissing):
        store.resolve(card.experiment_id)


def test_symlinked_object_is_refused(ws, tmp_path):
    ws.export("r.bin", b"x")
    store = ws.store()
    card = ws.record(store, "r.bin").card
    path = _object_path(ws, store, card)
    copy = tmp_path / "copy"
    copy.write_bytes(b"x")
    path.unlink()
    path.symlink_to(copy)
    with pytest.raises(Exception) as info:
        store.resolve(card.experiment_id)
    assert info.value.code in ("cas.path_escape", "cas.object_missing")


def test_integrity_modes(ws):
    ws.export("r.bin", b"x" * 100)
    cached = ws.store()
    card = ws.record(cached, "r.bin").card
    # Proven as it was written, then by its record (or this process's cache): never rehashed.
    assert [cached.resolve(card.experiment_id).hashed for _ in range(3)] == [False, False, False]
    always = ws.store(integrity=IntegrityMode.ALWAYS)
    assert [always.resolve(card.experiment_id).hashed for _ in range(3)] == [True, True, True]


def test_cached_resolve_keeps_its_verification_time(ws):
    ws.export("r.bin", b"x")
    store = ws.store(clock=Clock())
    card = ws.record(store, "r.bin").card
    first = store.resolve(card.experiment_id)
    second = store.resolve(card.experiment_id)
    assert second.verified_at == first.verified_at


def test_verification_cache_is_bounded():
    cache = VerificationCache(max_entries=2)
    now = datetime.now(UTC)
    keys = [("prj", "art", 1, i, 1, 1, 1) for i in range(3)]
    for key in keys:
        cache.put(key, now)  # type: ignore[arg-type]
    assert cache.get(keys[2]) == now  # type: ignore[arg-type]
    assert cache.get(keys[0]) is None  # type: ignore[arg-type]


def _card_file(ws, store, card):
    return ws.project_dir(store) / "cards" / f"{card.experiment_id}.json"


def test_unsupported_card_fails_resolve_and_is_skipped_by_scans(ws):
    ws.export("a.bin", b"a")
    ws.export("b.bin", b"b")
    store = ws.store()
    good = ws.record(store, "a.bin").card
    bad = ws.record(store, "b.bin").card
    path = _card_file(ws, store, bad)
    doc = json.loads(path.read_bytes())
    doc["schema_version"] = 2
    path.write_text(json.dumps(doc))
    with pytest.raises(UnsupportedVersion):
        store.resolve(bad.experiment_id)
    scan = store.scan_cards()
    assert scan.cards == (good,)
    assert [p.code for p in scan.problems] == ["card.unsupported_version"]
    # a newer card is never overwritten by an older writer
    with pytest.raises(UnsupportedVersion):
        ws.record(store, "b.bin")


def test_corrupt_card_is_skipped_and_healed_by_re_recording(ws):
    ws.export("a.bin", b"a")
    store = ws.store()
    card = ws.record(store, "a.bin").card
    _card_file(ws, store, card).write_text("{not json")
    assert store.scan_cards().cards == ()
    with pytest.raises(CardInvalid):
        store.resolve(card.experiment_id)
    healed = ws.record(store, "a.bin")
    assert healed.card_created and store.resolve(card.experiment_id).path


def test_card_copied_to_another_name_or_project_is_refused(ws):
    ws.export("a.bin", b"a")
    ws.export("b.bin", b"b")
    store = ws.store()
    a = ws.record(store, "a.bin").card
    b = ws.record(store, "b.bin").card
    _card_file(ws, store, b).write_bytes(_card_file(ws, store, a).read_bytes())
    with pytest.raises(CardInvalid):
        store.resolve(b.experiment_id)
    other = ws.store("other-project")
    ws.record(other, "a.bin")
    target = ws.project_dir(other) / "cards" / f"{a.experiment_id}.json"
    target.write_bytes(_card_file(ws, store, a).read_bytes())
    with pytest.raises(CardInvalid):
        other.resolve(a.experiment_id)


def test_load_cards_gives_none_for_every_unusable_card_file(ws, tmp_path):
    names = ["good", "corrupt", "unsupported", "misplaced", "symlink", "directory", "huge", "fifo"]
    store = ws.store()
    cards = []
    for number, name in enumerate(names):
        ws.export(f"{name}.bin", bytes([number]))
        cards.append(ws.record(store, f"{name}.bin").card)
    good, corrupt, unsupported, misplaced, symlink, directory, huge, fifo = cards
    _card_file(ws, store, corrupt).write_text("{not json")
    doc = json.loads(_card_file(ws, store, unsupported).read_bytes())
    _card_file(ws, store, unsupported).write_text(json.dumps({**doc, "schema_version": 2}))
    _card_file(ws, store, misplaced).write_bytes(_card_file(ws, store, good).read_bytes())
    outside = tmp_path / "outside.json"
    outside.write_bytes(_card_file(ws, store, symlink).read_bytes())  # a valid card, elsewhere
    _card_file(ws, store, symlink).unlink()
    _card_file(ws, store, symlink).symlink_to(outside)
    _card_file(ws, store, directory).unlink()
    _card_file(ws, store, directory).mkdir()
    _card_file(ws, store, huge).write_bytes(b" " * (2 << 20))
    _card_file(ws, store, fifo).unlink()
    os.mkfifo(_card_file(ws, store, fifo))  # no writer: a blocking open would hang
    ids = [card.experiment_id for card in cards]
    assert store.load_cards(ids) == [good, *[None] * 7]
    for card in cards[1:]:  # one by one, each is refused with a typed error
        with pytest.raises((CardInvalid, ExperimentNotFound)):
            store.load_card(card.experiment_id)


def test_byte_quota_rejects_and_leaves_nothing(ws):
    ws.export("a.bin", b"a" * 600)
    ws.export("b.bin", b"b" * 600)
    store = ws.store(limits=DEFAULT_LIMITS.lowered(project_bytes=1000))
    ws.record(store, "a.bin")

    def tree():  # the objects' summary is a cache that any record may refresh
        return sorted(p.name for p in ws.project_dir(store).rglob("*") if p.name != USAGE)

    before = tree()
    with pytest.raises(QuotaExceeded):
        ws.record(store, "b.bin")
    assert tree() == before
    assert store.usage().bytes == 600
    # a deduplicated re-record needs no new bytes and still succeeds at the quota
    assert ws.record(store, "a.bin", title="retitled").card_updated


def test_card_quota_rejects_and_leaves_nothing(ws):
    ws.export("a.bin", b"a")
    ws.export("b.bin", b"b")
    store = ws.store(limits=DEFAULT_LIMITS.lowered(cards_per_project=1))
    ws.record(store, "a.bin")
    with pytest.raises(QuotaExceeded):
        ws.record(store, "b.bin")
    assert store.usage() == type(store.usage())(objects=1, bytes=1, cards=1)
    assert not ws.record(store, "a.bin").card_created


def test_failed_publication_leaves_nothing_behind(ws, monkeypatch):
    ws.export("a.bin", b"a" * 100)
    store = ws.store()

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", disk_full)
    with pytest.raises(StoreIOError):
        ws.record(store, "a.bin")
    monkeypatch.undo()
    project = ws.project_dir(store)
    assert list((project / "tmp").iterdir()) == []
    assert list((project / "cards").glob("*")) == [] if (project / "cards").exists() else True
    assert store.usage().objects == 0


def test_failed_card_write_reports_failure_and_leaves_no_card(ws, monkeypatch):
    ws.export("a.bin", b"a" * 100)
    store = ws.store()
    real_replace = os.replace

    def fail_for_cards(src, dst, *args, **kwargs):
        if str(dst).endswith(".json"):
            raise OSError(errno.EIO, "I/O error")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", fail_for_cards)
    with pytest.raises(StoreIOError):
        ws.record(store, "a.bin")
    monkeypatch.undo()
    assert store.scan_cards().cards == ()
    assert list((ws.project_dir(store) / "tmp").iterdir()) == []


def test_an_index_status_update_is_validated_and_persisted(ws):
    ws.export("a.bin", b"a")
    store = ws.store(initial_index_state=IndexState.PENDING)
    card = ws.record(store, "a.bin").card
    assert card.index.state is IndexState.PENDING
    status = IndexStatus(
        state=IndexState.FAILED, attempts=3, last_error="indexer.remote_unavailable"
    )
    updated = store.update_index_status(card.experiment_id, lambda _: status)
    assert store.load_card(card.experiment_id) == updated
    assert updated.index == status and updated.title == card.title


def test_lowered_metadata_limits_are_enforced_at_record(ws):
    ws.export("a.bin", b"a")
    store = ws.store(limits=DEFAULT_LIMITS.lowered(title_chars=3))
    with pytest.raises(InvalidInput):
        ws.record(store, "a.bin")
    assert not ws.project_dir(store).exists()


def test_relative_artifact_root_is_refused():
    from cas import ProjectStore

    with pytest.raises(InvalidInput):
        ProjectStore("relative/root", "p")
