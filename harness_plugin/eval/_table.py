"""The report for people: a line per case, a line per gate; and the JSON file for machines."""

from __future__ import annotations

import os
import tempfile

import msgspec

from harness_plugin.eval._telemetry import RECALLS, CaseReport, Report, Run

HEADER = (
    f"{'#':>3}  {'case':<26}{'memory':>9}{'baseline':>10}{'recall p95':>12}"
    f"{'max tokens':>12}{'leaks':>7}{'requests':>10}{'time':>8}"
)


def case_line(case: CaseReport) -> str:
    """One case: expectations met with memory and without, recall p95, tokens, leaks, time."""
    memory, baseline = _run(case, "memory"), _run(case, "baseline")
    if memory is None or memory.skipped:
        why = memory.skipped if memory is not None else "no memory run"
        return f"{case.spec_case:>3}  {case.case_id:<26}{'skipped: ' + str(why):>32}"
    p95 = memory.recall_ms.p95
    recall = f"{p95:.0f} ms" if p95 is not None else "-"
    blocks = [p for p in memory.probes if p.method in RECALLS and p.injected_chars]
    worst = max(blocks, key=lambda p: p.estimated_tokens, default=None)
    tokens = f"{worst.estimated_tokens}/{worst.budget_tokens}" if worst else "-"
    seconds = (memory.duration_ms + (baseline.duration_ms if baseline else 0)) / 1000
    return (
        f"{case.spec_case:>3}  {case.case_id:<26}{_score(memory):>9}{_score(baseline):>10}"
        f"{recall:>12}{tokens:>12}{memory.leaks:>7}{memory.requests.total:>10}"
        f"{seconds:>7.1f}s"
    )


def gate_lines(report: Report) -> list[str]:
    """PASS, FAIL or n/a for every gate, with what was measured."""
    lines = []
    for gate in report.gates:
        verdict = "n/a " if not gate.measured else ("PASS" if gate.passed else "FAIL")
        lines.append(f"  {verdict}  {gate.name:<13} {gate.summary}")
    return lines


def report_lines(report: Report, path: str | None) -> list[str]:
    """The whole report for a terminal."""
    where = {
        "fake": "the fake Honcho over HTTP on 127.0.0.1",
        "live": "a live Honcho (synthetic workspaces, deleted afterwards)",
        "manual": "a report written elsewhere (gates computed again here)",
    }[report.backend]
    lines = [
        f"artmem eval: {len(report.cases)} cases against {where}; "
        "memory on vs the memory-disabled baseline (expectations met)",
        HEADER,
        *(case_line(case) for case in report.cases),
        "",
        "promotion gates (Honcho spec §22):",
        *gate_lines(report),
        "",
    ]
    lines += known_lines(report)
    failed = [g.name for g in report.gates if g.measured and not g.passed]
    verdict = f"FAILED: {', '.join(failed)}" if failed else "every measured gate passed"
    lines.append(f"{verdict} ({report.duration_ms / 1000:.1f} s)")
    if report.cleanup_left:
        lines.append(
            "warning: cleanup could not delete "
            f"{', '.join(report.cleanup_left)}; delete them by hand (sessions first, then "
            "the workspace), e.g. with DELETE /v3/workspaces/{id}/sessions/{session}"
        )
    if path:
        lines.append(f"report: {path}")
    return lines


def known_lines(report: Report) -> list[str]:
    """The known defects the corpus marks, and what they did in this run (not gating)."""
    found: dict[str, list[str]] = {}
    for case in report.cases:
        for run in case.runs:
            for defect, count in run.known_failures.items():
                found.setdefault(defect, []).append(f"{case.case_id} {run.mode}: {count}")
    if not found:
        return []
    lines = ["known defects (reported, not gating; see the case files):"]
    lines += [
        f"  {defect}: planted secrets sent {', '.join(where)}" for defect, where in found.items()
    ]
    return [*lines, ""]


def passed(report: Report) -> bool:
    """Whether every measured gate passed."""
    return all(gate.passed for gate in report.gates if gate.measured)


def write_report(report: Report, path: str) -> None:
    """Write the JSON report atomically (a temporary file beside it, then a rename)."""
    data = (
        msgspec.json.format(msgspec.json.encode(report.model_dump(mode="json")), indent=2) + b"\n"
    )
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".artmem-eval-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _run(case: CaseReport, mode: str) -> Run | None:
    return next((run for run in case.runs if run.mode == mode), None)


def _score(run: Run | None) -> str:
    if run is None or run.skipped:
        return "-"
    return f"{run.expectations_passed}/{run.expectations}"
