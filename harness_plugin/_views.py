"""How results look: bounded JSON payloads for scripts, and lines for people."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from cards.policy import UNTRUSTED, HitSource

if TYPE_CHECKING:
    from cards import ExperimentCardV1, IndexState
    from cas import FsckReport, Recorded, Resolved, SearchHit
    from harness_plugin._runtime import SyncReport
    from indexer import OutboxStats

_SUMMARY_PREVIEW_CHARS = 400
UNAVAILABLE_HINT = (
    "the bytes are missing or were quarantined by `fsck --repair`; record the original file "
    "again to restore them"
)


def card_view(card: ExperimentCardV1) -> dict[str, object]:
    """The display fields of a card (card text is untrusted data, shown as data).

    The views are JSON-ready dicts in the shapes of `cards.wire` (`CardView` here), which the
    tools validate them against; the CLI prints them as they are, without loading pydantic.
    """
    view: dict[str, object] = {
        "title": card.title,
        "summary": card.summary,
        "source": card.source,
        "source_version": card.source_version,
        "tags": list(card.tags),
        "columns": list(card.columns),
        "shape": None if card.shape is None else list(card.shape),
        "created_at": iso(card.created_at),
        "updated_at": iso(card.updated_at),
        "trust": UNTRUSTED,
        "table_read": None,  # how every read of a CSV reads it, a kernel's too
    }
    if card.table_read is not None:
        view["table_read"] = {"types": dict(card.table_read.types), "nulls": card.table_read.nulls}
    return view


def artifact_view(card: ExperimentCardV1) -> dict[str, object]:
    """The artifact reference of a card, with its chunk manifest's digest (`wire.ArtifactView`)."""
    return {
        "artifact_id": card.artifact.artifact_id,
        "sha256": card.artifact.sha256,
        "bytes": card.artifact.bytes,
        "media_type": card.artifact.media_type,
        "created_at": iso(card.artifact.created_at),
        "chunk_manifest_sha256": card.chunk_manifest_sha256,
    }


def record_result(
    recorded: Recorded, *, honcho_queued: bool, state: IndexState | None = None
) -> dict[str, object]:
    """What `record` reports (Honcho spec §31.2): local durability apart from remote queueing."""
    card = recorded.card
    return {
        "experiment_id": card.experiment_id,
        "artifact_id": card.artifact.artifact_id,
        "sha256": card.artifact.sha256,
        "bytes": card.artifact.bytes,
        "deduplicated": recorded.deduplicated,
        "local_saved": True,
        "honcho_queued": honcho_queued,
        "index_state": str(state or card.index.state),
        "warnings": list(recorded.warnings),
        "changed": list(recorded.changed),
    }


def resolve_result(resolved: Resolved) -> dict[str, object]:
    """What `resolve` reports (Honcho spec §31.3): the path only after verification."""
    return {
        "experiment_id": resolved.card.experiment_id,
        "path": resolved.path,
        "chunk_manifest_path": resolved.manifest_path,
        "artifact": artifact_view(resolved.card),
        "card": card_view(resolved.card),
        "freshness": str(resolved.freshness),
        "verified_at": iso(resolved.verified_at),
        "warnings": list(resolved.warnings),
        "derived_from": list(resolved.card.derived_from),
        "stale_ancestors": [],  # filled by `_lineage.carry_freshness`
    }


def search_hit(
    card: ExperimentCardV1 | None,
    *,
    experiment_id: str,
    artifact_id: str,
    score: float,
    exact: tuple[str, ...],
    source: HitSource,
    available_locally: bool,
    remote_text: str | None = None,
) -> dict[str, object]:
    """One search hit (`wire.SearchHit`): a local card when there is one, else Honcho's text."""
    summary = card.summary if card is not None else remote_text
    return {
        "kind": "experiment-card",
        "experiment_id": experiment_id,
        "artifact_id": artifact_id,
        "title": card.title if card is not None else None,
        "summary": None if summary is None else _preview(summary),
        "source": card.source if card is not None else None,
        "source_version": card.source_version if card is not None else None,
        "tags": list(card.tags) if card is not None else [],
        "score": round(score, 4),
        "exact": list(exact),
        "origin": str(source),
        "trust": UNTRUSTED,
        "index_state": str(card.index.state) if card is not None else "unknown",
        "available_locally": available_locally,
        "created_at": iso(card.created_at) if card is not None else None,
        "updated_at": iso(card.updated_at) if card is not None else None,
    }


def local_hit(hit: SearchHit, *, available_locally: bool = True) -> dict[str, object]:
    """A hit of the local catalog; the caller says whether its object is present."""
    card = hit.card
    return search_hit(
        card,
        experiment_id=card.experiment_id,
        artifact_id=card.artifact.artifact_id,
        score=hit.score,
        exact=hit.exact,
        source=HitSource.LOCAL,
        available_locally=available_locally,
    )


def fsck_view(report: FsckReport) -> dict[str, object]:
    """The fsck report: store ids and counts only."""
    return {
        "ok": report.ok,
        "problems": report.problems,
        "objects": report.objects,
        "bytes": report.bytes,
        "cards": report.cards,
        "invalid_objects": report.invalid_objects,
        "orphans": report.orphans,
        "dangling_cards": report.dangling_cards,
        "invalid_cards": [{"name": p.name, "code": p.code} for p in report.invalid_cards],
        "manifest_mismatches": report.manifest_mismatches,
        "stale_stages": report.stale_stages,
        "live_stages": report.live_stages,
        "unknown_entries": report.unknown_entries,
        "removed_stages": report.removed_stages,
        "quarantined": report.quarantined,
    }


