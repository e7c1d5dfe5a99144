"""Each promotion gate of `artmem eval` fails when its property is broken on purpose.

Every test breaks one thing in the product (or, for the improvement, makes the baseline the
same as memory), runs only the corpus cases that exercise it, and expects exactly that gate to
fail. Nothing waits on a clock: slowness is the fake's `hold`, released by the runner.
"""

from __future__ import annotations

import msgspec

from harness_plugin import cli
from harness_plugin.eval import _play, evaluate
from harness_plugin.eval._backend import HOLD_LIMIT_S
from harness_plugin.memory import _capture, _conversation, _recall
from harness_plugin.worker import _hybrid
from indexer import MemorySearch, honcho_adapter


def _gate(report, name):
    (gate,) = [g for g in report.gates if g.name == name]
    return gate


def _fails(report, name):
    gate = _gate(report, name)
    assert gate.measured and not gate.passed, gate
    return gate


def _search_without(*dropped: str):
    """`search_memory` with part of its scope removed, on the server and in the re-check."""

    def search(self, project_id, query, limit):
        scope = {"layer": "conversation", "project_id": project_id,
                 "user_peer_id": self.settings.user_peer_id}  # fmt: skip
        for key in dropped:
            del scope[key]
        with honcho_adapter.honcho_errors():
            found = self._sdk().search(query, filters={"metadata": scope}, limit=limit)
        hits = [honcho_adapter._memory_hit(m, scope) for m in found]
        return MemorySearch(hits=[h for h in hits if h is not None])

    return search


def test_the_report_passes_before_anything_is_broken():
    report = evaluate(cases=["3", "4"])
    assert _gate(report, "isolation").passed and _gate(report, "isolation").value == 0


def test_a_search_without_the_project_filter_leaks_across_projects(monkeypatch):
    monkeypatch.setattr(honcho_adapter.HonchoMemoryService, "search_memory",
                        _search_without("project_id"))  # fmt: skip
    gate = _fails(evaluate(cases=["3"]), "isolation")
    assert gate.value > 0  # foreign facts were shown


def test_a_search_without_the_person_filter_leaks_across_people(monkeypatch):
    monkeypatch.setattr(honcho_adapter.HonchoMemoryService, "search_memory",
                        _search_without("user_peer_id"))  # fmt: skip
    report = evaluate(cases=["4"])
    assert _fails(report, "isolation").value > 0
    (case,) = report.cases
    assert not case.runs[0].passed


def test_an_identity_redactor_sends_the_secrets(monkeypatch):
    monkeypatch.setattr(_conversation, "redact", _NoRedaction())
    gate = _fails(evaluate(cases=["1"]), "no_secrets")
    assert gate.value >= 1


class _NoRedaction:
    """`redact` reduced to bounding: every secret goes through as it is."""

    def __call__(self, text, *, max_chars, single_line=False):
        from cards.redaction import RedactionResult

        return RedactionResult(text[:max_chars], 0, (), len(text) > max_chars)


def test_capture_without_its_source_filter_sends_a_subagents_words(monkeypatch):
    # Every message not from the model counts as the person's: a subagent's report (and our own
    # injected recall) would be captured as what the user said.
    def any_source(source):
        return "model" if isinstance(source, dict) and source.get("kind") == "model" else "user"

    monkeypatch.setattr(_capture, "_source_kind", any_source)
    report = evaluate(cases=["9"])
    gate = _fails(report, "no_secrets")
    assert report.cases[0].runs[0].uploaded_excluded >= 1 and gate.value >= 1


def test_a_block_that_does_not_mark_corrections_fails_the_correction_gate(monkeypatch):
    monkeypatch.setattr(
        _recall, "_provenance", lambda hit, superseded: f"session {hit.honcho_session_id}"
    )
    report = evaluate(cases=["5"])
    _fails(report, "correction")
    observed = [o.observed for p in report.cases[0].runs[0].probes for o in p.observations
                if o.kind == "superseded"]  # fmt: skip
    assert "contradictory" in observed


def test_a_store_that_calls_everything_fresh_fails_the_freshness_gate(monkeypatch, capsys):
    from cards import Freshness
    from cas import _results  # where both backends take their freshness verdict

    monkeypatch.setattr(
        _results, "freshness_verdict", lambda recorded, current: (Freshness.FRESH, ())
    )
    assert cli.main(["eval", "--case", "15"]) == 1  # a failed gate fails the command
    out = capsys.readouterr().out
    assert "FAIL  freshness" in out and "FAILED: freshness" in out


def test_recalled_markers_left_as_they_are_fail_the_injection_gate(monkeypatch):
    monkeypatch.setattr(_recall, "_MARKER", _recall.re.compile(r"(?!)"))  # matches nothing
    report = evaluate(cases=["8"])
    _fails(report, "injection")
    observed = [o.observed for p in report.cases[0].runs[0].probes for o in p.observations]
    assert "not_inert" in observed


def test_a_search_that_does_not_fail_open_fails_the_outage_gate(monkeypatch):
    def waits_without_a_net(future, deadline_s, outcome):
        return future.result(timeout=deadline_s)  # a timeout now escapes the tool

    monkeypatch.setattr(_hybrid, "_wait", waits_without_a_net)
    report = evaluate(cases=["12"])
    _fails(report, "outage")
    assert report.cases[0].runs[0].errors.get("worker.internal", 0) >= 1


def test_recall_without_its_deadline_fails_the_latency_gate(monkeypatch):
    reads = _recall.Recall.reads

    def no_deadline(self, project_id, query):
        self.config = msgspec.structs.replace(self.config, timeout_ms=10_000)
        return reads(self, project_id, query)

    monkeypatch.setattr(_recall.Recall, "reads", no_deadline)
    report = evaluate(cases=["10"])
    gate = _fails(report, "latency")
    assert "1 past their deadline" in gate.summary
    slow = max(p.latency_ms for p in report.cases[0].runs[0].probes if p.method == "first-step")
    assert slow >= HOLD_LIMIT_S * 1000 * 0.9  # it waited for the held request itself
    _fails(report, "outage")


def test_a_block_past_its_budget_fails_the_token_gate(monkeypatch):
    render = _recall.render

    def unbounded(recalled, cards, config):
        return render(recalled, cards, msgspec.structs.replace(config, max_tokens=8000))

    monkeypatch.setattr(_recall, "render", unbounded)
    report = evaluate(cases=["11"])
    gate = _fails(report, "token_budget")
    assert gate.value > 1.0  # the largest block exceeds its budget


def test_a_baseline_that_remembers_as_much_shows_no_improvement(monkeypatch):
    configure = _play.person_config

    def always_memory(case, mode, person, backend, base):
        return configure(case, "memory", person, backend, base)

    monkeypatch.setattr(_play, "person_config", always_memory)
    gate = _fails(evaluate(cases=["2", "7"]), "improvement")
    assert gate.value == 0


def test_gates_judge_only_what_was_measured():
    report = evaluate(cases=["15"])  # no conversation: no first step, no injection
    measured = {gate.name for gate in report.gates if gate.measured}
    assert measured == {"isolation", "freshness", "no_secrets", "improvement"}
    assert all(gate.passed for gate in report.gates if gate.measured)
