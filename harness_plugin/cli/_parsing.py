"""argparse as the CLI needs it: errors raised (for `--json`), help sized without `shutil`.

`Parser` raises `ParseFailure` where argparse would print and exit, so a script asking for
`--json` gets its error as JSON; `Formatter` sizes help as `shutil` would without importing it;
`Version` reads the installed version only when asked.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import NoReturn


class ParseFailure(Exception):
    """The command line does not parse; becomes a typed `UsageError` when reported."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


class Formatter(argparse.HelpFormatter):
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


class Parser(argparse.ArgumentParser):
    """An argparse parser that raises instead of exiting, so `--json` can report the error."""

    def error(self, message: str) -> NoReturn:
        """Raise the parse error (argparse would print usage and exit 2).

        argparse quotes the offending value whole (with `repr`): a long one is cut short.
        """
        message = _LONG_QUOTED.sub(lambda m: f"{m.group(1)}…'", message)
        raise ParseFailure(f"{self.prog}: {message}", self.format_usage())


_LONG_QUOTED = re.compile(r"('(?:[^'\\]|\\.){60})(?:[^'\\]|\\.)+'")  # as cards.excerpt


class Version(argparse.Action):
    """`--version`, reading the installed version only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("artmem")
        except PackageNotFoundError:  # running from a source tree that is not installed
            found = "unknown"
        print(f"artmem {found}")
        parser.exit()
