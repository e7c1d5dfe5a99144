"""The `artmem` command line: the host side for an operator at a terminal or a script.

This module is parsing and dispatch; the options of each command are in `_arguments`. Each
command runs through a small function that imports its module (`_artifact_commands`,
`_operator_commands`) when it runs: importing them up front would cost `artmem --help` the
store's modules (60-180 ms by `-X importtime` on a 2-CPU VM, more than the rest of its start).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from harness_plugin.cli import _arguments as options
from harness_plugin.cli._parsing import Formatter, ParseFailure, Parser, Version

if TYPE_CHECKING:
    from cards import ArtifactError
    from harness_plugin.cli._command import Outcome

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a reader that closed early (SIGPIPE)


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


def _main(argv: list[str]) -> int:
    parser = _parser(argv)
    try:
        args = parser.parse_args(argv)
    except ParseFailure as failure:
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
    run: _Run = args.run
    if run in _TABLE_RUNS:
        import_readers()  # pyarrow without numpy, which no command uses (~0.15 s)
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


def _import_msgspec() -> None:
    """Import msgspec without `typing_extensions` (a no-op once either is loaded).

    msgspec takes only `get_type_hints`, `Required` and `NotRequired` from typing_extensions
    when it can import it, and Python 3.11's `typing` has all three; importing it loads
    `inspect`, `ast` and `dis` too, ~7 ms of every command with its bytecode cached (its
    share of `artmem status`: 0.072 -> 0.059 s against the code before this was removed). The
    module is hidden only while msgspec loads, in this single-threaded start: a later import
    (pydantic's, by the tools' models) finds it as usual.
    """
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # its import now fails
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules["typing_extensions"]


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


def _common(*, in_subcommand: bool) -> Parser:
    # Options may come before or after the command; in the subcommand they must not reset a
    # value given before it, hence SUPPRESS there.
    default = argparse.SUPPRESS if in_subcommand else None
    common = Parser(add_help=False, formatter_class=Formatter)
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
    parser = Parser(
        prog="artmem",
        formatter_class=Formatter,
        description="A project-scoped store for exact experimental results.",
        parents=[_common(in_subcommand=False)],
    )
    parser.add_argument("--version", action=Version, nargs=0, help="print the version")
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
            formatter_class=Formatter,
        )
        configure(sub)
        sub.set_defaults(run=run)
    return parser


# -- what runs each command: its module is imported only when the command runs ------------


def _record(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.record(args)


def _resolve(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.resolve(args)


def _show(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.show_command(args)


def _slice(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.slice_command(args)


def _search(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.search(args)


def _list(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.list_experiments(args)


def _export(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.export(args)


def _lineage(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.lineage(args)


def _diff(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.diff(args)


def _ui(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _artifact_commands

    return _artifact_commands.ui(args)


def _fsck(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _operator_commands

    return _operator_commands.fsck(args)


def _migrate(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _operator_commands

    return _operator_commands.migrate(args)


def _status(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _operator_commands

    return _operator_commands.status(args)


def _sync(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _operator_commands

    return _operator_commands.sync(args)


def _serve(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _operator_commands

    return _operator_commands.serve(args)


def _demo(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _operator_commands

    return _operator_commands.demo(args)


def _eval(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _operator_commands

    return _operator_commands.run_eval(args)


def _edit(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _lifecycle_commands

    return _lifecycle_commands.edit(args)


def _rm(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _lifecycle_commands

    return _lifecycle_commands.remove(args)


def _gc(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _lifecycle_commands

    return _lifecycle_commands.gc(args)


def _complete(args: argparse.Namespace) -> Outcome:
    from harness_plugin.cli import _completion

    return _completion.completion(args, _parser(None))


_Run = Callable[[argparse.Namespace], "Outcome"]
_Configure = Callable[[argparse.ArgumentParser], None]
_ALIASES = {"list": ["ls"]}
_NO_CONFIGURATION: frozenset[_Run] = frozenset({_demo})  # it builds its own workspace
# The commands that read tables: their pyarrow loads first, without numpy.
_TABLE_RUNS: frozenset[_Run] = frozenset({_show, _slice, _diff, _ui})
# name: (summary, its options, what runs it)
_COMMANDS: dict[str, tuple[str, _Configure, _Run]] = {
    "record": ("record an exported file and its experiment card", options.record_args, _record),
    "resolve": (
        "verify an experiment's bytes and print their path",
        options.resolve_args,
        _resolve,
    ),
    "show": (
        "the card and, for a table, its schema, sizes and statistics",
        options.show_args,
        _show,
    ),
    "slice": (
        "read chosen columns and rows of a table result, bounded",
        options.slice_args,
        _slice,
    ),
    "search": ("search this project's experiment cards", options.search_args, _search),
    "list": ("this project's experiments, newest first", options.list_args, _list),
    "export": ("copy an experiment's verified bytes to a file", options.export_args, _export),
    "lineage": ("an experiment's ancestors and descendants", options.lineage_args, _lineage),
    "diff": ("compare two experiments: card, schema, statistics, rows", options.diff_args, _diff),
    "ui": ("serve a read-only catalog page on 127.0.0.1", options.ui_args, _ui),
    "fsck": ("check every object and card of the project", options.fsck_args, _fsck),
    "migrate": (
        "copy the local project store into the configured S3-compatible bucket",
        options.migrate_args,
        _migrate,
    ),
    "edit": (
        "change an experiment card's title, summary, tags or columns",
        options.edit_args,
        _edit,
    ),
    "rm": ("remove experiments (audited; bytes stay until gc)", options.rm_args, _rm),
    "gc": ("list (or --apply: delete) what no card needs", options.gc_args, _gc),
    "status": ("content-free counts and settings", options.no_args, _status),
    "sync": ("reconcile card index states and deliver the outbox once", options.sync_args, _sync),
    "serve": ("run the JSONL worker for the harness on stdin/stdout", options.no_args, _serve),
    "demo": (
        "run a self-contained demonstration in a temporary workspace",
        options.demo_args,
        _demo,
    ),
    "eval": (
        "run the evaluation corpus (Honcho spec §22) and check the promotion gates",
        options.eval_args,
        _eval,
    ),
    "completion": (
        "print a shell completion script: bash, zsh or fish",
        options.completion_args,
        _complete,
    ),
}
