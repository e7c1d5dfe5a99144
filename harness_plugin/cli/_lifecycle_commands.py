"""The operator's lifecycle commands: `edit`, `rm` and `gc` (never tools, never the kernel).

Each works on the project of the working directory (or `--project`) through the one `Store`
(`cas.edit_card`, `cas.remove_experiments`, `cas.collect_garbage`); what reaches Honcho goes
through the outbox (`indexer.retire`, `Runtime.admit`).
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

from cards import InvalidInput
from cards.errors import IdentityField, UnattendedRefused
from harness_plugin import _shortids
from harness_plugin._progress import progress_for
from harness_plugin.cli._command import Outcome, start
from harness_plugin.config._retention import DAY_S

if TYPE_CHECKING:
    from cas import GcReport, Removed
    from harness_plugin._runtime import Runtime

IDENTITY_OPTIONS = ("query_fingerprint", "source_version", "artifact")
SHOWN_ITEMS = 20
HONCHO_REMAINS = (
    "Honcho keeps the experiment's earlier card message (it has no message delete): a "
    "retirement message is queued (`artmem sync` delivers it) and artmem's searches drop the "
    "experiment; to delete it from Honcho for good, delete the project's cards session there "
    "(README: Retention, backup and deletion)"
)

# -- edit -----------------------------------------------------------------------------------


def edit(args: argparse.Namespace) -> Outcome:
    """Change a card's descriptive fields without the original file, conditionally."""
    from cas import CardEdit, card_revision, edit_card

    for name in IDENTITY_OPTIONS:
        if getattr(args, name, None) is not None:
            flag = "--" + name.replace("_", "-")
            raise IdentityField(
                f"{flag} is part of the experiment's identity (its id is made from it): that "
                "is a new experiment, not an edit; record the file again with the new value "
                "(`artmem record`), and `artmem rm` the old one if it is junk"
            )
    change = CardEdit(
        title=args.title,
        summary=args.summary,
        source=args.source,
        add_tags=tuple(args.add_tags),
        remove_tags=tuple(args.remove_tags),
        columns=None if args.columns is None else tuple(c for c in args.columns if c != ""),
    )
    if change.empty:
        raise InvalidInput(
            "nothing to change: give --title, --summary, --source, --add-tag, --remove-tag or "
            "--column"
        )
    runtime, store = start(args)
    revision = args.if_revision or card_revision(store.load_card(args.experiment_id))
    edited = edit_card(store, args.experiment_id, change, if_revision=revision)
    queued, state = False, str(edited.card.index.state)
    if edited.changed:
        admission = runtime.admit(edited.card, new_revision=True)
        queued, state = admission.queued, str(admission.state)
    view: dict[str, object] = {
        "experiment_id": edited.card.experiment_id,
        "changed": list(edited.changed),
        "previous_revision": edited.before,
        "revision": edited.revision,
        "honcho_queued": queued,
        "index_state": state,
    }
    if not edited.changed:
        return Outcome(view, [f"{edited.card.experiment_id}: unchanged (it already says that)"])
    lines = [
        f"edited {edited.card.experiment_id}: {', '.join(edited.changed)}",
        f"  revision {edited.revision[:12]} (was {edited.before[:12]})",
        "  queued for the Honcho index" if queued else f"  Honcho index: {state}",
    ]
    return Outcome(view, lines)


# -- rm -------------------------------------------------------------------------------------


def remove(args: argparse.Namespace) -> Outcome:
    """Remove experiments' cards, audited; retire their Honcho copies through the outbox."""
    from cas import remove_experiments
    from fsedge import utc_now

    runtime, store = start(args)
    ids = [_shortids.expand(store, text) for text in args.experiment_ids]
    now = utc_now()
    removed = remove_experiments(store, ids, who=_who(), now=now)
    retired = _retire(runtime, store.project_id, removed, now)
    view: dict[str, object] = {
        "removed": [
            {
                "experiment_id": r.experiment_id,
                "artifact_id": r.artifact_id,
                "bytes": r.bytes,
                "object_shared": r.object_shared,
                "audit_key": r.audit_key,
            }
            for r in removed
        ],
        "honcho_retirement_queued": retired,
        "honcho_remains": HONCHO_REMAINS if runtime.config.honcho.enabled else None,
    }
    lines = [_removed_line(r) for r in removed]
    if runtime.config.honcho.enabled:
        lines.append(HONCHO_REMAINS)
    return Outcome(view, lines)


