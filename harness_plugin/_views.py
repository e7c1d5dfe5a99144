"""How results look: `cards.results` structs built from store values, and lines for people.

The CLI prints these structs with `--json`, the worker sends them as the tools' results: one
definition for both, and the CLI loads no pydantic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from cards.errors import InvalidInput, excerpt
from cards.policy import HitSource
from cards.results import ArtifactView, CardView, RecordResult, ResolveResult, SearchHit

if TYPE_CHECKING:
    from cards import ExperimentCardV1, IndexState
    from cards.lineage import DerivedVerdict
    from cas import FsckReport, Recorded, Resolved
    from cas import SearchHit as CatalogHit
    from harness_plugin._runtime import SyncReport
    from indexer import OutboxStats

_SUMMARY_PREVIEW_CHARS = 400
UNAVAILABLE_HINT = (
    "the bytes are missing or were quarantined by `fsck --repair`; record the original file "
    "again to restore them"
)


def card_view(card: ExperimentCardV1) -> CardView:
    """The display fields of a card (card text is untrusted data, shown as data).

    Every field of `CardView` is the card's field of the same name.
    """
    return msgspec.convert(card, CardView, from_attributes=True)


def artifact_view(card: ExperimentCardV1) -> ArtifactView:
    """The artifact reference of a card, with its chunk manifest's digest."""
    artifact = card.artifact
    return ArtifactView(
        artifact_id=artifact.artifact_id,
        sha256=artifact.sha256,
        bytes=artifact.bytes,
        media_type=artifact.media_type,
        created_at=artifact.created_at,
        chunk_manifest_sha256=card.chunk_manifest_sha256,
    )


def record_result(
    recorded: Recorded, *, honcho_queued: bool, state: IndexState | None = None
) -> RecordResult:
    """What `record` reports (Honcho spec §31.2): local durability apart from remote queueing."""
    card = recorded.card
    return RecordResult(
        experiment_id=card.experiment_id,
        artifact_id=card.artifact.artifact_id,
        sha256=card.artifact.sha256,
        bytes=card.artifact.bytes,
        deduplicated=recorded.deduplicated,
        local_saved=True,
        honcho_queued=honcho_queued,
        index_state=state or card.index.state,
        warnings=list(recorded.warnings),
        changed=list(recorded.changed),
    )


def resolve_result(resolved: Resolved, lineage: DerivedVerdict | None = None) -> ResolveResult:
    """What `resolve` reports (Honcho spec §31.3): the path only after verification.

    `lineage` is the freshness carried down the card's ancestry, when it has parents.
    """
    card = resolved.card
    return ResolveResult(
        experiment_id=card.experiment_id,
        path=resolved.path,
        chunk_manifest_path=resolved.manifest_path,
        artifact=artifact_view(card),
        card=card_view(card),
        freshness=resolved.freshness if lineage is None else lineage.freshness,
        verified_at=resolved.verified_at,
        warnings=[*resolved.warnings, *(lineage.warnings if lineage else ())],
        derived_from=list(card.derived_from),
        stale_ancestors=list(lineage.culprits) if lineage else [],
    )


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
) -> SearchHit:
    """One search hit: a local card when there is one, else Honcho's text."""
    summary = card.summary if card is not None else remote_text
    return SearchHit(
        experiment_id=experiment_id,
        artifact_id=artifact_id,
        title=card.title if card is not None else None,
        summary=None if summary is None else _preview(summary),
        source=card.source if card is not None else None,
        source_version=card.source_version if card is not None else None,
        tags=list(card.tags) if card is not None else [],
        score=round(score, 4),
        exact=list(exact),
        origin=source,
        index_state=str(card.index.state) if card is not None else "unknown",
        available_locally=available_locally,
        created_at=card.created_at if card is not None else None,
        updated_at=card.updated_at if card is not None else None,
    )


def local_hit(hit: CatalogHit, *, available_locally: bool = True) -> SearchHit:
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


def record_lines(view: RecordResult) -> list[str]:
    """`record` for a person."""
    verb = "already stored (deduplicated)" if view.deduplicated else "stored"
    lines = [
        f"recorded {view.experiment_id}",
        f"  artifact  {view.artifact_id}  {human_size(view.bytes)}, {verb}",
        f"  index     {view.index_state} (honcho queued: {_yes(view.honcho_queued)})",
    ]
    if view.changed:
        lines.append(f"  updated   {', '.join(view.changed)}")
    return lines + _warnings(view.warnings)


def resolve_lines(view: ResolveResult) -> list[str]:
    """`resolve` for a person."""
    card, artifact = view.card, view.artifact
    lines = [
        f"{card.title}",
        f"  experiment  {view.experiment_id}",
        f"  path        {view.path}",
        f"  bytes       {human_size(artifact.bytes)} (size and SHA-256 verified)",
        f"  sha256      {artifact.sha256}",
        f"  source      {card.source} @ {card.source_version}",
        f"  freshness   {view.freshness}",
    ]
    return lines + _warnings(view.warnings)


def search_lines(hits: list[SearchHit], skipped: int) -> list[str]:
    """`search` for a person; card text is quoted as data."""
    if not hits:
        lines = ["no matching experiment cards"]
    else:
        lines = []
        for n, hit in enumerate(hits, 1):
            how = "exact: " + ", ".join(hit.exact) if hit.exact else "lexical"
            lines.append(f"{n:>2}. {hit.title!r}  [{how}, score {hit.score}]")
            lines.append(f"    {hit.experiment_id}  {hit.source} @ {hit.source_version}")
            if not hit.available_locally:
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


def _warnings(warnings: Sequence[str]) -> list[str]:
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


@dataclass(frozen=True, slots=True)
class ListFilter:
    """Which experiments `list` and the catalog page show: every given condition must hold.

    Tags match by casefold, as search's exact tag matches do.
    """

    tags: tuple[str, ...] = ()
    source: str | None = None
    since: datetime | None = None
    media_type: str | None = None

    def admits(self, card: ExperimentCardV1) -> bool:
        """Whether `card` meets every condition."""
        return (
            (not self.tags or _folded(self.tags) <= _folded(card.tags))
            and (self.source is None or card.source == self.source)
            and (self.since is None or card.created_at >= self.since)
            and (self.media_type is None or card.artifact.media_type == self.media_type)
        )


def _folded(tags: Sequence[str]) -> set[str]:
    return {tag.casefold() for tag in tags}


def parse_since(text: str) -> datetime:
    """`YYYY-MM-DD` as the start of that day in UTC.

    Raises:
        InvalidInput: `text` is not a calendar date in that form.
    """
    try:
        day = datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise InvalidInput(f"since must be a date YYYY-MM-DD, got {excerpt(text)}") from None
    return day.replace(tzinfo=UTC)
