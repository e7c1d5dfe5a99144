"""The operator's commands: `fsck`, `sync`, `status`, `serve`, `demo` and `eval`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from cards import InvalidInput
from cards.errors import HonchoDisabled
from harness_plugin import _views
from harness_plugin._progress import progress_for
from harness_plugin._runtime import Runtime
from harness_plugin._status import status_lines, status_view
from harness_plugin._stores import build_store
from harness_plugin.cli._command import EXIT_ERROR, EXIT_OK, Outcome, start
from harness_plugin.config import load_config

if TYPE_CHECKING:
    from cas import CatalogCheck

# -- fsck ---------------------------------------------------------------------------------


def _catalog_line(check: CatalogCheck) -> str:
    differ = len(check.missing) + len(check.extra) + len(check.stale)
    done = " (rebuilt from the cards)" if check.rebuilt or check.repaired else ""
    if not differ:
        return f"search index: {check.indexed} cards, as the card files say{done}"
    fix = "rebuilt from the cards" if check.repaired else "`artmem fsck --repair` rebuilds it"
    return (
        f"search index: {differ} cards differ from their files ({len(check.missing)} missing, "
        f"{len(check.extra)} extra, {len(check.stale)} stale); {fix}"
    )


def fsck(args: argparse.Namespace) -> Outcome:
    from cas import LocalCatalog
    from cas import fsck as fsck_store  # loads the card models: only for fsck
    from indexer import Outbox

    runtime, store = start(args)
    bar = progress_for(sys.stderr, "checking", enabled=not args.json)
    try:
        report = fsck_store(store, repair=args.repair, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    outbox = Outbox(runtime.config.state_root).check(repair=args.repair)
    catalog = LocalCatalog.open(store, runtime.config.state_root).check(repair=args.repair)
    view = _views.fsck_view(report)
    view["catalog"] = {
        "ok": catalog.ok,
        "indexed": catalog.indexed,
        "missing": catalog.missing,
        "extra": catalog.extra,
        "stale": catalog.stale,
        "rebuilt": catalog.rebuilt,
        "repaired": catalog.repaired,
    }
    catalog_ok = catalog.ok or catalog.repaired
    ok = report.ok and outbox.ok and catalog_ok
    # The top-level verdict is the exit status's: the store's, the outbox's and the index's.
    view["ok"] = ok
    view["problems"] = report.problems + outbox.problems + (0 if catalog_ok else 1)
    view["outbox"] = {
        "ok": outbox.ok,
        "valid": outbox.valid,
        "corrupt": outbox.corrupt,
        "moved": outbox.moved,
        "foreign": outbox.foreign,
        "permission_problems": list(outbox.permission_problems),
        "permissions_repaired": outbox.permissions_repaired,
    }
    lines = _views.fsck_lines(view)[:-1]  # the verdict comes last, after the outbox
    lines.append(
        f"outbox: {outbox.valid} valid, {outbox.corrupt} corrupt ({outbox.moved} moved aside), "
        f"{outbox.foreign} unrecognised"
    )
    lines += [f"  permissions: {problem}" for problem in outbox.permission_problems]
    if outbox.permissions_repaired:
        lines.append(f"  permissions: {outbox.permissions_repaired} mode(s) set right")
    lines.append(_catalog_line(catalog))
    lines.append("ok" if ok else f"{view['problems']} problem(s); see above")
    return Outcome(view, lines, EXIT_OK if ok else EXIT_ERROR)


# -- migrate ------------------------------------------------------------------------------


def migrate(args: argparse.Namespace) -> Outcome:
    """Copy the local project store (`artifact_root`) into the configured bucket."""
    from cas import BucketStore, IntegrityMode, ProjectStore
    from cas import migrate as migrate_store

    runtime, bucket = start(args)
    config = runtime.config
    if not isinstance(bucket, BucketStore):
        raise InvalidInput(
            'migrate copies artifact_root into a bucket: set [storage] backend = "s3" (and '
            "its bucket) in the configuration first"
        )
    local = ProjectStore(
        config.artifact_root,
        bucket.project_id,
        limits=config.effective_limits,
        integrity=IntegrityMode.ALWAYS,  # every object proven by a full hash, never a record
        read_only=True,
    )
    bar = progress_for(sys.stderr, "migrating", enabled=not args.json)
    try:
        if bar is not None:
            bar.start(local.usage().bytes)
        report = migrate_store(local, bucket, bar)
    finally:
        if bar is not None:
            bar.close()
    view: dict[str, object] = {
        "ok": report.ok,
        "cards": report.cards,
        "cards_created": report.cards_created,
        "cards_present": report.cards_present,
        "cards_conflicting": report.cards_conflicting,
        "objects_sent": report.objects_sent,
        "objects_present": report.objects_present,
        "bytes_sent": report.bytes_sent,
        "skipped": [{"name": name, "code": code} for name, code in report.skipped],
    }
    lines = [
        f"{report.cards} cards: {report.cards_created} copied, {report.cards_present} already "
        f"there; {report.objects_sent} objects sent ({report.bytes_sent} bytes), "
        f"{report.objects_present} already there",
        *(f"  conflicting card kept as the bucket has it: {e}" for e in report.cards_conflicting),
        *(f"  skipped {name}: {code}" for name, code in report.skipped),
        "ok" if report.ok else "not everything was copied; see above (running again resumes)",
    ]
    return Outcome(view, lines, EXIT_OK if report.ok else EXIT_ERROR)


# -- sync ---------------------------------------------------------------------------------


def sync(args: argparse.Namespace) -> Outcome:
    runtime = Runtime(load_config(args.config))
    if not runtime.config.honcho.enabled:
        raise HonchoDisabled(
            "Honcho indexing is disabled in the configuration ([honcho] enabled = false): "
            "there is nothing to sync; local records, search and resolve need no sync"
        )
    if args.deadline is not None and not 0 < args.deadline <= 3600:
        raise InvalidInput("--deadline must be between 0 and 3600 seconds")
    report = runtime.sync(args.deadline)
    view = _views.sync_view(report, runtime.outbox.stats() if runtime.outbox else None)
    status = EXIT_OK if view["pending"] == 0 else EXIT_ERROR
    return Outcome(view, _views.sync_lines(view), status)


# -- status -------------------------------------------------------------------------------


def status(args: argparse.Namespace) -> Outcome:
    config = load_config(args.config)
    view = status_view(config, os.environ)
    names = {str(build_store(config, p.id).layout.key): p.id for p in config.projects}
    return Outcome(view, status_lines(view, names, terminal=sys.stdout.isatty()))


# -- serve --------------------------------------------------------------------------------


def serve(args: argparse.Namespace) -> Outcome:
    from harness_plugin.worker._serve import serve

    runtime = Runtime(load_config(args.config))
    return Outcome({}, [], serve(runtime, os.environ), silent=True)


# -- demo ---------------------------------------------------------------------------------


def demo(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli._demo import run_demo  # pyarrow loads only for the demo

    def say(line: str) -> None:
        if not args.json:
            print(line, flush=True)

    steps = run_demo(keep=args.keep, say=say, bar_stream=sys.stderr, show_progress=not args.json)
    return Outcome({"steps": steps}, [])


# -- eval ---------------------------------------------------------------------------------


def run_eval(args: argparse.Namespace) -> Outcome:
    from harness_plugin.eval import Report, evaluate, judge, passed, report_lines, write_report

    if args.judge is not None:
        if args.live or args.cases:
            raise InvalidInput("--from judges a written report: it takes no --live or --case")
        report = judge(args.judge)
        status = EXIT_OK if passed(report) else EXIT_ERROR
        return Outcome(report.model_dump(mode="json"), report_lines(report, None), status)
    honcho = None
    if args.live:
        honcho = load_config(args.config).honcho
        if not honcho.enabled:
            raise HonchoDisabled(
                "--live needs [honcho] enabled = true, with base_url and api_key_env, "
                "in the configuration"
            )

    def progress(case: object) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"  {getattr(case, 'case_id', '')} done", file=sys.stderr, flush=True)

    def save(report: Report) -> None:
        if args.report:
            write_report(report, args.report)

    report = evaluate(honcho, args.cases, on_case=progress, on_report=save)
    status = EXIT_OK if passed(report) else EXIT_ERROR
    return Outcome(report.model_dump(mode="json"), report_lines(report, args.report), status)
