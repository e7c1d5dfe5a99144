"""`artmem status`: content-free counts. Never titles, ids, paths, project names or keys."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from datetime import UTC, datetime

import msgspec
from msgspec import UNSET, UnsetType

from cards.errors import ArtifactError
from cards.results import StatusResult
from cas import LocalCatalog
from fsedge import read_small
from harness_plugin import _views
from harness_plugin._progress import table_lines
from harness_plugin._stores import build_store
from harness_plugin.config import Config


def status_view(config: Config, environ: Mapping[str, str]) -> StatusResult:
    """Counts per project key, the outbox and the worker; works even with Honcho unreachable.

    Card counts come from each project's persisted catalog, which parses only card files that
    changed since it was saved.
    """
    projects = []
    for project in config.projects:
        store = build_store(config, project.id)
        catalog = LocalCatalog.open(store, config.state_root)
        usage = store.usage()
        projects.append(
            {
                "project_key": store.layout.key,
                "cards": catalog.cards,
                "invalid_cards": catalog.skipped,
                "objects": usage.objects,
                "bytes": usage.bytes,
                "index_states": catalog.index_states(),
            }
        )
    limits = config.effective_limits
    capabilities: dict[str, object] | UnsetType = UNSET
    probe = getattr(store, "capabilities", None) if config.projects else None
    if probe is not None:  # a bucket: what its service does (probed once, then remembered)
        try:
            capabilities = probe().view()
        except ArtifactError as exc:  # e.g. credentials that may read only: probing writes
            capabilities = {"unknown": str(exc.code)}
    return StatusResult(
        integrity=str(config.integrity),
        # The backend only: tools return this view too, and a bucket's name is the operator's.
        storage=config.storage.backend,
        honcho=_honcho_view(config, environ),
        limits={
            "artifact_bytes": limits.artifact_bytes,
            "project_bytes": limits.project_bytes,
            "cards_per_project": limits.cards_per_project,
        },
        projects=projects,
        retention=config.retention.view(),
        bucket_capabilities=capabilities,
    )


def _capability_line(caps: Mapping[str, object]) -> str:
    if "unknown" in caps:
        return f"bucket: capabilities unknown ({caps['unknown']}); they are probed on a write"

    def said(name: str, yes: str, no: str) -> str:
        return yes if caps[name] else no

    replace = (
        f"conditional replace ({caps['etag_form']} ETag)"
        if caps["replace_if_version"]
        else "NO conditional replace (card updates refused)"
    )
    return ", ".join(
        (
            "bucket: " + said("create_if_absent", "conditional create", "NO conditional create"),
            said(
                "complete_if_absent", "conditional completion", "unconditional completion (claimed)"
            ),
            replace,
            said("checksums_enforced", "checksums enforced", "checksums not enforced"),
        )
    )


_SEARCH_LINES = {
    "semantic": "semantic and lexical (the server has embeddings)",
    "lexical": "lexical only (no embeddings: recall finds what shares a word with the question)",
    "unknown": "not seen yet (recall shows it after its first searches)",
}


def _honcho_view(config: Config, environ: Mapping[str, str]) -> dict[str, object]:
    honcho = config.honcho
    view: dict[str, object] = {"enabled": honcho.enabled}
    if not honcho.enabled:
        return view
    from indexer import Outbox, read_status  # only with Honcho on: no outbox otherwise

    stats = Outbox(config.state_root).stats()
    oldest = stats.oldest_admitted_at
    age = None if oldest is None else round((datetime.now(UTC) - oldest).total_seconds(), 3)
    worker = read_status(config.state_root) or {}
    view.update(
        {
            "api_key_present": bool(environ.get(honcho.api_key_env)),
            "outbox": {
                "pending": stats.pending,
                "oldest_age_s": age,
                "dead_letter": stats.dead_letter,
                "invalid": stats.invalid,
                "temp_leftovers": stats.temp_leftovers,
            },
            "search": _search_mode(config.state_root),
            "circuit": worker.get("circuit", "closed"),
            "last_error": worker.get("last_error"),
            "worker_generation": worker.get("generation", 0),
        }
    )
    return view


def _search_mode(state_root: str) -> str:
    """What Honcho's search offered as recall last saw it: semantic, lexical or unknown.

    Written by the worker (`harness_plugin.memory._recall_search`); anything else there is unknown.
    """
    path = os.path.join(state_root, "recall", "honcho-search.json")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "unknown"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "unknown"
        mode = msgspec.json.decode(read_small(fd, 4096)).get("search")
    except (OSError, ValueError, AttributeError, ArtifactError):
        return "unknown"
    finally:
        os.close(fd)
    return mode if mode in ("semantic", "lexical") else "unknown"


def status_lines(
    view: StatusResult,
    names: Mapping[str, str] | None = None,
    *,
    terminal: bool = False,
) -> list[str]:
    """Status for a person: settings, then one table row per project.

    `names` maps project keys to the configured project ids, which the operator may see (the
    JSON view, which tools also return, has keys only).
    """
    honcho = view.honcho
    lines = [f"integrity {view.integrity}, storage {view.storage}"]
    if view.bucket_capabilities is not UNSET:
        lines.append(_capability_line(view.bucket_capabilities))
    if honcho["enabled"]:
        outbox = honcho["outbox"]
        assert isinstance(outbox, dict)
        lines.append(
            f"honcho on: outbox {outbox['pending']} pending (oldest {outbox['oldest_age_s']} s), "
            f"{outbox['dead_letter']} dead-lettered; circuit {honcho['circuit']}, "
            f"last error {honcho['last_error'] or 'none'}"
        )
        lines.append(f"  honcho search: {_SEARCH_LINES[str(honcho.get('search', 'unknown'))]}")
        if not honcho["api_key_present"]:
            lines.append("  warning: the Honcho API key variable is unset")
    else:
        lines.append("honcho off")
    retention = view.retention
    if retention:
        lines.append(
            f"retention: gc keeps objects younger than {retention['grace_hours']} h, quarantine "
            f"{retention['quarantine_days']} d, dead letters {retention['dead_letter_days']} d; "
            f"unattended gc {'allowed' if retention['unattended'] else 'refused'}"
        )
    rows = []
    for project in view.projects:
        states = project["index_states"]
        key = str(project["project_key"])
        rows.append(
            [
                (names or {}).get(key, "-"),
                key[:16] + "…",
                str(project["cards"]),
                ", ".join(f"{n} {state}" for state, n in states.items()) or "-",
                str(project["objects"]),
                _views.human_size(project["bytes"]),
                str(project["invalid_cards"] or ""),
            ]
        )
    headers = ["project", "key", "cards", "index states", "objects", "size", "unreadable"]
    lines += ["", *table_lines(headers, rows, terminal=terminal)]
    if any(project["invalid_cards"] for project in view.projects):
        lines.append("unreadable cards: run `artmem fsck`")
    return lines
