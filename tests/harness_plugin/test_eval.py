"""`artmem eval` (Honcho spec §8.3, §22): the corpus, the runner, the report, the live mode's care.

The whole corpus runs once against the fake Honcho (module fixture) and must pass every gate;
its report must hold telemetry only: no string of the corpus, no secret, no path. The gates
broken on purpose are in `test_eval_gates.py`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import honcho
import httpx
import pytest

from cards import InvalidInput, RemoteMisconfigured
from harness_plugin import cli
from harness_plugin.config import config_from_mapping
from harness_plugin.eval import _backend, evaluate, passed, report_lines, write_report
from harness_plugin.eval._corpus import Turn, expectations, load_corpus, parse_case
from harness_plugin.eval._gates import gates
from harness_plugin.eval._telemetry import CaseReport, Latency, Probe, Report, Run
from harness_plugin.eval._world import fingerprint, planted_secrets
from indexer.testing import FakeHoncho

# Keys whose values are identifiers or enumerations (the report may name those), not content.
IDENTIFIER_KEYS = {
    "id", "kind", "person", "session", "project", "dir", "peer", "workspace", "tool", "label",
    "experiment", "expect", "how", "end", "capture", "gates", "hold", "name", "value", "code",
}  # fmt: skip
KEY = "live-test-key-2b9c"  # the fake's key in the live-mode tests
PROTOCOL_WORDS = {"unknown"}  # the literal source version that means "unverifiable"
PLACEHOLDER = re.compile(r"\{(?:secret|fp|exports):[a-z0-9_-]+\}")


@pytest.fixture(scope="module")
def report() -> Report:
    return evaluate()


def _corpus_documents() -> list[dict]:
    folder = resources.files("harness_plugin.eval").joinpath("corpus")
    return [
        tomllib.loads(entry.read_text(encoding="utf-8"))
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".toml")
    ]


def _content(value: object, key: str | None = None) -> list[str]:
    """Every string of a corpus document that is content, not an identifier."""
    if isinstance(value, dict):
        return [s for k, v in value.items() if k != "known_failures" for s in _content(v, k)]
    if isinstance(value, list):
        return [s for v in value for s in _content(v, key)]
    if isinstance(value, str) and key not in IDENTIFIER_KEYS:
        return [value]
    return []


def _report_strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_report_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _report_strings(v)]
    return [value] if isinstance(value, str) else []


# -- the corpus ------------------------------------------------------------------------------


def test_the_corpus_holds_every_case_of_the_spec_each_paired():
    cases = load_corpus()
    assert sorted(case.spec_case for case in cases) == list(range(1, 18))
    for case in cases:
        found = list(expectations(case))
        captures = [s.capture for s in case.steps if isinstance(s, Turn) and s.capture]
        positive = [e for e in found if e.positive and not _warns(e)] + [
            c for c in captures if c == "captured"
        ]
        negative = [e for e in found if not e.positive or _warns(e)]
        negative += [c for c in captures if c == "skipped"]
        assert positive and negative, case.id


def _warns(expect) -> bool:
    return expect.expect == "freshness" and expect.value != "fresh"


def test_the_hard_variants_are_there():
    cases = {case.spec_case: case for case in load_corpus()}
    # 14: two experiments with the same bytes, title and summary, only the fingerprint differs.
    records = [c for s in cases[14].steps if isinstance(s, Turn) for c in s.calls
               if c.tool == "memory_artifact_record" and c.label in ("a", "b")]  # fmt: skip
    a, b = (dict(c.arguments) for c in records)
    assert a.pop("query_fingerprint") != b.pop("query_fingerprint") and a == b
    assert records[0].file.text == records[1].file.text
    # 11: thousands of turns; 8 and 17: injection in every field; 9: a subagent's preference.
    assert sum(s.turns for s in cases[11].steps if s.kind == "history") >= 2000
    assert any(isinstance(s, Turn) and s.hostile_fields for s in cases[8].steps)
    card = next(c for s in cases[17].steps if isinstance(s, Turn) for c in s.calls)
    injected = [v for v in card.arguments.values() if "Honcho memory" in str(v) or
                "instructions" in str(v)]  # fmt: skip
    assert len(injected) == 6  # title, summary, tags, columns, source, source version
    assert any(isinstance(s, Turn) and s.child for s in cases[9].steps)
    assert any(isinstance(s, Turn) and s.subagent_text for s in cases[9].steps)


def test_a_malformed_case_is_refused_with_its_file_name():
    with pytest.raises(InvalidInput, match="c99-broken.toml"):
        parse_case("c99-broken.toml", "id = [")
    with pytest.raises(InvalidInput, match="c01-x.toml"):
        parse_case("c01-x.toml", 'id = "c01-x"\nspec_case = 1\nsurprise = 1\nsteps = []')
    text = 'id = "c01-other"\nspec_case = 1\n[[steps]]\nkind = "deliver"\n'
    with pytest.raises(InvalidInput, match="holds case c01-other"):
        parse_case("c01-mine.toml", text)
    with pytest.raises(InvalidInput):
        evaluate(cases=["no-such-case"])


# -- the full run --------------------------------------------------------------------------


def test_every_gate_passes_against_the_fake(report):
    assert [(g.name, g.measured, g.passed) for g in report.gates] == [
        (name, True, True)
        for name in (
            "isolation",
            "correction",
            "freshness",
            "injection",
            "outage",
            "no_secrets",
            "latency",
            "token_budget",
            "improvement",
        )  # fmt: skip
    ]
    for case in report.cases:
        memory, baseline = case.runs
        assert memory.passed and memory.answered, case.case_id
        assert memory.leaks == 0 and memory.uploaded_secrets == 0
        assert not baseline.answered and baseline.requests.total == 0, case.case_id
    improvement = report.gates[-1]
    assert improvement.value == 17 and "17/17 with memory, 0/17 without" in improvement.summary


def test_no_known_defect_is_left_and_no_secret_left_the_machine(report):
    # c01 found recall queries sent to Honcho unredacted; since the fix no case marks a known
    # failure, so the no-secrets gate guards every query too.
    assert all(not run.known_failures for case in report.cases for run in case.runs)
    assert all(run.uploaded_secrets == 0 for case in report.cases for run in case.runs)


def test_the_runs_replay_the_harness_through_the_worker(report):
    cases = {case.spec_case: case for case in report.cases}
    memory = cases[11].runs[0]
    assert memory.record_ms.count >= 2000  # every turn of the history was captured
    assert memory.requests.by_route["POST /v3/workspaces/{ws}/sessions/{s}/messages"] >= 2000
    outage = cases[10].runs[0]
    outcomes = [p.outcome for p in outage.probes if p.method == "first-step"]
    assert outcomes == ["recall.error", "recall.timeout", "injected"]
    assert outage.timeouts >= 1 and outage.requests.failed >= 1
    steps = [p for c in report.cases for p in c.runs[0].probes if p.method == "first-step"]
    assert all(p.timeout_ms and p.budget_tokens for p in steps)


def test_the_report_holds_no_corpus_text_no_secret_and_no_path(report):
    shown = _report_strings(report.model_dump(mode="json"))
    shown += cli_lines(report)
    text = "\n".join(shown).casefold()
    forbidden = set()
    for document in _corpus_documents():
        for value in _content(document):
            for piece in PLACEHOLDER.split(value):
                forbidden.update(line.strip() for line in piece.splitlines() if line.strip())
    forbidden -= PROTOCOL_WORDS
    assert len(forbidden) > 200
    found = [s for s in forbidden if re.search(rf"(?<!\w){re.escape(s.casefold())}(?!\w)", text)]
    assert found == []
    for case in load_corpus():
        for secret in planted_secrets(case):
            assert secret.casefold() not in text
    for name in re.findall(r"\{fp:([a-z0-9_-]+)\}", json.dumps(_corpus_documents())):
        assert fingerprint(name) not in text
    routes = [s for s in shown if s.startswith(("GET /", "POST /", "PUT /", "DELETE /"))]
    path = re.compile(r"(?<![\w}])/[\w.-]+/")  # an absolute path's first directories
    assert [s for s in shown if s not in routes and path.search(s)] == []


def cli_lines(report: Report) -> list[str]:
    from harness_plugin.eval import report_lines

    return report_lines(report, None)


def test_the_report_is_exactly_the_telemetry(report):
    document = report.model_dump(mode="json")
    assert Report.model_validate(document) == report
    assert set(document) == {"format", "backend", "recall_timeout_ms", "grace_ms", "cases",
                             "gates", "duration_ms", "cleanup_left"}  # fmt: skip
    case = document["cases"][0]
    assert set(case) == {"case_id", "spec_case", "gates", "workspaces", "peers", "projects",
                         "runs"}  # fmt: skip
    assert case["peers"] == ["eval-01-ada"] and case["workspaces"] == ["artmem-eval"]
    probe = next(p for p in case["runs"][0]["probes"] if p["method"] == "first-step")
    assert {"method", "results", "latency_ms", "injected_chars", "estimated_tokens",
            "observations", "outcome"} <= set(probe)  # fmt: skip
    assert {o["expected"] for o in probe["observations"]} <= {"present", "absent", "within"}


# -- the command --------------------------------------------------------------------------


def test_the_command_prints_a_table_writes_the_report_and_exits_zero(tmp_path, capsys):
    path = tmp_path / "eval.json"
    assert cli.main(["eval", "--case", "7", "--case", "c15-freshness", "--report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "c07-sparse" in out and "c15-freshness" in out and "PASS  freshness" in out
    assert "n/a   outage" in out  # no outage case ran: not measured
    written = json.loads(path.read_text())
    assert [c["case_id"] for c in written["cases"]] == ["c07-sparse", "c15-freshness"]
    assert cli.main(["eval", "--case", "7", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cases"][0]["case_id"] == "c07-sparse"


def test_help_does_not_load_the_evaluation():
    probe = (
        "import sys\nfrom harness_plugin import cli\ncli._parser()\n"
        "print([m for m in sys.modules if m.startswith(('harness_plugin.eval', 'indexer'))])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_live_needs_honcho_configured(tmp_path, capsys):
    config = tmp_path / "artmem.toml"
    (tmp_path / "work").mkdir()
    config.write_text(
        f'artifact_root = "{tmp_path / "a"}"\nrlm_root = "{tmp_path / "r"}"\n'
        f'state_root = "{tmp_path / "s"}"\n[[projects]]\nid = "p"\nroot = "{tmp_path / "work"}"\n'
    )
    assert cli.main(["--config", str(config), "eval", "--live", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "indexer.disabled"


# -- live mode: its own workspaces only ------------------------------------------------------


def _honcho(url: str):
    document = {
        "artifact_root": "/srv/a", "rlm_root": "/srv/r", "state_root": "/srv/s",
        "projects": [{"id": "p", "root": "/srv/w"}],
        "honcho": {"enabled": True, "base_url": url, "api_key_env": "ARTMEM_EVAL_LIVE_TEST"},
    }  # fmt: skip
    return config_from_mapping(document).honcho


def test_live_mode_creates_and_deletes_only_its_own_workspaces(monkeypatch):
    fake = FakeHoncho(api_key=KEY)
    monkeypatch.setenv("ARTMEM_EVAL_LIVE_TEST", KEY)
    fake._workspace("someone-elses")  # a workspace that must not be touched
    with fake.serve() as url:
        with _backend.live_backend(_honcho(url), settle_s=0) as backend:
            ours = list(backend.workspaces.values())
            assert all(w.startswith("artmem-eval-") for w in ours)
            assert set(fake.workspaces()) == {"someone-elses", *ours}
            with httpx.Client(base_url=url) as http:
                client = _admin_sdk(url, ours[0], http)
                for name in ("s1", "s2"):  # sessions hold the workspace: 409 until deleted
                    client.session(name).add_messages([client.peer("p").message("synthetic")])
    assert backend.left == []
    deleted = [(r.path, r.outcome) for r in fake.requests if r.method == "DELETE"]
    assert deleted == [
        (f"/v3/workspaces/{ours[0]}/sessions/s1", 202),
        (f"/v3/workspaces/{ours[0]}/sessions/s2", 202),
        (f"/v3/workspaces/{ours[0]}", 202),
        (f"/v3/workspaces/{ours[1]}", 202),
    ]


def _admin_sdk(url: str, workspace: str, http: httpx.Client):
    return honcho.Honcho(
        api_key=KEY, base_url=url, workspace_id=workspace, max_retries=0, http_client=http
    )


def test_a_cleanup_that_fails_keeps_the_report_and_names_what_is_left(monkeypatch, tmp_path):
    fake = FakeHoncho(api_key=KEY)
    monkeypatch.setenv("ARTMEM_EVAL_LIVE_TEST", KEY)
    fake.fail_next(2, status=503, kind="workspace_delete")
    seen = []

    def on_report(report):
        deletes = [r for r in fake.requests if r.method == "DELETE"]
        seen.append((len(deletes), list(report.cleanup_left)))
        write_report(report, str(tmp_path / "report.json"))

    with fake.serve() as url:
        report = evaluate(_honcho(url), ["2"], settle_s=0, on_report=on_report)
    main, second = sorted(report.cleanup_left)
    assert main.startswith("artmem-eval-") and second.endswith("-b")
    assert seen[0] == (0, [])  # written before anything was deleted
    assert seen[1][1] == report.cleanup_left  # and again with what is left
    assert passed(report)  # a cleanup is never a gate
    written = Report.model_validate_json((tmp_path / "report.json").read_bytes())
    assert written.cleanup_left == report.cleanup_left
    assert "delete them by hand" in "\n".join(report_lines(report, None))


def test_live_mode_refuses_a_workspace_that_exists(monkeypatch):
    fake = FakeHoncho(api_key=KEY)
    monkeypatch.setenv("ARTMEM_EVAL_LIVE_TEST", KEY)
    monkeypatch.setattr(_backend.secrets, "token_hex", lambda n: "feedc0ffee42")
    fake._workspace("artmem-eval-feedc0ffee42-b")
    with fake.serve() as url:
        with pytest.raises(RemoteMisconfigured, match="already exists"):
            with _backend.live_backend(_honcho(url), settle_s=0):
                pytest.fail("must not start")
    assert fake.workspaces() == ["artmem-eval-feedc0ffee42-b"]
    assert [r for r in fake.requests if r.method == "DELETE" or r.kind == "workspace_create"] == []


def test_live_mode_runs_cases_and_skips_those_needing_the_fake(monkeypatch):
    fake = FakeHoncho(api_key=KEY)
    monkeypatch.setenv("ARTMEM_EVAL_LIVE_TEST", KEY)
    with fake.serve() as url:
        report = evaluate(_honcho(url), ["1", "2", "10"], settle_s=0)
    assert report.backend == "live"
    preference, decision, outage = report.cases
    assert decision.runs[0].passed and decision.runs[0].answered
    # Nothing is told to a live deriver: expectations about what it concluded are not judged.
    assert preference.runs[0].passed and preference.runs[0].expectations == 8  # 11 - 3
    assert [run.skipped for run in outage.runs] == ["live.fake_only", "live.fake_only"]
    assert {g.name for g in report.gates if not g.measured} >= {"outage", "correction"}


# -- the format for hand-written (Stage A) reports -------------------------------------------


def test_gates_judge_a_hand_written_report():
    def run(mode: str, answered: bool, probes: list[Probe]) -> Run:
        return Run(mode=mode, passed=True, answered=answered, expectations=1,
                   expectations_passed=1, probes=probes, recall_ms=Latency.of([]),
                   record_ms=Latency.of([]))  # fmt: skip

    observed = {"kind": "present", "expected": "present", "observed": "present", "passed": True,
                "positive": True}  # fmt: skip
    mcp = Probe(step=0, method="mcp", peer="alice-synthetic", project="demo", outcome="ok",
                results=2, latency_ms=900.0, user_rating=4, observations=[observed])  # fmt: skip
    manual = Report(backend="manual", recall_timeout_ms=1500, grace_ms=500, cases=[
        CaseReport(case_id="c01-preference", spec_case=1, gates=[], workspaces=["stage-a"],
                   peers=["alice-synthetic"], projects=["demo"],
                   runs=[run("memory", True, [mcp]), run("baseline", False, [])]),
    ])  # fmt: skip
    found = {gate.name: gate for gate in gates(manual)}
    assert found["improvement"].passed and found["improvement"].value == 1
    assert found["latency"].passed and found["latency"].value == 900.0  # the MCP recall
    assert not found["correction"].measured
    assert found["isolation"].passed and found["no_secrets"].passed


STAGE_A = Path(__file__).parents[2] / "stage_a"


def test_a_stage_a_report_is_judged_by_the_same_gates(capsys):
    assert cli.main(["eval", "--from", str(STAGE_A / "report-template.json")]) == 0
    out = capsys.readouterr().out
    assert "PASS  improvement" in out and "PASS  latency" in out and "PASS  token_budget" in out
    assert "n/a   correction" in out


def test_a_file_that_is_not_a_report_is_refused(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text('{"format": "something-else"}')
    assert cli.main(["eval", "--from", str(other), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "input.invalid"
    assert cli.main(["eval", "--from", str(other), "--case", "1", "--json"]) == 1
    assert "takes no --live or --case" in capsys.readouterr().out


def test_the_stage_a_composition_and_skill_say_what_spec_8_requires():
    composition = (STAGE_A / "cordis.yml").read_text()
    for line in (
        "name: '@deepseek-ai/dsh-mcp-client'",
        "serverName: honcho",
        "transport: streamable-http",
        "Authorization: !!js '`Bearer ${process.env.HONCHO_API_KEY}`'",
        "X-Honcho-Workspace-ID: !!js process.env.HONCHO_WORKSPACE_ID",
        "failOnStartupError: true",
        "toolCallTimeoutMs: 60000",
    ):
        assert line in composition
    assert "self-hosted" in composition.lower()
    skill = (STAGE_A / "skills" / "honcho-memory" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: honcho-memory\ndescription: ")
    for phrase in (
        "compliance is not a\ndelivery guarantee",
        "asynchronous",
        "Do not poll",
        "mcp__honcho__",
        "Never call a tool that deletes",
    ):
        assert phrase in skill
