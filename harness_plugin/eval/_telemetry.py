"""The evaluation report: exactly the telemetry of Honcho spec §8.3, and nothing that was said.

Per case: its id and the synthetic workspace, peer and project ids; per run (memory on, and the
memory-disabled baseline), every probe's recall method and result count, latency, outcome code,
injected characters and estimated tokens, and for each expectation what was expected and what was
observed (present, absent, stale, contradictory, ...); record latencies; timeouts and errors by
code; Honcho requests by route (ids replaced by placeholders) and bytes sent; leakage and
secret/tool-output counts. Then the promotion gates, computed from this report alone, so a
report written by hand (Stage A, MCP) can be checked the same way. Codes and numbers only: no
conversation text, card text, query, path or secret ever enters it.
"""

from __future__ import annotations

import math
import time
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness_plugin.eval._corpus import ToolName

_OUT = ConfigDict(extra="forbid")
FORMAT: Literal["artmem-eval-report/1"] = "artmem-eval-report/1"
# How a probe reached memory: first-step recall, Stage A's MCP tools (the model called Honcho
# itself), or one of our tools.
Method = Literal["first-step", "mcp"] | ToolName
RECALLS = ("first-step", "mcp")  # what puts memory into the model's context before it answers
WriteMethod = Literal["capture", "memory_record", "memory_correct", "memory_artifact_record"]
Code = Annotated[str, Field(pattern=r"^[a-z_]+(\.[a-z_]+)*$", max_length=80)]


class Observation(BaseModel):
    """One expectation: what the corpus expected, what was observed, whether that passes."""

    model_config = _OUT

    kind: Code
    expected: Code
    observed: Code
    passed: bool
    positive: bool  # asks for memory to be there (what the baseline cannot do)


class Probe(BaseModel):
    """One recall or tool call: how, how many results, how long, what it injected."""

    model_config = _OUT

    step: int
    method: Method
    peer: str
    project: str | None
    outcome: Code  # `injected`, `ok`, or the reason or error code
    results: int
    latency_ms: float
    timeout_ms: int | None = None  # first-step: the recall deadline in force
    injected_chars: int = 0
    estimated_tokens: int = 0
    budget_tokens: int | None = None
    leaks: int = 0  # facts of another peer, workspace or project that this probe showed
    user_rating: int | None = None  # Stage A: the person's rating (1-5) of a real conversation
    observations: list[Observation] = []


class Record(BaseModel):
    """One write: a captured turn, a note or correction, or an artifact record."""

    model_config = _OUT

    step: int
    method: WriteMethod
    outcome: Code
    latency_ms: float
    observations: list[Observation] = []


class Latency(BaseModel):
    """Milliseconds over a set of operations."""

    model_config = _OUT

    count: int
    p50: float | None
    p95: float | None
    max: float | None

    @classmethod
    def of(cls, values: list[float]) -> Latency:
        """The summary of `values` (nearest-rank percentiles)."""
        if not values:
            return cls(count=0, p50=None, p95=None, max=None)
        ordered = sorted(values)
        return cls(
            count=len(ordered),
            p50=round(percentile(ordered, 50), 2),
            p95=round(percentile(ordered, 95), 2),
            max=round(ordered[-1], 2),
        )


class Requests(BaseModel):
    """Honcho requests of a run by route template, and the request bytes sent."""

    model_config = _OUT

    total: int = 0
    bytes_sent: int = 0
    by_route: dict[str, int] = {}
    failed: int = 0  # transport errors and 5xx answers


class Run(BaseModel):
    """One case under one configuration (`memory` or `baseline`)."""

    model_config = _OUT

    mode: Literal["memory", "baseline"]
    skipped: Code | None = None  # why the run did not happen (e.g. `live.fake_only`)
    passed: bool
    answered: bool  # every positive expectation met: the expected memory was there
    expectations: int
    expectations_passed: int
    probes: list[Probe] = []
    records: list[Record] = []
    recall_ms: Latency
    record_ms: Latency
    timeouts: int = 0
    errors: dict[str, int] = {}
    requests: Requests = Requests()
    leaks: int = 0
    uploaded_secrets: int = 0  # planted secrets found in what was sent to Honcho
    # Text capture must exclude (tool output, subagent reports, unread event fields, our own
    # injected recall) found in what was sent to Honcho.
    uploaded_excluded: int = 0
    outbox_secrets: int = 0  # planted secrets or excluded text left in an outbox on disk
    # Uploads of planted secrets that the corpus marks as a known product defect, by defect id:
    # reported here, apart from the gate, until the defect is fixed.
    known_failures: dict[str, int] = {}
    duration_ms: float = 0.0


class CaseReport(BaseModel):
    """One corpus case: its synthetic identities and its two runs."""

    model_config = _OUT

    case_id: str
    spec_case: int
    gates: list[str]
    workspaces: list[str]
    peers: list[str]
    projects: list[str]
    runs: list[Run]


class Gate(BaseModel):
    """One promotion gate of Honcho spec §22: passed or not, with its number."""

    model_config = _OUT

    name: str
    passed: bool
    measured: bool
    value: float | None
    summary: str  # what was measured, in the runner's words (never corpus text)


class Report(BaseModel):
    """The whole evaluation."""

    model_config = _OUT

    format: Literal["artmem-eval-report/1"] = FORMAT
    backend: Literal["fake", "live", "manual"]
    recall_timeout_ms: int
    grace_ms: int
    cases: list[CaseReport]
    gates: list[Gate] = []
    duration_ms: float = 0.0
    # Live: what cleanup could not delete (workspace ids, `workspace/sessions/id`); never a gate.
    cleanup_left: list[str] = []


def percentile(ordered: list[float], pct: float) -> float:
    """The nearest-rank percentile of a sorted, non-empty list."""
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started`, a `time.perf_counter()` reading."""
    return round((time.perf_counter() - started) * 1e3, 3)


def estimated_tokens(chars: int) -> int:
    """Tokens as the recall budget counts them: characters / 4, rounded up."""
    return math.ceil(chars / 4)
