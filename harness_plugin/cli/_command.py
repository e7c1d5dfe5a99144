"""What every command shares: its outcome, exit statuses, and how it opens the project's store."""

from __future__ import annotations

import argparse
import os

import msgspec

from cards import InvalidInput
from cas import Store
from harness_plugin import _shortids
from harness_plugin._runtime import Runtime
from harness_plugin.config import load_config

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class Outcome(msgspec.Struct, frozen=True):
    """A command's result: a JSON view for scripts, lines for people, and an exit status.

    `view` is what `--json` prints (by `msgspec.json`): a dict, or a `cards.results` struct.
    """

    view: object
    lines: list[str]
    status: int = EXIT_OK
    silent: bool = False  # the command owned stdout itself (serve)


def start(args: argparse.Namespace) -> tuple[Runtime, Store]:
    """Validate the whole configuration (a missing Honcho key fails here) and pick the store.

    An `experiment_id` argument is expanded here from a unique prefix to the full id.
    """
    runtime = Runtime(load_config(args.config))
    store = runtime.stores[runtime.config.project_for(os.getcwd(), args.project)]
    if getattr(args, "experiment_id", None) is not None:
        args.experiment_id = _shortids.expand(store, args.experiment_id)
    return runtime, store


class UsageError(InvalidInput):
    """The command line does not parse (an unknown option, a bad choice or number)."""
