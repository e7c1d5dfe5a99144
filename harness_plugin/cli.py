"""The `artmem` command line: the host side for an operator at a terminal or a script."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO

import orjson

from cards import (
    ArtifactError,
    InvalidInput,
    ObjectMissing,
    SourceMissing,
    excerpt,
    parse_metadata,
    parse_session_id,
)
from cas import Catalog, Provenance
from harness_plugin import _listing, _views
from harness_plugin import _operator_commands as ops
from harness_plugin._command import EXIT_ERROR, EXIT_USAGE, Outcome, start
from harness_plugin._progress import progress_for

EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a reader that closed early (SIGPIPE)


class UsageError(InvalidInput):
    """The command line does not parse (an unknown option, a bad choice or number)."""

    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class _Parser(argparse.ArgumentParser):
    """An argparse parser that raises instead of exiting, so `--json` can report the error."""

    def error(self, message: str) -> NoReturn:
        """Raise the parse error as a typed error (argparse would print usage and exit 2).

        argparse quotes the offending value whole (with `repr`): a long one is cut short.
        """
        message = _LONG_QUOTED.sub(lambda m: f"{m.group(1)}…'", message)
        raise UsageError(f"{self.prog}: {message}", self.format_usage())


_LONG_QUOTED = re.compile(r"('(?:[^'\\]|\\.){60})(?:[^'\\]|\\.)+'")  # as cards.excerpt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except BrokenPipeError:
        # A reader such as `head` closed the pipe: stop quietly, as Unix tools do, and keep the
        # interpreter's final flush from reporting the same error again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _main(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        as_json = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
        if not as_json:
            sys.stderr.write(exc.usage)
        _fail(as_json, exc)
        return EXIT_USAGE
    if not hasattr(args, "run"):
        if args.json:
            _fail(True, UsageError("no command given; see `artmem --help`"))
        else:
            parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        outcome: Outcome = args.run(args)
    except ObjectMissing as exc:
        exc.message += f"; {_views.UNAVAILABLE_HINT}"
        return _fail(args.json, exc)
    except ArtifactError as exc:
        return _fail(args.json, exc)
    except KeyboardInterrupt:
        print("artmem: interrupted", file=sys.stderr)
        return 130
    if not outcome.silent:
        _emit(outcome, as_json=args.json, out=sys.stdout)
    return outcome.status


def _fail(as_json: bool, exc: ArtifactError) -> int:
    if as_json:
        sys.stdout.write(orjson.dumps({"error": exc.to_dict()}).decode() + "\n")
    else:
        print(f"artmem: error [{exc.code}]: {exc.to_dict()['message']}", file=sys.stderr)
    return EXIT_ERROR


def _emit(outcome: Outcome, *, as_json: bool, out: TextIO) -> None:
    if as_json:
        out.write(orjson.dumps(outcome.view, option=orjson.OPT_SORT_KEYS).decode() + "\n")
    else:
        out.write("".join(line + "\n" for line in outcome.lines))


def _common(*, in_subcommand: bool) -> _Parser:
    # Options may come before or after the command; in the subcommand they must not reset a
    # value given before it, hence SUPPRESS there.
    default = argparse.SUPPRESS if in_subcommand else None
    common = _Parser(add_help=False)
    common.add_argument(
        "--config", default=default, help="configuration file (default: $ARTMEM_CONFIG)"
    )
    common.add_argument(
        "--project", default=default, help="project id (default: from the working directory)"
    )
    common.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if in_subcommand else False,
        help="print JSON for scripts",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="artmem",
        description="A project-scoped store for exact experimental results.",
        parents=[_common(in_subcommand=False)],
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    sub_common = _common(in_subcommand=True)
    for name, (summary, configure, run) in _COMMANDS.items():
        sub = commands.add_parser(
            name,
            aliases=_ALIASES.get(name, []),
            help=summary,
            description=summary,
            parents=[sub_common],
        )
        configure(sub)
        sub.set_defaults(run=run)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("artmem")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


# -- record -------------------------------------------------------------------------------


def _record_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", required=True, help="the harness session that exported the file")
    p.add_argument("path", help="file in <rlm_root>/sessions/SESSION/exports/ (or relative to it)")
    p.add_argument("--title", required=True, help="one line naming the result")
    p.add_argument("--summary", required=True, help="what the result holds and how it was made")
    p.add_argument(
        "--query-fingerprint",
        required=True,
        help="64 lowercase hex characters: SHA-256 of a stable description of the query",
    )
    p.add_argument("--source", required=True, help="where the data came from")
    p.add_argument("--source-version", required=True, help="dataset version, or 'unknown'")
    p.add_argument(
        "--media-type",
        help="e.g. text/csv (default: detected from the content, Parquet and Arrow for certain; "
        "a re-record keeps the card's type)",
    )
    p.add_argument(
        "--tag",
        action="append",
        dest="tags",
        metavar="TAG",
        help="a tag; repeat for more (a re-record without --tag keeps the tags; --tag '' clears)",
    )
    p.add_argument(
        "--column",
        action="append",
        dest="columns",
        metavar="COLUMN",
        help="a column name; repeat for more (omitted on a re-record: kept; --column '' clears)",
    )


def _record(args: argparse.Namespace) -> Outcome:
    runtime, store = start(args)
    fields: dict[str, object] = {
        "title": args.title,
        "summary": args.summary,
        "query_fingerprint": args.query_fingerprint,
        "source": args.source,
        "source_version": args.source_version,
    }
    if args.media_type is not None:
        fields["media_type"] = args.media_type
    for name in ("tags", "columns"):  # omitted: unset, so a re-record keeps the card's values
        values = getattr(args, name)
        if values is not None:
            fields[name] = [value for value in values if value != ""]
    metadata = parse_metadata(fields)
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
    view = _views.record_result(
        recorded, honcho_queued=admission.queued, state=admission.state
    ).model_dump(mode="json")
    return Outcome(view, _views.record_lines(view))


# -- resolve ------------------------------------------------------------------------------


def _resolve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("--current-source-version", help="compare freshness against this version")


def _resolve(args: argparse.Namespace) -> Outcome:
    _, store = start(args)
    bar = progress_for(sys.stderr, "verifying", enabled=not args.json)
    try:
        resolved = store.resolve(args.experiment_id, args.current_source_version, bar)
    finally:
        if bar is not None:
            bar.close()
    view = _views.resolve_result(resolved).model_dump(mode="json")
    return Outcome(view, _views.resolve_lines(view))


# -- show and slice -----------------------------------------------------------------------


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("--current-source-version", help="compare freshness against this version")


def _show(args: argparse.Namespace) -> Outcome:
    from harness_plugin._table_commands import show, show_lines  # pyarrow loads only here

    runtime, store = start(args)
    limits = runtime.config.slice.resolve()
    view = show(store, args.experiment_id, args.current_source_version, limits)
    return Outcome(view, show_lines(view))


def _slice_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("--columns", help="comma-separated columns (default: all)")
    p.add_argument("--where", help='filter, e.g. "cohort in (1, 2) and dose >= 10"')
    p.add_argument("--limit", type=int, help="at most N rows (default and maximum: the limit)")
    p.add_argument("--offset", type=int, default=0, help="skip the first N matching rows")
    p.add_argument(
        "--format",
        choices=_views.SLICE_FORMATS,
        help="how to write the rows (default: from the --out extension "
        ".parquet/.csv/.jsonl/.txt, else an aligned table)",
    )
    p.add_argument(
        "--out",
        help="write the rows to a new FILE (atomically, never over an existing file) "
        "instead of stdout",
    )
    p.add_argument("--current-source-version", help="compare freshness against this version")


def _slice(args: argparse.Namespace) -> Outcome:
    from harness_plugin._table_commands import slice_view  # pyarrow loads only here

    runtime, store = start(args)
    view, lines = slice_view(store, args, runtime.config.slice.resolve(), sys.stdout, sys.stderr)
    return Outcome(view, lines)


# -- search -------------------------------------------------------------------------------


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help="words to find in titles, summaries, tags and columns")
    p.add_argument("--limit", type=int, help="how many hits (default and maximum: the limit)")


def _search(args: argparse.Namespace) -> Outcome:
    _, store = start(args)
    bound = store.limits.search_results
    limit = bound if args.limit is None else args.limit
    if not 1 <= limit <= bound:
        raise InvalidInput(f"--limit must be between 1 and {bound}")
    scan = store.scan_cards()
    catalog = Catalog.build(
        scan.cards, max_cards=store.limits.cards_per_project, skipped=len(scan.problems)
    )
    hits = [
        _views.local_hit(
            hit, available_locally=store.has_object(hit.card.artifact.artifact_id)
        ).model_dump(mode="json")
        for hit in catalog.search(args.query, limit=limit)
    ]
    view: dict[str, object] = {"hits": hits, "skipped_cards": catalog.skipped}
    return Outcome(view, _views.search_lines(hits, catalog.skipped))


# -- list and export ----------------------------------------------------------------------


def _list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tag",
        action="append",
        dest="tags",
        default=[],
        metavar="TAG",
        help="only experiments with this tag; repeat: all must match",
    )
    p.add_argument("--source", help="only experiments from this source")
    p.add_argument("--since", help="only experiments created on or after YYYY-MM-DD (UTC)")
    p.add_argument("--media-type", help="only experiments of this media type, e.g. text/csv")


def _list(args: argparse.Namespace) -> Outcome:
    _, store = start(args)
    wanted = _listing.ListFilter(
        tags=tuple(args.tags),
        source=args.source,
        since=None if args.since is None else _listing.parse_since(args.since),
        media_type=args.media_type,
    )
    view = _listing.list_view(store, wanted)
    return Outcome(view, _listing.list_lines(view))


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("dest", help="the file to write (refused if it exists, unless --force)")
    p.add_argument("--force", action="store_true", help="replace DEST atomically if it exists")


def _export(args: argparse.Namespace) -> Outcome:
    _, store = start(args)
    view = _listing.export(store, args.experiment_id, args.dest, force=args.force)
    return Outcome(view, _listing.export_lines(view))


_EXP_HELP = "an experiment id (exp_…), or a unique prefix of at least 8 characters after exp_"
_ALIASES = {"list": ["ls"]}
_Configure = Callable[[argparse.ArgumentParser], None]
_Run = Callable[[argparse.Namespace], Outcome]
_COMMANDS: dict[str, tuple[str, _Configure, _Run]] = {
    "record": ("record an exported file and its experiment card", _record_args, _record),
    "resolve": ("verify an experiment's bytes and print their path", _resolve_args, _resolve),
    "show": ("the card and, for a table, its schema, sizes and statistics", _show_args, _show),
    "slice": ("read chosen columns and rows of a table result, bounded", _slice_args, _slice),
    "search": ("search this project's experiment cards", _search_args, _search),
    "list": ("this project's experiments, newest first", _list_args, _list),
    "export": ("copy an experiment's verified bytes to a file", _export_args, _export),
    "fsck": ("check every object and card of the project", ops.fsck_args, ops.fsck),
    "status": ("content-free counts and settings", ops.no_args, ops.status),
    "sync": ("reconcile card index states and deliver the outbox once", ops.sync_args, ops.sync),
    "serve": ("run the JSONL worker for the harness on stdin/stdout", ops.no_args, ops.serve),
    "demo": (
        "run a self-contained demonstration in a temporary workspace",
        ops.demo_args,
        ops.demo,
    ),
}
