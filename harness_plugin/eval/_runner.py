"""Running the corpus: every case with memory on and in the memory-disabled baseline.

Each run gets fresh machines under a temporary directory (removed afterwards) and starts from a
clean tally of what was sent to Honcho; the planted secrets and tool output of its case are
watched for in every request and in the outbox left on disk.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness_plugin.eval._backend import Backend
from harness_plugin.eval._corpus import Case, Turn
from harness_plugin.eval._gates import gates
from harness_plugin.eval._play import CaseRun
from harness_plugin.eval._telemetry import CaseReport, Latency, Report, Requests, Run
from harness_plugin.eval._world import (
    MODES,
    Mode,
    Names,
    expand,
    known_secrets,
    planted_secrets,
)

GRACE_MS = 500  # how far past its deadline a fail-open may return (scheduling, marking)
DEFAULT_RECALL_TIMEOUT_MS = 1500


def run_corpus(
    cases: list[Case], backend: Backend, on_case: Callable[[CaseReport], None] | None = None
) -> Report:
    """Every case in both modes, then the gates."""
    started = time.perf_counter()
    reports: list[CaseReport] = []
    with tempfile.TemporaryDirectory(prefix="artmem-eval-", dir=scratch_dir()) as tmp:
        for case in cases:
            done = run_case(case, backend, Path(tmp))
            reports.append(done)
            if on_case is not None:
                on_case(done)
    report = Report(
        backend=backend.kind,
        recall_timeout_ms=DEFAULT_RECALL_TIMEOUT_MS,
        grace_ms=GRACE_MS,
        cases=reports,
        duration_ms=round((time.perf_counter() - started) * 1e3, 1),
    )
    report.gates = gates(report)
    return report


def scratch_dir() -> str | None:
    """Where the synthetic machines live: memory-backed `/dev/shm` when there is one.

    The evaluation judges behaviour, not the disk: thousands of captured turns each fsync an
    outbox document, which a tmpfs makes cheap. Durable-write latency is what
    `benchmarks/bench_outbox.py` measures. `ARTMEM_EVAL_TMPDIR` chooses another directory.
    """
    chosen = os.environ.get("ARTMEM_EVAL_TMPDIR")
    if chosen:
        return chosen
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def run_case(case: Case, backend: Backend, tmp: Path) -> CaseReport:
    """One case, memory on and off."""
    names = Names(case)
    runs = []
    for mode in MODES:
        if backend.kind == "live" and case.fake_only:
            runs.append(_skipped(mode, "live.fake_only"))
        else:
            runs.append(run_mode(case, mode, backend, tmp))
    return CaseReport(
        case_id=case.id,
        spec_case=case.spec_case,
        gates=list(case.gates),
        workspaces=sorted({backend.workspaces[p.workspace] for p in case.people}),
        peers=sorted({names.peer(p) for p in case.people}),
        projects=[names.project(p.id) for p in case.projects],
        runs=runs,
    )


def run_mode(case: Case, mode: Mode, backend: Backend, tmp: Path) -> Run:
    """One case in one mode."""
    known = known_secrets(case)
    secrets = [s for s in planted_secrets(case) if not any(s in v for v in known.values())]
    backend.transport.plant(secrets=secrets, excluded=_excluded(case), known=known)
    backend.transport.reset()
    started = time.perf_counter()
    run = CaseRun(case, mode, backend, tmp / case.id)
    try:
        run.play()
    finally:
        run.close()
    tally = backend.transport.reset()
    observations = [o for p in run.probes for o in p.observations]
    observations += [o for r in run.records for o in r.observations]
    positives = [o for o in observations if o.positive]
    return Run(
        mode=mode,
        passed=all(o.passed for o in observations),
        answered=bool(positives) and all(o.passed for o in positives),
        expectations=len(observations),
        expectations_passed=sum(o.passed for o in observations),
        probes=run.probes,
        records=run.records,
        recall_ms=Latency.of([p.latency_ms for p in run.probes if p.method == "first-step"]),
        record_ms=Latency.of(run.record_ms),
        timeouts=run.timeouts,
        errors=dict(sorted(run.errors.items())),
        requests=Requests(
            total=sum(tally.by_route.values()),
            bytes_sent=tally.bytes_sent,
            by_route=dict(sorted(tally.by_route.items())),
            failed=tally.failed,
        ),
        leaks=sum(p.leaks for p in run.probes),
        uploaded_secrets=tally.secrets,
        uploaded_excluded=tally.excluded,
        known_failures={defect: n for defect, n in sorted(tally.known.items()) if n},
        outbox_secrets=run.outbox_hits(secrets + backend.transport.excluded_values),
        duration_ms=round((time.perf_counter() - started) * 1e3, 1),
    )


def _skipped(mode: Mode, reason: str) -> Run:
    return Run(
        mode=mode,
        skipped=reason,
        passed=True,
        answered=False,
        expectations=0,
        expectations_passed=0,
        recall_ms=Latency.of([]),
        record_ms=Latency.of([]),
    )


def _excluded(case: Case) -> list[str]:
    """What the case's tools print, subagents report and unread fields hold: never captured."""
    found: list[str] = []
    for step in case.steps:
        if isinstance(step, Turn):
            for text in (step.tool_output, step.subagent_text, step.hostile_fields):
                if text:
                    found.append(expand(text, case.id, lambda s: Path("/nonexistent")))
    return found
