"""Issue 28 at the command line: `artmem edit`, `rm`, `gc`, `[retention]`, and Honcho's copy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fingerprint
from host_helpers import KEY, caller, environ, export, host_config, write_config

from cards import ConfigError
from cas import fsck
from harness_plugin import build_store
from harness_plugin._runtime import Runtime
from harness_plugin.cli import main
from harness_plugin.config import load_config, parse_config
from harness_plugin.worker._caller import parse_caller
from harness_plugin.worker._tools import ToolHost
from indexer.testing import FakeHoncho

ARTMEM = str(Path(sys.executable).parent / "artmem")
UNATTENDED = "[retention]\nunattended = true\ngrace_hours = 0\n"


@pytest.fixture
def env(tmp_path, monkeypatch):
    config, project_root = write_config(tmp_path, UNATTENDED + "[limits]\nproject_bytes = 1500\n")
    monkeypatch.setenv("ARTMEM_CONFIG", str(config))
    monkeypatch.chdir(project_root)
    (tmp_path / "rlm" / "sessions" / "s1" / "exports").mkdir(parents=True)
    return tmp_path


def _cli(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _record(capsys, env: Path, name: str, data: bytes, *extra: str) -> dict:
    (env / "rlm" / "sessions" / "s1" / "exports" / name).write_bytes(data)
    code, out = _cli(
        capsys, "record", "--session", "s1", name, "--title", f"Result {name}",
        "--summary", "Per-cohort response table.", "--query-fingerprint", fingerprint(name),
        "--source", "warehouse", "--source-version", "v1", *extra,
    )  # fmt: skip
    assert code == 0, out
    return out


def _store(env: Path):  # type: ignore[no-untyped-def]
    return build_store(load_config(str(env / "artmem.toml")), "trial-analysis")


def test_edit_without_the_source_file_reaches_show_and_search(env, capsys):
    exp = _record(capsys, env, "r.csv", b"a,b\n1,2\n", "--tag", "genomics")["experiment_id"]
    (env / "rlm" / "sessions" / "s1" / "exports" / "r.csv").unlink()
    code, edited = _cli(
        capsys, "edit", exp[:16], "--title", "Zebrafish fin regrowth", "--add-tag", "rnaseq",
        "--remove-tag", "genomics", "--column", "x", "--column", "y",
    )  # fmt: skip
    assert code == 0 and edited["changed"] == ["title", "tags", "columns"]
    code, shown = _cli(capsys, "show", exp)
    assert shown["card"]["title"] == "Zebrafish fin regrowth"
    assert shown["card"]["tags"] == ["rnaseq"] and shown["card"]["columns"] == ["x", "y"]
    code, found = _cli(capsys, "search", "zebrafish")
    assert [h["experiment_id"] for h in found["hits"]] == [exp]
    code, again = _cli(capsys, "edit", exp, "--if-revision", edited["previous_revision"],
                       "--title", "Stale")  # fmt: skip
    assert code == 1 and again["error"]["code"] == "cas.edit_conflict"
    assert "artmem show" in again["error"]["message"]


@pytest.mark.parametrize("flag", ["--source-version", "--query-fingerprint", "--artifact"])
def test_identity_fields_are_refused_as_a_new_record(env, capsys, flag):
    exp = _record(capsys, env, "r.csv", b"a\n1\n")["experiment_id"]
    code, out = _cli(capsys, "edit", exp, flag, "v2")
    assert code == 1 and out["error"]["code"] == "input.identity_field"
    assert "artmem record" in out["error"]["message"]


def test_an_empty_edit_is_refused(env, capsys):
    exp = _record(capsys, env, "r.csv", b"a\n1\n")["experiment_id"]
    code, out = _cli(capsys, "edit", exp)
    assert code == 1 and out["error"]["code"] == "input.invalid"


def test_two_concurrent_editors_one_wins_the_other_is_told(env, capsys):
    exp = _record(capsys, env, "r.csv", b"a\n1\n")["experiment_id"]
    code, first = _cli(capsys, "edit", exp, "--add-tag", "start")
    revision = first["revision"]
    procs = [
        subprocess.Popen(
            [ARTMEM, "edit", exp, "--if-revision", revision, "--title", f"Editor {n}", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for n in range(2)
    ]
    outcomes = [(p.wait(timeout=120), json.loads(p.communicate()[0])) for p in procs]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 1], outcomes
    winner = codes_in_order = [code for code, _ in outcomes]
    (loser,) = [out for code, out in outcomes if code == 1]
    assert loser["error"]["code"] == "cas.edit_conflict"
    code, shown = _cli(capsys, "show", exp)
    assert shown["card"]["title"] == f"Editor {codes_in_order.index(0)}", winner


def test_a_re_record_with_a_tag_adds_it(env, capsys):
    _record(capsys, env, "r.csv", b"a\n1\n", "--tag", "genomics")
    again = _record(capsys, env, "r.csv", b"a\n1\n", "--tag", "rnaseq")
    code, shown = _cli(capsys, "show", again["experiment_id"])
    assert shown["card"]["tags"] == ["genomics", "rnaseq"] and again["changed"] == ["tags"]


def test_rm_then_nothing_finds_it_and_fsck_is_clean(env, capsys):
    exp = _record(capsys, env, "r.csv", b"a\n1\n")["experiment_id"]
    keep = _record(capsys, env, "k.csv", b"k\n2\n")["experiment_id"]
    code, removed = _cli(capsys, "rm", exp)
    assert code == 0 and removed["removed"][0]["experiment_id"] == exp
    for argv in (("show", exp), ("resolve", exp)):
        code, out = _cli(capsys, *argv)
        assert code == 1 and out["error"]["code"] == "cas.experiment_not_found", argv
    code, found = _cli(capsys, "search", "Result")
    assert [h["experiment_id"] for h in found["hits"]] == [keep]
    code, listed = _cli(capsys, "list")
    assert [e["experiment_id"] for e in listed["experiments"]] == [keep]
    code, checked = _cli(capsys, "fsck")
    assert code == 0 and checked["ok"], checked
    audit = list((Path(_store(env).local_path(("audit",)))).iterdir())
    assert len(audit) == 1 and b"Result" not in audit[0].read_bytes()


def test_gc_dry_run_frees_nothing_and_apply_frees_the_bytes(env, capsys):
    exp = _record(capsys, env, "r.csv", b"a\n1\n")["experiment_id"]
    store = _store(env)
    aid = store.load_card(exp).artifact.artifact_id
    _cli(capsys, "rm", exp)
    code, dry = _cli(capsys, "gc")
    assert code == 0 and not dry["applied"] and dry["kinds"]["object"] == {"count": 1, "bytes": 4}
    assert store.has_object(aid)
    code, applied = _cli(capsys, "gc", "--apply")
    assert code == 0 and applied["applied"] and applied["bytes"] == 4
    assert not store.has_object(aid) and fsck(store).ok
    assert main(["gc"]) == 0
    assert "dry run: nothing was deleted" in capsys.readouterr().out


def test_quota_freed_by_rm_and_gc_lets_a_new_record_in(env, capsys):
    first = _record(capsys, env, "big.csv", b"x" * 1000)["experiment_id"]
    (env / "rlm" / "sessions" / "s1" / "exports" / "next.csv").write_bytes(b"y" * 1000)
    argv = ["record", "--session", "s1", "next.csv", "--title", "T", "--summary", "S",
            "--query-fingerprint", fingerprint("n"), "--source", "w",
            "--source-version", "v"]  # fmt: skip
    code, refused = _cli(capsys, *argv)
    assert code == 1 and refused["error"]["code"] == "cas.quota_exceeded"
    _cli(capsys, "rm", first)
    code, refused = _cli(capsys, *argv)
    assert code == 1, "rm alone frees no bytes: the object stays until gc"
    assert _cli(capsys, "gc", "--apply")[0] == 0
    code, recorded = _cli(capsys, *argv)
    assert code == 0, recorded


def test_gc_apply_without_a_terminal_is_refused_unless_unattended(tmp_path, monkeypatch):
    config, project_root = write_config(tmp_path)
    proc = subprocess.run(
        [ARTMEM, "--config", str(config), "gc", "--apply", "--json"], cwd=project_root,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"]["code"] == "cas.unattended_refused"


@pytest.mark.parametrize(
    ("table", "what"),
    [
        ("grace_hours = -1", "grace_hours"),
        ('grace_hours = "1"', "grace_hours"),
        ("quarantine_days = 99999", "quarantine_days"),
        ("unattended = 1", "unattended"),
        ("forever = true", "forever"),
    ],
)
def test_bad_retention_settings_fail_at_start(tmp_path, table, what):
    text = (
        f'artifact_root = "{tmp_path / "a"}"\nrlm_root = "{tmp_path / "r"}"\n'
        f'state_root = "{tmp_path / "s"}"\n[[projects]]\nid = "p"\nroot = "{tmp_path / "w"}"\n'
        f"[retention]\n{table}\n"
    )
    with pytest.raises(ConfigError, match=f"retention.{what}"):
        parse_config(text)


def test_status_shows_the_retention_policy(env, capsys):
    code, status = _cli(capsys, "status")
    assert status["retention"] == {
        "grace_hours": 0.0, "quarantine_days": 30.0, "dead_letter_days": 30.0, "unattended": True,
    }  # fmt: skip
    main(["status"])
    assert "retention: gc keeps objects younger than 0.0 h" in capsys.readouterr().out


def test_rm_retires_the_honcho_copy_and_searches_drop_it(tmp_path):
    from harness_plugin.cli._lifecycle_commands import _retire, _who

    fake = FakeHoncho(api_key=KEY)
    config = host_config(tmp_path, honcho_url="http://honcho.test")
    runtime = Runtime(config, environ=environ(), transport=fake.transport())
    host = ToolHost(runtime, environ=environ())
    who = parse_caller(caller(tmp_path))
    try:
        export(tmp_path, "r.bin", b"x")
        args = {"source_path": "r.bin", "title": "Treatment response by cohort",
                "summary": "Aggregate response table.", "query_fingerprint": fingerprint("r"),
                "source": "w", "source_version": "v1"}  # fmt: skip
        exp = host.call("memory_artifact_record", args, who)["experiment_id"]
        runtime.sync(5)
        found = host.call("memory_search", {"query": "cohort"}, who)
        assert [h["origin"] for h in found["hits"]] == ["both"]
        from cas import remove_experiments
        from fsedge import utc_now

        store = runtime.stores["trial-analysis"]
        removed = remove_experiments(store, [exp], who=_who())
        assert _retire(runtime, "trial-analysis", removed, utc_now())
        found = host.call("memory_search", {"query": "cohort"}, who)
        assert found["hits"] == []  # Honcho still has the card; the retired hit is dropped
        runtime.sync(5)
        kinds = [m.metadata["kind"] for m in fake.messages("artmem-dev")]
        assert kinds == ["experiment-card", "experiment-retired"]
        retired = fake.messages("artmem-dev")[1]
        assert retired.metadata["experiment_id"] == exp and "cohort" not in retired.content
    finally:
        host.close()


def test_rm_before_sync_withdraws_the_waiting_card(tmp_path):
    from harness_plugin.cli._lifecycle_commands import _retire

    fake = FakeHoncho(api_key=KEY)
    config = host_config(tmp_path, honcho_url="http://honcho.test")
    runtime = Runtime(config, environ=environ(), transport=fake.transport())
    host = ToolHost(runtime, environ=environ())
    try:
        export(tmp_path, "r.bin", b"x")
        args = {"source_path": "r.bin", "title": "Secret title never sent",
                "summary": "Aggregate response table.", "query_fingerprint": fingerprint("r"),
                "source": "w", "source_version": "v1"}  # fmt: skip
        exp = host.call("memory_artifact_record", args, parse_caller(caller(tmp_path)))
        from cas import remove_experiments
        from fsedge import utc_now

        removed = remove_experiments(runtime.stores["trial-analysis"], [exp["experiment_id"]],
                                     who="ops")  # fmt: skip
        _retire(runtime, "trial-analysis", removed, utc_now())
        runtime.sync(5)
        sent = b"".join(r.raw_body for r in fake.requests)
        assert b"Secret title" not in sent
        assert [m.metadata["kind"] for m in fake.messages("artmem-dev")] == ["experiment-retired"]
    finally:
        host.close()


def test_a_revision_may_be_given_as_printed_and_must_look_like_one(env, capsys):
    exp = _record(capsys, env, "r.csv", b"a\n1\n")["experiment_id"]
    code, first = _cli(capsys, "edit", exp, "--summary", "Once")
    code, second = _cli(capsys, "edit", exp, "--if-revision", first["revision"][:12],
                        "--summary", "Twice")  # fmt: skip
    assert code == 0 and second["previous_revision"] == first["revision"]
    code, out = _cli(capsys, "edit", exp, "--if-revision", "not-hex", "--summary", "x")
    assert code == 1 and out["error"]["code"] == "input.invalid"
