"""The `artmem` command line: the host side for an operator at a terminal or a script.

This module is argument parsing only: `artmem --help` loads argparse and nothing of the store.
A command's module (`_artifact_commands`, `_operator_commands`) is imported when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn, TextIO

if TYPE_CHECKING:
    from cards import ArtifactError
    from harness_plugin.cli._command import Outcome

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a reader that closed early (SIGPIPE)
SLICE_FORMATS = ("table", "csv", "jsonl", "parquet")


class _ParseFailure(Exception):
    """The command line does not parse; becomes a typed `UsageError` when reported."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, sized without `shutil` (which loads its compression modules).

    argparse asks `shutil.get_terminal_size` for the width whenever it builds a formatter, and
    it builds one for every argument added; this asks the same question the same way.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)  # argparse's own margin


def _terminal_columns() -> int:
    """`$COLUMNS` if set and positive, else the terminal's width, else 80 (as `shutil`)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0 and sys.__stdout__ is not None:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (ValueError, OSError):  # not a terminal, or stdout closed
            columns = 0
    return columns if columns > 0 else 80


class _Parser(argparse.ArgumentParser):
    """An argparse parser that raises instead of exiting, so `--json` can report the error."""

    def error(self, message: str) -> NoReturn:
        """Raise the parse error (argparse would print usage and exit 2).

        argparse quotes the offending value whole (with `repr`): a long one is cut short.
        """
        message = _LONG_QUOTED.sub(lambda m: f"{m.group(1)}…'", message)
        raise _ParseFailure(f"{self.prog}: {message}", self.format_usage())


_LONG_QUOTED = re.compile(r"('(?:[^'\\]|\\.){60})(?:[^'\\]|\\.)+'")  # as cards.excerpt


class _Version(argparse.Action):
    """`--version`, reading the installed version only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("artmem")
        except PackageNotFoundError:  # running from a source tree that is not installed
            found = "unknown"
        print(f"artmem {found}")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # pydantic otherwise scans every installed distribution's entry points for its plugins at
    # the first model (10-20 ms per command); our models use none. An explicit value wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        return _main(argv)
    except BrokenPipeError:
        # A reader such as `head` closed the pipe: stop quietly, as Unix tools do, and keep the
        # interpreter's final flush from reporting the same error again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _import_msgspec() -> None:
    """Import msgspec before a command does, without `typing_extensions` (a no-op once loaded).

    msgspec resolves annotations through typing_extensions when it can import it, which with
    `inspect` and `ast` costs every command about 10 ms; on Python 3.11 `typing` resolves every
    annotation of ours the same way. Only this single-threaded start hides the module, briefly.
    """
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # its import now fails
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules["typing_extensions"]


def _main(argv: list[str]) -> int:
    parser = _parser(argv)
    try:
        args = parser.parse_args(argv)
    except _ParseFailure as failure:
        as_json = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
        if not as_json:
            sys.stderr.write(failure.usage)
        return _usage(as_json, failure.message)
    if not hasattr(args, "run"):
        if args.json:
            return _usage(True, "no command given; see `artmem --help`")
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.run in _NO_CONFIGURATION and (
        getattr(args, "config", None) or getattr(args, "project", None)
    ):
        return _usage(
            args.json, "demo runs in its own temporary workspace: it takes no --config or --project"
        )
    _import_msgspec()
    from cards import ArtifactError, ObjectMissing
    from cas.slicing import ONE_THREAD_ENV, import_readers

    # Native libraries' threads (pyarrow's jemalloc, numpy's BLAS) stay unstarted, so a
    # command that reads a table forks its bounded reader from a single-threaded process.
    for name, value in ONE_THREAD_ENV.items():
        os.environ.setdefault(name, value)
    if args.run in _TABLE_RUNS:
        import_readers()  # pyarrow without numpy, which no command uses (~0.15 s)

    module, _, function = args.run.partition(":")
    run: Callable[[argparse.Namespace], Outcome] = getattr(
        importlib.import_module(f"harness_plugin.cli.{module}"), function
    )
    try:
        outcome = run(args)
    except ObjectMissing as exc:
        from harness_plugin._views import UNAVAILABLE_HINT

        exc.message += f"; {UNAVAILABLE_HINT}"
        return _fail(args.json, exc)
    except ArtifactError as exc:
        return _fail(args.json, exc)
    except KeyboardInterrupt:
        print("artmem: interrupted", file=sys.stderr)
        return 130
    if not outcome.silent:
        _emit(outcome, as_json=args.json, out=sys.stdout)
    return outcome.status


def _usage(as_json: bool, message: str) -> int:
    from harness_plugin.cli._command import UsageError

    _fail(as_json, UsageError(message))
    return EXIT_USAGE


