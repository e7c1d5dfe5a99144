"""Hybrid `memory_search` (Honcho spec §30.1, §31.4): local cards and Honcho card search, merged.

The remote search starts first, in a worker thread, and the local search runs meanwhile; each
has its own deadline, and a slow, failing or disabled Honcho never hides local results. Merge
order is fixed: exact local matches, then cards both sides found (local order), then local
lexical matches, then remote-only cards (Honcho's order); duplicates collapse by experiment id.
Every hit is labelled as untrusted data, with where it came from and whether the exact bytes are
here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from cards import ArtifactError, ExperimentCardV1
from cards.policy import HitSource
from cards.results import RemoteStatus
from cas import SearchHit, Store, retired_among
from harness_plugin._catalogs import LiveCatalog
from indexer import CardSearch, RemoteCardHit

RemoteSearch = Callable[[str, int], CardSearch]
MAX_REMOTE_TEXT_CHARS = 400


@dataclass(frozen=True, slots=True)
class Hit:
    """One merged hit; `card` is the local card when this project has it."""

    experiment_id: str
    artifact_id: str
    source: HitSource
    card: ExperimentCardV1 | None
    score: float
    exact: tuple[str, ...]
    remote_text: str | None
    available_locally: bool


@dataclass
class SearchOutcome:
    """Merged hits and content-free facts about how each side went."""

    hits: list[Hit]
    local_ms: float
    remote_status: RemoteStatus
    remote_error: str | None = None
    remote_dropped: int = 0
    skipped_cards: int = 0
    notes: list[str] = field(default_factory=list)


def hybrid_search(
    live: LiveCatalog,
    query: str,
    limit: int,
    *,
    remote: RemoteSearch | None,
    pool: Executor,
    remote_deadline_s: float,
) -> SearchOutcome:
    """Search local cards and (if configured) Honcho concurrently, and merge the results.

    Raises:
        InvalidInput: the query or limit is invalid (checked by the local catalog first).
    """
    future = pool.submit(remote, query, limit) if remote is not None else None
    started = time.perf_counter()
    local = live.search(query, limit)
    local_ms = (time.perf_counter() - started) * 1e3
    outcome = SearchOutcome([], local_ms, RemoteStatus.DISABLED, skipped_cards=live.skipped)
    found = CardSearch(hits=[])
    if future is not None:
        found = _wait(future, remote_deadline_s, outcome)
    remote_hits = _unretired(found.hits, local, live.store, outcome)
    outcome.hits = _merge(local, remote_hits, live, limit)
    return outcome


def _wait(future: Future[CardSearch], deadline_s: float, outcome: SearchOutcome) -> CardSearch:
    try:
        result = future.result(timeout=deadline_s)
    except FutureTimeout:
        future.cancel()
        outcome.remote_status = RemoteStatus.TIMEOUT
        return CardSearch(hits=[])
    except ArtifactError as exc:
        outcome.remote_status, outcome.remote_error = RemoteStatus.ERROR, str(exc.code)
        return CardSearch(hits=[])
    outcome.remote_status = RemoteStatus.OK
    outcome.remote_dropped = result.dropped
    return result


def _unretired(
    remote: list[RemoteCardHit], local: list[SearchHit], store: Store, outcome: SearchOutcome
) -> list[RemoteCardHit]:
    """Honcho's hits less those of experiments an operator removed (`artmem rm`).

    Honcho keeps a removed experiment's card message (it has no delete); the store's
    retirement marker says it is gone, unless the experiment was recorded again since.
    """
    local_ids = {h.card.experiment_id for h in local}
    asked = [h.experiment_id for h in remote if h.experiment_id not in local_ids]
    retired = retired_among(store, asked) if asked else set()
    if not retired:
        return remote
    outcome.remote_dropped += sum(1 for h in remote if h.experiment_id in retired)
    return [h for h in remote if h.experiment_id not in retired]


def _merge(
    local: list[SearchHit], remote: list[RemoteCardHit], live: LiveCatalog, limit: int
) -> list[Hit]:
    remote_ids = {h.experiment_id for h in remote}
    local_ids = {h.card.experiment_id for h in local}
    exact = [h for h in local if h.exact]
    lexical = [h for h in local if not h.exact]
    both = [h for h in lexical if h.card.experiment_id in remote_ids]
    local_only = [h for h in lexical if h.card.experiment_id not in remote_ids]
    ordered = [_local(h, live.store, remote_ids) for h in (*exact, *both, *local_only)]
    ordered += [_remote(h, live) for h in remote if h.experiment_id not in local_ids]
    merged: dict[str, Hit] = {}
    for hit in ordered:
        merged.setdefault(hit.experiment_id, hit)
    return list(merged.values())[:limit]


def _local(hit: SearchHit, store: Store, remote_ids: set[str]) -> Hit:
    card = hit.card
    return Hit(
        experiment_id=card.experiment_id,
        artifact_id=card.artifact.artifact_id,
        source=HitSource.BOTH if card.experiment_id in remote_ids else HitSource.LOCAL,
        card=card,
        score=hit.score,
        exact=hit.exact,
        remote_text=None,
        available_locally=store.has_object(card.typed_artifact_id),
    )


def _remote(hit: RemoteCardHit, live: LiveCatalog) -> Hit:
    card = live.get(hit.experiment_id)
    if card is not None and card.artifact.artifact_id != hit.artifact_id:
        card = None  # the remote card disagrees with ours: show neither as ours
    return Hit(
        experiment_id=hit.experiment_id,
        artifact_id=hit.artifact_id,
        source=HitSource.HONCHO,
        card=card,
        score=0.0,
        exact=(),
        remote_text=hit.content[:MAX_REMOTE_TEXT_CHARS],
        available_locally=card is not None and live.store.has_object(card.typed_artifact_id),
    )