def record_lines(view: dict[str, object]) -> list[str]:
    """`record` for a person."""
    verb = "already stored (deduplicated)" if view["deduplicated"] else "stored"
    lines = [
        f"recorded {view['experiment_id']}",
        f"  artifact  {view['artifact_id']}  {human_size(int(str(view['bytes'])))}, {verb}",
        f"  index     {view['index_state']} (honcho queued: {_yes(view['honcho_queued'])})",
    ]
    changed = view.get("changed")
    if isinstance(changed, list) and changed:
        lines.append(f"  updated   {', '.join(map(str, changed))}")
    return lines + _warnings(view)


def resolve_lines(view: dict[str, object]) -> list[str]:
    """`resolve` for a person."""
    card = view["card"]
    artifact = view["artifact"]
    assert isinstance(card, dict) and isinstance(artifact, dict)
    lines = [
        f"{card['title']}",
        f"  experiment  {view['experiment_id']}",
        f"  path        {view['path']}",
        f"  bytes       {human_size(int(artifact['bytes']))} (size and SHA-256 verified)",
        f"  sha256      {artifact['sha256']}",
        f"  source      {card['source']} @ {card['source_version']}",
        f"  freshness   {view['freshness']}",
    ]
    return lines + _warnings(view)


def search_lines(hits: list[dict[str, object]], skipped: int) -> list[str]:
    """`search` for a person; card text is quoted as data."""
    if not hits:
        lines = ["no matching experiment cards"]
    else:
        lines = []
        for n, hit in enumerate(hits, 1):
            exact = hit["exact"]
            assert isinstance(exact, list)
            how = "exact: " + ", ".join(map(str, exact)) if exact else "lexical"
            lines.append(f"{n:>2}. {hit['title']!r}  [{how}, score {hit['score']}]")
            lines.append(f"    {hit['experiment_id']}  {hit['source']} @ {hit['source_version']}")
            if not hit["available_locally"]:
                lines.append(f"    not available locally: {UNAVAILABLE_HINT}")
    if skipped:
        lines.append(f"({skipped} unreadable cards were skipped; run `artmem fsck`)")
    return lines


def printable(text: str) -> str:
    r"""`text` with every non-printable character escaped (`\x1b`, `\u202e`), for a terminal.

    Names read from files and buckets (a column, an object key) may hold OSC 52 (a clipboard
    write), a screen clear or a bidi override; a person's terminal must see them as text.
    """
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


def counted(count: object, noun: str) -> str:
    """`1 object`, `2 objects`: a count and its noun, plural where it should be."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def fsck_lines(view: dict[str, object]) -> list[str]:
    """`fsck` for a person (bucket keys and entry names escaped)."""
    lines = [
        f"checked {counted(view['objects'], 'object')} ({human_size(int(str(view['bytes'])))}) "
        f"and {counted(view['cards'], 'card')}"
    ]
    labels = {
        "invalid_objects": "invalid object",
        "dangling_cards": "card without a valid object",
        "invalid_cards": "unreadable card",
        "manifest_mismatches": "chunk manifest mismatch",
        "stale_stages": "stale temp file",
        "unknown_entries": "unrecognised entry",
        "orphans": "orphan object (valid, no card; kept)",
        "removed_stages": "removed stale temp file",
        "quarantined": "quarantined corrupt object",
    }
    for key, label in labels.items():
        items = view[key]
        assert isinstance(items, list)
        lines.extend(
            f"  {label}: {printable(str(item['name'] if isinstance(item, dict) else item))}"
            for item in items
        )
    lines.append("ok" if view["ok"] else f"{counted(view['problems'], 'problem')}; see above")
    return lines


def _warnings(view: dict[str, object]) -> list[str]:
    warnings = view.get("warnings")
    assert isinstance(warnings, list)
    return [f"  warning: {w}" for w in warnings]


def _preview(text: str) -> str:
    if len(text) <= _SUMMARY_PREVIEW_CHARS:
        return text
    return text[: _SUMMARY_PREVIEW_CHARS - 1] + "…"


def iso(moment: datetime) -> str:
    """A timestamp as cards and tools print it (UTC as `Z`)."""
    return moment.isoformat().replace("+00:00", "Z")


def _yes(value: object) -> str:
    return "yes" if value else "no"


def human_size(n: int) -> str:
    """`n` bytes in binary units, for people."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def sync_view(report: SyncReport, stats: OutboxStats | None) -> dict[str, object]:
    """What `sync` did, and what is left."""
    r, d = report.reconciled, report.delivery
    return {
        "reconciled": {
            "examined": r.examined,
            "admitted": r.admitted,
            "already_queued": r.already_queued,
            "skipped": r.skipped,
            "failed": r.failed,
            "truncated": r.truncated,
        },
        "delivered": d.delivered,
        "deduplicated": d.deduplicated,
        "retried": d.retried,
        "dead_lettered": d.dead_lettered,
        "pending": 0 if stats is None else stats.pending,
        "dead_letter": 0 if stats is None else stats.dead_letter,
        "circuit": report.circuit,
        "last_error": report.last_error,
    }


def sync_lines(view: dict[str, object]) -> list[str]:
    """`sync` for a person."""
    lines = [
        f"delivered {view['delivered']} (already present: {view['deduplicated']}), "
        f"retrying {view['retried']}, dead-lettered {view['dead_lettered']}",
        f"outbox: {view['pending']} pending, {view['dead_letter']} dead letters; "
        f"circuit {view['circuit']}",
    ]
    if view["last_error"]:
        lines.append(f"  last error: {view['last_error']}")
    return lines