def _fail(as_json: bool, exc: ArtifactError) -> int:
    if as_json:
        import msgspec

        sys.stdout.write(msgspec.json.encode({"error": exc.to_dict()}).decode() + "\n")
    else:
        print(f"artmem: error [{exc.code}]: {exc.to_dict()['message']}", file=sys.stderr)
    return EXIT_ERROR


def _emit(outcome: Outcome, *, as_json: bool, out: TextIO) -> None:
    if as_json:
        import msgspec  # not orjson: it loads dataclasses, uuid and platform with it

        out.write(msgspec.json.encode(outcome.view, order="sorted").decode() + "\n")
    else:
        out.write("".join(line + "\n" for line in outcome.lines))


def _common(*, in_subcommand: bool) -> _Parser:
    # Options may come before or after the command; in the subcommand they must not reset a
    # value given before it, hence SUPPRESS there.
    default = argparse.SUPPRESS if in_subcommand else None
    common = _Parser(add_help=False, formatter_class=_Formatter)
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


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; with `argv`, only the commands it names get their sub-parser.

    A sub-parser costs ~1 ms to build (argparse looks up translations for each of its strings),
    so a command builds its own only; with no command named (`--help`, a typo), all are built,
    for the listing and the "invalid choice" error.
    """
    named = [] if argv is None else [n for n in _COMMANDS if {n, *_ALIASES.get(n, [])} & {*argv}]
    parser = _Parser(
        prog="artmem",
        formatter_class=_Formatter,
        description="A project-scoped store for exact experimental results.",
        parents=[_common(in_subcommand=False)],
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    sub_common = _common(in_subcommand=True)
    for name in named or _COMMANDS:
        summary, configure, run = _COMMANDS[name]
        sub = commands.add_parser(
            name,
            aliases=_ALIASES.get(name, []),
            help=summary,
            description=summary,
            parents=[sub_common],
            formatter_class=_Formatter,
        )
        configure(sub)
        sub.set_defaults(run=run)
    return parser


# -- the arguments of each command ---------------------------------------------------------


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
    p.add_argument(
        "--derived-from",
        action="append",
        dest="parents",
        metavar="EXPERIMENT_ID",
        help="an experiment of this project the result was derived from; one option per parent "
        "(fixed at the first record: a re-record keeps them)",
    )


def _resolve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("--current-source-version", help="compare freshness against this version")


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("--current-source-version", help="compare freshness against this version")


def _slice_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("--columns", help="comma-separated columns (default: all)")
    p.add_argument("--where", help='filter, e.g. "cohort in (1, 2) and dose >= 10"')
    p.add_argument(
        "--limit",
        type=int,
        help="at most N rows (default: the limit; with --out as parquet/csv/jsonl: all rows)",
    )
    p.add_argument("--offset", type=int, default=0, help="skip the first N matching rows")
    p.add_argument(
        "--format",
        choices=SLICE_FORMATS,
        help="how to write the rows (default: from the --out extension "
        ".parquet/.csv/.jsonl/.txt, else an aligned table)",
    )
    p.add_argument(
        "--out",
        help="write the rows to a new FILE (atomically, never over an existing file) instead "
        "of stdout; parquet, csv and jsonl are streamed, not capped by [slice] max_rows and "
        "max_bytes",
    )
    p.add_argument("--current-source-version", help="compare freshness against this version")


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help="words to find in titles, summaries, tags and columns")
    p.add_argument("--limit", type=int, help="how many hits (default and maximum: the limit)")


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


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("dest", help="the file to write (refused if it exists, unless --force)")
    p.add_argument("--force", action="store_true", help="replace DEST atomically if it exists")


def _lineage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("first", metavar="A", help=_EXP_HELP)
    p.add_argument("second", metavar="B", help="the experiment to compare A with")
    p.add_argument(
        "--rows",
        action="store_true",
        help="also compare rows, matched by --key (bounded by [slice] max_rows and max_bytes)",
    )
    p.add_argument("--key", metavar="COL", help="the column that identifies a row (with --rows)")


def _ui_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free)")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")


def _migrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--to",
        choices=["s3"],
        required=True,
        help='the target: the bucket of [storage] (backend = "s3")',
    )


def _edit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=_EXP_HELP)
    p.add_argument("--title", help="a new title")
    p.add_argument("--summary", help="a new summary")
    p.add_argument("--source", help="a new source label")
    p.add_argument("--add-tag", action="append", dest="add_tags", default=[], metavar="TAG")
    p.add_argument("--remove-tag", action="append", dest="remove_tags", default=[], metavar="TAG")
    p.add_argument(
        "--column",
        action="append",
        dest="columns",
        metavar="COLUMN",
        help="the column names, replacing the card's; repeat for more (--column '' clears)",
    )
    p.add_argument(
        "--if-revision",
        metavar="REV",
        help="edit only if the card is still at this revision (as the last edit printed)",
    )
    for name in ("--query-fingerprint", "--source-version", "--artifact"):  # refused, clearly
        p.add_argument(name, help=argparse.SUPPRESS)


def _rm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_ids", nargs="+", metavar="EXPERIMENT_ID", help=_EXP_HELP)


def _gc_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--apply",
        action="store_true",
        help="delete what the dry run lists (default: list it and delete nothing)",
    )


def _fsck_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repair",
        action="store_true",
        help="remove stale temp files and quarantine corrupt objects (never deletes objects)",
    )


def _sync_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--deadline", type=float, help="seconds to keep delivering (default: config)")


def _no_args(p: argparse.ArgumentParser) -> None:
    del p


def _completion_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "shell",
        choices=("bash", "zsh", "fish", "ids"),
        help="the shell (`ids PREFIX`: the experiment ids the scripts complete)",
    )
    p.add_argument("prefix", nargs="?", help=argparse.SUPPRESS)


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep", action="store_true", help="keep the temporary workspace")


def _eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--report", metavar="PATH", help="also write the JSON report to PATH")
    p.add_argument(
        "--live",
        action="store_true",
        help="run against the Honcho of [honcho] in --config instead of the fake; creates, "
        "and afterwards deletes, only its own uniquely named synthetic workspaces",
    )
    p.add_argument(
        "--case",
        action="append",
        dest="cases",
        default=[],
        metavar="ID",
        help="only this corpus case (id or number, e.g. 5 or c05-correction); repeat for more",
    )
    p.add_argument(
        "--from",
        dest="judge",
        metavar="PATH",
        help="run nothing: judge the gates of a report written elsewhere (e.g. Stage A, MCP)",
    )


_EXP_HELP = (
    "an experiment id (exp_…), or a unique prefix of at least 8 characters after exp_ (exp_ may "
    "be left out, as `list` prints it)"
)
_ALIASES = {"list": ["ls"]}
_NO_CONFIGURATION = frozenset({"_operator_commands:demo"})  # it builds its own workspace
_Configure = Callable[[argparse.ArgumentParser], None]
_ART = "_artifact_commands:"
# The commands that read tables: their pyarrow loads first, without numpy.
_TABLE_RUNS = frozenset({_ART + "show_command", _ART + "slice_command", _ART + "diff", _ART + "ui"})
_OPS = "_operator_commands:"
_LIFE = "_lifecycle_commands:"
# name: (summary, arguments, "module:function" that runs it, imported only then)
_COMMANDS: dict[str, tuple[str, _Configure, str]] = {
    "record": ("record an exported file and its experiment card", _record_args, _ART + "record"),
    "resolve": (
        "verify an experiment's bytes and print their path",
        _resolve_args,
        _ART + "resolve",
    ),
    "show": (
        "the card and, for a table, its schema, sizes and statistics",
        _show_args,
        _ART + "show_command",
    ),
    "slice": (
        "read chosen columns and rows of a table result, bounded",
        _slice_args,
        _ART + "slice_command",
    ),
    "search": ("search this project's experiment cards", _search_args, _ART + "search"),
    "list": ("this project's experiments, newest first", _list_args, _ART + "list_experiments"),
    "export": ("copy an experiment's verified bytes to a file", _export_args, _ART + "export"),
    "lineage": (
        "an experiment's ancestors and descendants",
        _lineage_args,
        _ART + "lineage",
    ),
    "diff": ("compare two experiments: card, schema, statistics, rows", _diff_args, _ART + "diff"),
    "ui": ("serve a read-only catalog page on 127.0.0.1", _ui_args, _ART + "ui"),
    "fsck": ("check every object and card of the project", _fsck_args, _OPS + "fsck"),
    "migrate": (
        "copy the local project store into the configured S3-compatible bucket",
        _migrate_args,
        _OPS + "migrate",
    ),
    "edit": (
        "change an experiment card's title, summary, tags or columns",
        _edit_args,
        _LIFE + "edit",
    ),
    "rm": ("remove experiments (audited; bytes stay until gc)", _rm_args, _LIFE + "remove"),
    "gc": ("list (or --apply: delete) what no card needs", _gc_args, _LIFE + "gc"),
    "status": ("content-free counts and settings", _no_args, _OPS + "status"),
    "sync": ("reconcile card index states and deliver the outbox once", _sync_args, _OPS + "sync"),
    "serve": ("run the JSONL worker for the harness on stdin/stdout", _no_args, _OPS + "serve"),
    "demo": (
        "run a self-contained demonstration in a temporary workspace",
        _demo_args,
        _OPS + "demo",
    ),
    "eval": (
        "run the evaluation corpus (spec §22) and check the promotion gates",
        _eval_args,
        _OPS + "run_eval",
    ),
    "completion": (
        "print a shell completion script: bash, zsh or fish",
        _completion_args,
        "_completion:completion",
    ),
}