def _who() -> str:
    """The operator, as the audit line names them: user and host, nothing else."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"[:200]


def _retire(runtime: Runtime, project_id: str, removed: list[Removed], now: object) -> bool:
    if runtime.outbox is None:
        return False
    from datetime import datetime

    from indexer import retire

    assert isinstance(now, datetime)
    for r in removed:
        retire(
            runtime.outbox, runtime.config.honcho.assistant_peer_id, project_id=project_id,
            experiment_id=r.experiment_id, artifact_id=r.artifact_id, retired_at=now,
        )  # fmt: skip
    return True


def _removed_line(r: Removed) -> str:
    if r.object_shared:
        kept = "its bytes stay: another card uses them"
    else:
        kept = f"its {r.bytes} bytes stay until `artmem gc --apply` (no card uses them now)"
    return f"removed {r.experiment_id}; {kept}; audited as {r.audit_key}"


# -- gc -------------------------------------------------------------------------------------


def gc(args: argparse.Namespace) -> Outcome:
    """List (dry run) or reclaim what no card needs and what is kept past its retention."""
    from cas import BucketStore, collect_bucket_garbage, collect_garbage

    runtime, store = start(args)
    retention = runtime.config.retention
    if args.apply and not sys.stdin.isatty() and not retention.unattended:
        raise UnattendedRefused(
            "gc --apply deletes, and no one is at a terminal: run it from a terminal, or set "
            "[retention] unattended = true in the configuration to let it run alone"
        )
    bar = progress_for(sys.stderr, "collecting", enabled=not args.json)
    try:
        if isinstance(store, BucketStore):
            report = collect_bucket_garbage(
                store, retention.policy(), apply=args.apply, progress=bar
            )
        else:
            report = collect_garbage(store, retention.policy(), apply=args.apply, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    state = _state_garbage(runtime, apply=args.apply)
    view = _gc_view(report, state)
    return Outcome(view, _gc_lines(view, report))


def _state_garbage(runtime: Runtime, *, apply: bool) -> dict[str, int]:
    """Dead letters past their retention and idle recall markers, under the state root."""
    config = runtime.config
    now = time.time()
    found = {"dead_letters": 0, "dead_letter_bytes": 0, "recall_markers": 0}
    if os.path.isdir(os.path.join(config.state_root, "outbox")):
        from indexer import Outbox

        older = now - config.retention.dead_letter_days * DAY_S
        letters = Outbox(config.state_root).expired_dead_letters(older, remove=apply)
        found["dead_letters"] = len(letters)
        found["dead_letter_bytes"] = sum(size for _, size in letters)
    if os.path.isdir(os.path.join(config.state_root, "recall")):
        found["recall_markers"] = _recall_markers(config.state_root, now, apply=apply)
    return found


def _recall_markers(state_root: str, now: float, *, apply: bool) -> int:
    from harness_plugin.memory._recall_search import (
        MARKER_TTL_S,
        count_markers,
        prune_markers,
        recall_dir,
    )

    with recall_dir(state_root) as directory:
        if apply:
            return prune_markers(directory, now - MARKER_TTL_S)
        return count_markers(directory, now - MARKER_TTL_S)


def _gc_view(report: GcReport, state: dict[str, int]) -> dict[str, object]:
    kinds: dict[str, dict[str, int]] = {}
    for item in report.reclaimed:
        kind = kinds.setdefault(item.kind, {"count": 0, "bytes": 0})
        kind["count"] += 1
        kind["bytes"] += item.bytes
    return {
        "applied": report.applied,
        "bytes": report.bytes + state["dead_letter_bytes"],
        "kinds": kinds,
        "reclaimed": [{"kind": i.kind, "key": i.key, "bytes": i.bytes} for i in report.reclaimed],
        "referenced_objects": report.referenced,
        "young_objects_kept": report.young,
        "unreadable_cards": report.unreadable_cards,
        "restored": report.restored,
        **state,
    }


def _gc_lines(view: dict[str, object], report: GcReport) -> list[str]:
    verb = "reclaimed" if report.applied else "would reclaim"
    kinds = view["kinds"]
    assert isinstance(kinds, dict)
    lines = [f"{verb} {k['count']} {kind} file(s), {k['bytes']} bytes" for kind, k in kinds.items()]
    lines += [f"  {item.kind} {item.key}" for item in report.reclaimed[:SHOWN_ITEMS]]
    if len(report.reclaimed) > SHOWN_ITEMS:
        lines.append(f"  … and {len(report.reclaimed) - SHOWN_ITEMS} more (--json lists all)")
    lines.append(
        f"{verb} {view['dead_letters']} dead letter(s) past retention and "
        f"{view['recall_markers']} idle recall marker(s)"
    )
    lines.append(
        f"kept: {report.referenced} object(s) cards use, {report.young} unused but younger "
        "than the grace period"
    )
    if report.unreadable_cards:
        lines.append(
            f"{report.unreadable_cards} card(s) cannot be read, so no object was collected: "
            "run `artmem fsck`"
        )
    if report.restored:
        lines.append(f"{report.restored} object(s) a record adopted meanwhile were put back")
    total = view["bytes"]
    if report.applied:
        lines.append(f"freed {total} bytes")
    else:
        lines.append(f"dry run: nothing was deleted; `artmem gc --apply` frees {total} bytes")
    return lines
