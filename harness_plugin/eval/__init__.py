"""`artmem eval`: the Honcho spec §22 corpus, a memory-disabled baseline, telemetry, the gates.

Rooms: `_corpus` (the declarative cases in `corpus/`, validated), `_backend` (the fake Honcho over
HTTP, or a configured one with its own synthetic workspaces), `_world` (people, machines,
workers, names), `_play` and `_steps` (replaying a case through the worker's op handlers),
`_checks` (expectations and leakage), `_transport` (what was sent to Honcho), `_telemetry` (the
report: Honcho spec §8.3 and nothing said), `_gates` (the promotion gates), `_runner`, `_table`.

Loaded only by `artmem eval`, never by `artmem --help`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from cards import InvalidInput
from cards.model import validation_message
from harness_plugin.eval._corpus import load_corpus, select
from harness_plugin.eval._gates import gates
from harness_plugin.eval._table import passed, report_lines, write_report
from harness_plugin.eval._telemetry import CaseReport, Report

if TYPE_CHECKING:
    from harness_plugin.config import HonchoConfig

__all__ = ["Report", "evaluate", "judge", "passed", "report_lines", "write_report"]


def evaluate(
    live: HonchoConfig | None = None,
    cases: list[str] | None = None,
    *,
    settle_s: float = 3.0,
    on_case: Callable[[CaseReport], None] | None = None,
    on_report: Callable[[Report], None] | None = None,
) -> Report:
    """Run the corpus (or the cases named) against the fake Honcho, or `live` when given.

    `on_report` sees the report before the live workspaces are deleted, and again after if
    the cleanup left something behind (`Report.cleanup_left`): a cleanup can never lose it.

    Raises:
        InvalidInput: a case name matches no case, or the corpus is invalid.
        RemoteMisconfigured: live: a synthetic workspace name is already taken.
        RemoteUnavailable, RemoteUnauthorized, RemoteRejected: live: Honcho failed or refused.
    """
    # Here: they load the worker and the Honcho fake, which judging a report needs neither of.
    from harness_plugin.eval._backend import fake_backend, live_backend
    from harness_plugin.eval._runner import run_corpus

    chosen = select(load_corpus(), cases or [])
    backend = live_backend(live, settle_s) if live is not None else fake_backend()
    with backend as reached:
        report = run_corpus(chosen, reached, on_case)
        if on_report is not None:
            on_report(report)
    if reached.left:
        report.cleanup_left = list(reached.left)
        if on_report is not None:
            on_report(report)
    return report


def judge(path: str) -> Report:
    """A report written elsewhere (Stage A, by hand), with the gates computed again from it.

    Raises:
        InvalidInput: the file cannot be read, or is not a report of this format.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read the report: {exc.strerror}") from exc
    if len(data) > MAX_REPORT_BYTES:
        raise InvalidInput("the report is larger than 64 MiB")
    try:
        report = Report.model_validate_json(data)
    except ValidationError as exc:
        raise InvalidInput(f"not an artmem eval report: {validation_message(exc)}") from exc
    report.gates = gates(report)
    return report


MAX_REPORT_BYTES = 64 << 20
