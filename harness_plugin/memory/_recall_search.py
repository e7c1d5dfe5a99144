"""Recall's searches: shaped for Honcho, answered within one deadline, fused, and what they show.

Honcho's search differs with and without embeddings (`indexer.shaped_queries` says how), so
recall sends the question as asked and a few punctuation-free queries of its content words at
once, keeps whatever answered by the deadline, and ranks the union here (`indexer.fused_order`).
The answers also show which kind of server it is; the last seen is kept for `artmem status`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime
from typing import Protocol

import msgspec

from cards.redaction import remove_placeholders
from fsedge import atomic_write, make_dirs, make_root, open_dir
from indexer import (
    MemoryHit,
    MemorySearch,
    UserContext,
    fused_order,
    matches_lexically,
    shaped_queries,
)

SEARCH_MODE_FILE = "honcho-search.json"  # under <state_root>/recall/: what the server offered
# Turn markers (`<state_root>/recall/`, one per session) idle this long are removed.
MARKER_TTL_S = 30 * 86_400
MAX_PRUNED = 10_000  # per pass, so one pass stays short


class MemoryReads(Protocol):
    """What recall needs from Honcho (`HonchoMemoryService` provides it)."""

    def user_context(self) -> UserContext:
        """The person's global context."""

    def search_memory(self, project_id: str, query: str, limit: int) -> MemorySearch:
        """Project-scoped conversational hits of the person."""


def submit_searches(
    pool: Executor, service: MemoryReads, project_id: str, question: str, per_query: int
) -> list[tuple[str, Future[MemorySearch]]]:
    """Start the shaped searches for `question` (already bounded and redacted)."""
    # The question as asked, then its words without redaction placeholders ("[redacted:email]").
    queries = [question, *shaped_queries(remove_placeholders(question))[1:]]
    return [(q, pool.submit(service.search_memory, project_id, q, per_query)) for q in queries]


def answered(
    searches: Sequence[tuple[str, Future[MemorySearch]]],
    deadline: float,
    clock: Callable[[], float],
) -> list[tuple[str, MemorySearch]]:
    """The searches that answered by the deadline; an error only if none did.

    Raises:
        FutureTimeout: no search answered in time.
        Exception: every search that answered failed (the first failure).
    """
    found: list[tuple[str, MemorySearch]] = []
    failure: BaseException | None = None
    for query, future in searches:
        try:
            found.append((query, future.result(timeout=max(0.0, deadline - clock()))))
        except FutureTimeout:
            continue
        except Exception as exc:  # judged below: one answer is enough
            failure = failure or exc
    if found:
        return found
    if failure is not None:
        raise failure
    raise FutureTimeout


def served_mode(
    question: str, answers: Sequence[tuple[str, MemorySearch]], per_query: int
) -> str | None:
    """Whether the server ranks by similarity (semantic) or only by words (lexical), if shown.

    A semantic server has no cut-off: a hit that the question does not match lexically shows
    it. A lexical one shows itself when the question, answered with fewer hits than it could
    hold, missed a message that another search found.
    """
    first = next((found for query, found in answers if query == question), None)
    if first is None:
        return None
    if any(not matches_lexically(question, hit.content) for hit in first.hits):
        return "semantic"
    seen = {hit.message_id for hit in first.hits}
    others = {hit.message_id for query, found in answers if query != question for hit in found.hits}
    if len(first.hits) < per_query and others - seen:
        return "lexical"
    return None


def fuse(question: str, answers: Sequence[tuple[str, MemorySearch]]) -> list[MemoryHit]:
    """Every answer's hits, one per message and per text, ranked for `question`."""
    hits: dict[str, MemoryHit] = {}
    ranked: list[list[tuple[str, str]]] = []
    for _, found in answers:
        ranked.append([(hit.message_id, hit.content) for hit in found.hits])
        for hit in found.hits:
            hits.setdefault(hit.message_id, hit)
    kept: list[MemoryHit] = []
    texts: set[str] = set()
    for message_id in fused_order(remove_placeholders(question), ranked):
        hit = hits[message_id]
        if hit.content not in texts:
            texts.add(hit.content)
            kept.append(hit)
    return kept


def save_search_mode(state_root: str, mode: str, when: datetime) -> None:
    """Persist what the server offered, for `artmem status` (`<state_root>/recall/`)."""
    with recall_dir(state_root) as directory:
        data = msgspec.json.encode({"search": mode, "seen_at": when.isoformat()})
        atomic_write(directory, SEARCH_MODE_FILE, data, directory, "recall")


@contextlib.contextmanager
def recall_dir(state_root: str) -> Iterator[int]:
    """`<state_root>/recall/`, created 0700 with any missing parent, open for the block."""
    make_root(state_root)
    root = open_dir(state_root)
    try:
        directory = make_dirs(root, ("recall",))
    finally:
        os.close(root)
    try:
        yield directory
    finally:
        os.close(directory)


def prune_markers(directory: int, older_than: float) -> int:
    """Remove turn markers (and crash-left stages) last written before `older_than`.

    A session idle that long has no turn in flight: forgetting its marker can at worst let a
    turn it resumes recall once more. Returns how many files were removed.
    """
    removed = 0
    for name in _old_markers(directory, older_than):
        if removed >= MAX_PRUNED:
            break
        try:
            os.unlink(name, dir_fd=directory)
            removed += 1
        except FileNotFoundError:
            continue  # another worker pruned it first
    return removed


def count_markers(directory: int, older_than: float) -> int:
    """How many markers `prune_markers` would consider (a dry run; nothing removed)."""
    return sum(1 for _ in _old_markers(directory, older_than))


def _old_markers(directory: int, older_than: float) -> Iterator[str]:
    """The marker files last changed before `older_than`; one removed meanwhile is skipped."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.endswith((".turn", ".tmp")):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # another worker pruned it first
            if stat.S_ISREG(st.st_mode) and st.st_mtime < older_than:
                yield entry.name
