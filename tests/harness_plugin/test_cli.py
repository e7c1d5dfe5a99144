"""The `artmem` CLI: JSON for scripts, typed errors, exit codes, and the demo."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fingerprint
from host_helpers import cli_project

from harness_plugin.cli import main


@pytest.fixture
def env(tmp_path, monkeypatch):
    exports = cli_project(tmp_path, monkeypatch)
    (exports / "result.bin").write_bytes(os.urandom(3000))
    return tmp_path


def _run(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def _record(capsys, *extra: str) -> tuple[int, dict]:
    return _run(
        capsys,
        "record", "--session", "s1", "result.bin",
        "--title", "Treatment response", "--summary", "Response by cohort.",
        "--query-fingerprint", fingerprint(), "--source", "warehouse",
        "--source-version", "v1", "--tag", "cohort", "--column", "response", *extra,
    )  # fmt: skip


def test_record_resolve_search_status_fsck(env, capsys):
    code, recorded = _record(capsys)
    assert code == 0
    assert set(recorded) == {
        "experiment_id", "artifact_id", "sha256", "bytes", "deduplicated",
        "local_saved", "honcho_queued", "index_state", "warnings", "changed",
    }  # fmt: skip
    assert recorded["local_saved"] and not recorded["honcho_queued"]
    assert recorded["index_state"] == "disabled"
    code, again = _record(capsys)
    assert again["deduplicated"] and again["experiment_id"] == recorded["experiment_id"]

    code, resolved = _run(
        capsys, "resolve", recorded["experiment_id"], "--current-source-version", "v2"
    )
    assert code == 0 and resolved["freshness"] == "stale" and resolved["warnings"]
    assert (
        Path(resolved["path"]).read_bytes()
        == (env / "rlm/sessions/s1/exports/result.bin").read_bytes()
    )
    assert resolved["artifact"]["sha256"] == recorded["sha256"]
    assert resolved["card"]["title"] == "Treatment response"

    code, found = _run(capsys, "search", "cohort")
    assert code == 0 and [h["experiment_id"] for h in found["hits"]] == [recorded["experiment_id"]]
    assert found["hits"][0]["kind"] == "experiment-card"
    assert found["hits"][0]["trust"] == "untrusted-data"

    code, status = _run(capsys, "status")
    text = json.dumps(status)
    assert status["projects"][0]["cards"] == 1
    for secret in ("trial-analysis", "Treatment", str(env), recorded["experiment_id"]):
        assert secret not in text  # status is content-free

    code, report = _run(capsys, "fsck")
    assert code == 0 and report["ok"]


def test_errors_are_typed_json_and_exit_non_zero(env, capsys):
    code, out = _run(capsys, "resolve", "exp_" + "a" * 52)
    assert code == 1 and out["error"]["code"] == "cas.experiment_not_found"
    code, out = _run(capsys, "resolve", "not-an-id")
    assert code == 1 and out["error"]["code"] == "input.invalid_id"
    code, out = _record(capsys, "--media-type", "NOT A TYPE")
    assert code == 1 and out["error"]["code"] == "input.invalid"
    code, out = _run(capsys, "search", "x", "--limit", "500")
    assert code == 1 and out["error"]["code"] == "input.invalid"


def test_hostile_path_is_a_typed_error(env, capsys):
    code, out = _run(
        capsys,
        "record", "--session", "s1", "../../../etc/passwd", "--title", "t", "--summary", "s",
        "--query-fingerprint", fingerprint(), "--source", "x", "--source-version", "v",
    )  # fmt: skip
    assert code == 1 and out["error"]["code"] == "cas.path_escape"


def test_unknown_project_and_missing_config(env, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out = _run(capsys, "search", "x")
    assert code == 1 and out["error"]["code"] == "input.unknown_project"
    code, out = _run(capsys, "search", "x", "--project", "trial-analysis")
    assert code == 0
    monkeypatch.delenv("ARTMEM_CONFIG")
    code, out = _run(capsys, "status")
    assert code == 1 and out["error"]["code"] == "config.invalid"


def test_fsck_exits_non_zero_while_it_finds_a_problem(env, capsys):
    _, recorded = _record(capsys)
    code, resolved = _run(capsys, "resolve", recorded["experiment_id"])
    path = Path(resolved["path"])
    path.chmod(0o600)
    path.write_bytes(b"corrupt")
    code, report = _run(capsys, "fsck")
    assert code == 1 and report["invalid_objects"] == [recorded["artifact_id"]]
    code, report = _run(capsys, "fsck", "--repair")
    assert report["quarantined"] == [recorded["artifact_id"]]
    code, out = _run(capsys, "resolve", recorded["experiment_id"])
    assert code == 1 and out["error"]["code"] == "cas.object_missing"


def test_human_output_is_readable(env, capsys):
    assert main(["search", "nothing-matches-this"]) == 0
    assert "no matching experiment cards" in capsys.readouterr().out
    assert main(["resolve", "bad"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("artmem: error [input.invalid_id]")


def test_no_command_prints_usage(capsys):
    assert main([]) == 2


def test_demo_runs_without_configuration(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("ARTMEM_CONFIG", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    code, out = _run(capsys, "demo")
    assert code == 0
    steps = {step["step"]: step for step in out["steps"]}
    assert steps["export"]["bytes"] > 16 * 1024 * 1024
    assert not steps["record-1"]["deduplicated"] and steps["record-2"]["deduplicated"]
    assert steps["search"]["hits"][0]["experiment_id"] == steps["record-1"]["experiment_id"]
    resolves = [s for s in out["steps"] if s["step"] == "resolve"]
    assert [r["freshness"] for r in resolves] == ["fresh", "stale"]
    assert steps["slice"]["rows"] == 5
    assert steps["slice"]["chunks_verified"] < steps["export"]["bytes"] // (4 << 20)
    assert list(tmp_path.iterdir()) == []  # the workspace is removed


def test_console_script_is_installed():
    exe = shutil.which("artmem", path=str(Path(sys.executable).parent))
    assert exe is not None
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True)
    assert "record" in proc.stdout and "demo" in proc.stdout


def test_demo_keep_leaves_a_workspace_the_printed_commands_work_in(tmp_path):
    exe = str(Path(sys.executable).parent / "artmem")
    env = {k: v for k, v in os.environ.items() if k != "ARTMEM_CONFIG"} | {"TMPDIR": str(tmp_path)}
    shown = subprocess.run([exe, "demo", "--keep"], capture_output=True, text=True, env=env,
                           check=True).stdout  # fmt: skip
    assert "   $ artmem record --session demo-session-1" in shown
    assert "   $ artmem slice exp_" in shown
    lines = [line.strip() for line in shown.split("Go on with:", 1)[1].splitlines()]
    export_line, cd_line, *commands = [line for line in lines if line][:6]
    env["ARTMEM_CONFIG"] = export_line.removeprefix("export ARTMEM_CONFIG=")
    assert Path(env["ARTMEM_CONFIG"]).is_file()
    cwd = cd_line.removeprefix("cd ")
    # Step 7 shows what its command prints, line for line.
    step = shown.split("\n7. ", 1)[1].splitlines()[1:]
    command = step[0].removeprefix("   $ ")
    printed = [line.removeprefix("   ") for line in step[1 : step.index("") - 1]]
    done = subprocess.run([exe, *shlex.split(command)[1:]], capture_output=True, text=True,
                          env=env, cwd=cwd, check=True)  # fmt: skip
    assert done.stdout.splitlines() == printed and printed[-1] == "(5 rows)"
    outputs = []
    for command in commands:
        argv = [exe, *shlex.split(command)[1:]]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd)
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    assert "Treatment response by cohort" in outputs[0]  # list
    assert "B" in outputs[2]  # the slice of cohort B
    assert (Path(cwd) / "response.parquet").stat().st_size > 16 * 1024 * 1024  # export


@pytest.mark.parametrize("damage", ["corrupt outbox document", "state root 0755"])
def test_fsck_ok_agrees_with_its_exit_status_and_repair_fixes_what_it_reports(env, capsys, damage):
    # Issue 30: `fsck --json` printed "ok": true with a failing outbox section and exit 1.
    from outbox_helpers import make_entry

    from indexer import Outbox

    _record(capsys)
    state = env / "state"
    if damage == "state root 0755":
        state.mkdir(exist_ok=True)
        os.chmod(state, 0o755)  # as a bucket host's cache used to create it
    else:
        entry = make_entry(1)
        Outbox(str(state)).admit(entry)
        (state / "outbox" / "pending" / f"{entry.delivery_id}.json").write_bytes(b"garbage")
    code, report = _run(capsys, "fsck")
    assert code == 1 and report["ok"] is False and report["problems"] >= 1
    assert report["outbox"]["ok"] is False
    code, report = _run(capsys, "fsck", "--repair")
    assert code == 0 and report["ok"] is True, report
    code, report = _run(capsys, "fsck")
    assert code == 0 and report["ok"] is True and report["problems"] == 0
    assert main(["fsck"]) == 0 and capsys.readouterr().out.rstrip().endswith("ok")
