"""The experiment commands: `record`, `resolve`, `show`, `slice`, `search`, `list`, `export`.

Loaded only when one of them runs (`artmem --help` imports none of this). None of them imports
pydantic (the cards and their metadata are msgspec structs).
"""

from __future__ import annotations

import argparse
import os
import sys

from cards import InvalidInput, SourceMissing, excerpt, parse_session_id
from cas import Provenance
from harness_plugin import _shortids, _views
from harness_plugin._lineage import (
    carry_freshness,
    check_parents,
    lineage_lines,
    lineage_verdict,
    lineage_view,
)
from harness_plugin._progress import progress_for
from harness_plugin.cli._command import Outcome, start


def record(args: argparse.Namespace) -> Outcome:
    import msgspec

    from cards import parse_metadata
    from harness_plugin.cli._record_fields import described, table_read_field

    runtime, store = start(args)
    fields, defaults = described(args)
    given, read = table_read_field(args)
    if given:
        fields["table_read"] = read
    if args.media_type is not None:
        fields["media_type"] = args.media_type
    for name in ("tags", "columns"):  # omitted: unset, so a re-record keeps the card's values
        values = getattr(args, name)
        if values is not None:
            fields[name] = [value for value in values if value != ""]
    if args.parents is not None:  # omitted: a re-record keeps the card's parents
        fields["derived_from"] = check_parents(store, args.parents, short=True)
    metadata = parse_metadata(fields)
    metadata = msgspec.structs.replace(metadata, defaults=defaults)
    bar = progress_for(sys.stderr, "recording", enabled=not args.json)
    session = parse_session_id(args.session)
    try:
        recorded = store.record(
            runtime.config.rlm_root, Provenance(session_id=session), metadata, args.path, bar
        )
    except SourceMissing as exc:
        exports = os.path.join(runtime.config.rlm_root, "sessions", session, "exports")
        exc.message += f" (session {excerpt(session)}: expected the file in {exports}/)"
        raise
    finally:
        if bar is not None:
            bar.close()
    admission = runtime.admit(recorded.card, new_revision=recorded.new_revision)
    view = _views.record_result(recorded, honcho_queued=admission.queued, state=admission.state)
    return Outcome(view, _views.record_lines(view))


def resolve(args: argparse.Namespace) -> Outcome:
    _, store = start(args)
    bar = progress_for(sys.stderr, "verifying", enabled=not args.json)
    try:
        resolved = store.resolve(args.experiment_id, args.current_source_version, bar)
    finally:
        if bar is not None:
            bar.close()
    verdict = lineage_verdict(store, resolved.card, args.current_source_version)
    view = _views.resolve_result(resolved, verdict)
    return Outcome(view, _views.resolve_lines(view))


def show_command(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli._show import show, show_lines  # pyarrow loads only here

    runtime, store = start(args)
    limits = runtime.config.slice.resolve()
    view = show(store, args.experiment_id, args.current_source_version, limits)
    carry_freshness(view, store, store.load_card(args.experiment_id), args.current_source_version)
    return Outcome(view, show_lines(view))


def lineage(args: argparse.Namespace) -> Outcome:
    _, store = start(args)
    view = lineage_view(store, args.experiment_id)
    return Outcome(view, lineage_lines(view))


def diff(args: argparse.Namespace) -> Outcome:
    from harness_plugin._diff import diff_lines, diff_view

    runtime, store = start(args)
    first = _shortids.expand(store, args.first)
    second = _shortids.expand(store, args.second)
    limits = runtime.config.slice.resolve()
    view = diff_view(store, first, second, limits, rows=args.rows, key=args.key)
    return Outcome(view, diff_lines(view))


def ui(args: argparse.Namespace) -> Outcome:
    from harness_plugin.ui import serve_ui

    runtime, store = start(args)
    serve_ui(runtime, store, port=args.port, open_browser=args.open, out=sys.stdout)
    return Outcome({}, [], silent=True)


def slice_command(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli._table_commands import slice_view  # pyarrow loads only here

    runtime, store = start(args)
    limits = runtime.config.slice.resolve()
    outside = runtime.config.managed_roots
    view, lines = slice_view(store, args, limits, sys.stdout, sys.stderr, outside=outside)
    return Outcome(view, lines)


def search(args: argparse.Namespace) -> Outcome:
    from cas import LocalCatalog

    runtime, store = start(args)
    bound = store.limits.search_results
    limit = bound if args.limit is None else args.limit
    if not 1 <= limit <= bound:
        raise InvalidInput(f"--limit must be between 1 and {bound}")
    catalog = LocalCatalog.open(store, runtime.config.state_root)  # parses changed cards only
    hits = [
        _views.local_hit(hit, available_locally=store.has_object(hit.card.artifact.artifact_id))
        for hit in catalog.search(args.query, limit)
    ]
    view = {"hits": hits, "skipped_cards": catalog.skipped}
    return Outcome(view, _views.search_lines(hits, catalog.skipped))


def list_experiments(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _listing

    _, store = start(args)
    wanted = _views.ListFilter(
        tags=tuple(args.tags),
        source=args.source,
        since=None if args.since is None else _views.parse_since(args.since),
        media_type=args.media_type,
    )
    view = _listing.list_view(store, wanted)
    return Outcome(view, _listing.list_lines(view))


def export(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _listing

    runtime, store = start(args)
    view = _listing.export(
        store, args.experiment_id, args.dest, force=args.force, outside=runtime.config.managed_roots
    )
    return Outcome(view, _listing.export_lines(view))
