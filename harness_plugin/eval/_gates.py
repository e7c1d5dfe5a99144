"""The promotion gates of Honcho spec §22, computed from a report alone.

A gate is measured when the report holds what it needs (a run of a case of its kind, a first
step, an injection); an unmeasured gate is neither passed nor failed. Gates read the memory runs,
except the secrets gate (every run) and the improvement (memory against the baseline).
"""

from __future__ import annotations

from collections.abc import Iterator

from harness_plugin.eval._telemetry import (
    RECALLS,
    CaseReport,
    Gate,
    Probe,
    Report,
    Run,
    estimated_tokens,
    percentile,
)

TAGGED = {
    "correction": "explicit correction",
    "freshness": "freshness",
    "injection": "prompt injection",
    "outage": "outage",
}


def gates(report: Report) -> list[Gate]:
    """Every gate, in the order Honcho spec §22 lists them."""
    found = [isolation(report)]
    found += [tagged(report, tag, words) for tag, words in TAGGED.items()]
    found += [secrets(report), latency(report), budget(report), improvement(report)]
    return found


def isolation(report: Report) -> Gate:
    """Zero cross-peer, cross-workspace and cross-project leakage."""
    runs = list(_memory_runs(report))
    leaks = sum(run.leaks for _, run in runs)
    isolated = [(case, run) for case, run in runs if "isolation" in case.gates]
    held = sum(1 for _, run in isolated if run.passed)
    return Gate(
        name="isolation",
        passed=leaks == 0 and held == len(isolated),
        measured=bool(runs),
        value=leaks,
        summary=f"{leaks} foreign facts shown in {len(runs)} cases; "
        f"isolation cases {held}/{len(isolated)} passed",
    )


def tagged(report: Report, tag: str, words: str) -> Gate:
    """100% of the cases of one kind pass with memory on."""
    runs = [run for case, run in _memory_runs(report) if tag in case.gates]
    held = sum(1 for run in runs if run.passed)
    return Gate(
        name=tag,
        passed=held == len(runs),
        measured=bool(runs),
        value=round(100 * held / len(runs), 1) if runs else None,
        summary=f"{words} cases: {held}/{len(runs)} passed",
    )


def secrets(report: Report) -> Gate:
    """No planted secret, tool output or other excluded text was sent or left in an outbox."""
    runs = [run for _, run in _runs(report) if run.skipped is None]
    sent = sum(run.uploaded_secrets + run.uploaded_excluded for run in runs)
    kept = sum(run.outbox_secrets for run in runs)
    known = sum(n for run in runs for n in run.known_failures.values())
    return Gate(
        name="no_secrets",
        passed=sent + kept == 0,
        measured=bool(runs),
        value=sent + kept,
        summary=f"{sent} planted secrets or excluded texts (tool output, subagent reports, "
        f"unread fields, injected recall) sent to Honcho, {kept} left in outboxes"
        + (f"; {known} more under known defects (listed below)" if known else ""),
    )


def latency(report: Report) -> Gate:
    """p95 added first-step wall time within the recall timeout, or a clean fail-open.

    Stage A reports count the model's MCP recall calls (`mcp`) as its first-step recall.
    """
    steps = [p for _, run in _memory_runs(report) for p in run.probes if p.method in RECALLS]
    if not steps:
        return Gate(name="latency", passed=False, measured=False, value=None,
                    summary="no first step was measured")  # fmt: skip
    unclean = [p for p in steps if not _clean(p)]
    late = [p for p in steps if p.latency_ms > _deadline(p, report) + report.grace_ms]
    p95 = round(percentile(sorted(p.latency_ms for p in steps), 95), 1)
    return Gate(
        name="latency",
        passed=not unclean and not late and p95 <= report.recall_timeout_ms,
        measured=True,
        value=p95,
        summary=f"first step p95 {p95} ms over {len(steps)} steps; {len(late)} past their "
        f"deadline + {report.grace_ms} ms; {len(unclean)} not a clean answer or fail-open",
    )


def budget(report: Report) -> Gate:
    """Every injected block within its configured token budget."""
    blocks = [
        p
        for _, run in _memory_runs(report)
        for p in run.probes
        if p.method in RECALLS and p.injected_chars
    ]
    over = [p for p in blocks if p.budget_tokens is None or _tokens(p) > p.budget_tokens]
    worst = max((_tokens(p) / p.budget_tokens for p in blocks if p.budget_tokens), default=0.0)
    return Gate(
        name="token_budget",
        passed=bool(blocks) and not over,
        measured=bool(blocks),
        value=round(worst, 3),
        summary=f"{len(blocks)} injections, {len(over)} over budget; "
        f"largest {round(100 * worst)}% of its budget",
    )


def improvement(report: Report) -> Gate:
    """Cases answered with the expected memory present: memory on against the baseline."""
    on = off = counted = 0
    for case in report.cases:
        memory, baseline = _run(case, "memory"), _run(case, "baseline")
        if memory is None or baseline is None or not _has_positive(memory):
            continue
        counted += 1
        on += memory.answered
        off += baseline.answered
    return Gate(
        name="improvement",
        passed=counted > 0 and on > off,
        measured=counted > 0,
        value=on - off,
        summary=f"cases answered with the expected memory: {on}/{counted} with memory, "
        f"{off}/{counted} without (+{on - off})",
    )


def _runs(report: Report) -> Iterator[tuple[CaseReport, Run]]:
    for case in report.cases:
        for run in case.runs:
            yield case, run


def _memory_runs(report: Report) -> Iterator[tuple[CaseReport, Run]]:
    for case, run in _runs(report):
        if run.mode == "memory" and run.skipped is None:
            yield case, run


def _run(case: CaseReport, mode: str) -> Run | None:
    return next((r for r in case.runs if r.mode == mode and r.skipped is None), None)


def _has_positive(run: Run) -> bool:
    observations = [o for p in run.probes for o in p.observations]
    observations += [o for r in run.records for o in r.observations]
    return any(o.positive for o in observations)


def _clean(probe: Probe) -> bool:
    """An injection, or no injection with a reason code: never an error or a crash.

    A Stage A recall (`mcp`) is clean when the model's MCP call answered (`ok`) or failed open.
    """
    if probe.method == "mcp":
        return probe.outcome == "ok" or probe.outcome.startswith("recall.")
    return probe.outcome == "injected" or probe.outcome.startswith("recall.")


def _deadline(probe: Probe, report: Report) -> int:
    return probe.timeout_ms if probe.timeout_ms is not None else report.recall_timeout_ms


def _tokens(probe: Probe) -> int:
    """Tokens recomputed from the characters, not taken from the worker's own estimate."""
    return max(probe.estimated_tokens, estimated_tokens(probe.injected_chars))
