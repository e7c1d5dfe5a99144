"""Lineage: parents on the card, `artmem lineage`, and freshness carried down the graph."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from conftest import fingerprint
from host_helpers import cli_project
from hypothesis import given
from hypothesis import strategies as st

from cards import ProjectId, UnknownParent, dump_card, parse_card, parse_metadata
from cards.errors import ParentsFixed
from cards.lineage import ancestry, derived_freshness
from cards.testing import card_for_bytes
from harness_plugin.cli import main


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    exports = cli_project(tmp_path, monkeypatch)

    def run(*argv: str) -> tuple[int, dict]:
        code = main([*argv, "--json"])
        return code, json.loads(capsys.readouterr().out)

    def record(name: str, source: str, version: str, *parents: str) -> str:
        (exports / name).write_text(f"{name} {source} {version}\n")
        extra = [arg for p in parents for arg in ("--derived-from", p)]
        code, view = run("record", "--session", "s1", name, "--title", f"T {name}",
                         "--summary", "S", "--query-fingerprint", fingerprint(name),
                         "--source", source, "--source-version", version, *extra)  # fmt: skip
        assert code == 0, view
        return view["experiment_id"]

    run.record = record  # type: ignore[attr-defined]
    run.exports = exports  # type: ignore[attr-defined]
    return run


def test_three_levels_two_sources(cli):
    # a (warehouse v1) and b (registry r1) -> c (warehouse v2) -> d (warehouse v2)
    a = cli.record("a.txt", "warehouse", "v1")
    b = cli.record("b.txt", "registry", "r1")
    c = cli.record("c.txt", "warehouse", "v2", a, b)
    d = cli.record("d.txt", "warehouse", "v2", c[:16])  # a unique prefix names a parent
    code, view = cli("resolve", d, "--current-source-version", "v2")
    assert code == 0
    assert view["freshness"] == "stale" and view["stale_ancestors"] == [a]
    assert view["derived_from"] == [c]
    assert any(a in w for w in view["warnings"])
    # b is from another source: its version is not compared with the warehouse's
    code, shown = cli("show", c, "--current-source-version", "v2")
    assert shown["freshness"] == "stale" and shown["stale_ancestors"] == [a]
    code, fresh = cli("resolve", a, "--current-source-version", "v1")
    assert fresh["freshness"] == "fresh" and fresh["stale_ancestors"] == []
    code, unchecked = cli("resolve", d)
    assert unchecked["freshness"] == "not_checked"
    code, graph = cli("lineage", c)
    roles = {n["experiment_id"]: n["role"] for n in graph["nodes"]}
    assert roles == {c: "self", a: "ancestor", b: "ancestor", d: "descendant"}
    edges = {(e["parent"], e["child"]) for e in graph["edges"]}
    assert edges == {(a, c), (b, c), (c, d)}
    assert main(["lineage", d]) == 0


def test_a_parent_of_no_card_here_is_refused(cli, tmp_path):
    a = cli.record("a.txt", "warehouse", "v1")
    (cli.exports / "x.txt").write_text("x")
    absent = "exp_" + "a" * 52
    code, view = cli("record", "--session", "s1", "x.txt", "--title", "T", "--summary", "S",
                     "--query-fingerprint", fingerprint("x"), "--source", "w",
                     "--source-version", "v1", "--derived-from", absent)  # fmt: skip
    assert code == 1 and view["error"]["code"] == "lineage.unknown_parent"
    code, view = cli("record", "--session", "s1", "x.txt", "--title", "T", "--summary", "S",
                     "--query-fingerprint", fingerprint("x"), "--source", "w",
                     "--source-version", "v1", "--derived-from", "aaaaaaaaaaaa")  # fmt: skip
    assert code == 1 and view["error"]["code"] == "lineage.unknown_parent"  # a prefix, alike
    assert "no experiment of this project starts with" in view["error"]["message"]
    code, view = cli("record", "--session", "s1", "x.txt", "--title", "T", "--summary", "S",
                     "--query-fingerprint", fingerprint("x"), "--source", "w",
                     "--source-version", "v1", *["--derived-from", a] * 2)  # fmt: skip
    assert code == 1 and view["error"]["code"] == "input.invalid"
    code, listed = cli("list")
    assert [e["experiment_id"] for e in listed["experiments"]] == [a]  # nothing was written


def test_a_parent_from_another_project_is_refused(ws):
    here, there = ws.store("here"), ws.store("there")
    ws.export("a.txt", b"a")
    foreign = ws.record(there, "a.txt").card.experiment_id
    from harness_plugin._lineage import check_parents

    with pytest.raises(UnknownParent):
        check_parents(here, [foreign])
    assert check_parents(there, [foreign]) == [foreign]


def test_parents_are_fixed_at_the_first_record(ws):
    store = ws.store()
    ws.export("a.txt", b"a")
    ws.export("b.txt", b"b")
    a = ws.record(store, "a.txt").card.experiment_id
    b = ws.record(store, "b.txt", query_fingerprint=fingerprint("b"), derived_from=[a]).card
    assert b.derived_from == [a]
    again = ws.record(store, "b.txt", query_fingerprint=fingerprint("b"), title="New").card
    assert again.derived_from == [a] and again.title == "New"  # left out: kept
    with pytest.raises(ParentsFixed):
        ws.record(store, "b.txt", query_fingerprint=fingerprint("b"), derived_from=[])


def test_parents_are_descriptive_and_a_card_without_keeps_its_bytes():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    fields = {"title": "t", "summary": "s", "source": "w", "source_version": "v",
              "query_fingerprint": fingerprint()}  # fmt: skip
    plain = card_for_bytes(b"x", parse_metadata(fields), project_id=ProjectId("p"),
                           session_id="s", now=now)  # fmt: skip
    parent = "exp_" + "b" * 52
    derived = card_for_bytes(b"x", parse_metadata({**fields, "derived_from": [parent]}),
                             project_id=ProjectId("p"), session_id="s", now=now)  # fmt: skip
    assert plain.experiment_id == derived.experiment_id  # identity unchanged by parents
    assert b"derived_from" not in dump_card(plain)
    assert parse_card(dump_card(derived)).derived_from == [parent]
    with pytest.raises(Exception, match="twice"):
        parse_metadata({**fields, "derived_from": [parent, parent]})


# -- freshness over random DAGs ---------------------------------------------------------------

_NOW = datetime(2026, 1, 1, tzinfo=UTC)


@st.composite
def dags(draw):
    """Cards of a random DAG: each node's parents are drawn among earlier nodes."""
    size = draw(st.integers(1, 12))
    cards = []
    for i in range(size):
        parents = draw(st.lists(st.integers(0, i - 1), unique=True, max_size=3)) if i else []
        source = draw(st.sampled_from(["w", "r"]))
        version = draw(st.sampled_from(["v1", "v2", "unknown"]))
        fields = {"title": f"n{i}", "summary": "s", "source": source, "source_version": version,
                  "query_fingerprint": fingerprint(str(i)),
                  "derived_from": [cards[p].experiment_id for p in parents]}  # fmt: skip
        metadata = parse_metadata(fields)
        cards.append(card_for_bytes(str(i).encode(), metadata, project_id=ProjectId("p"),
                                    session_id="s", now=_NOW))  # fmt: skip
    return cards


def _closure(cards, index):
    by_id = {c.experiment_id: c for c in cards}
    seen, stack = set(), list(cards[index].derived_from)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(by_id[node].derived_from)
    return [by_id[i] for i in seen]


@given(dags(), st.sampled_from(["v1", "v2", "unknown", None]), st.data())
def test_the_verdict_is_the_worst_ancestors(cards, current, data):
    from cards.lineage import SEVERITY
    from cards.policy import freshness

    index = data.draw(st.integers(0, len(cards) - 1))
    card = cards[index]
    by_id = {c.experiment_id: c for c in cards}
    found = ancestry(card, lambda ids: [by_id.get(i) for i in ids])
    expected_nodes = _closure(cards, index)
    assert {c.experiment_id for c in found.cards} == {c.experiment_id for c in expected_nodes}
    verdict = derived_freshness(card, found, current)
    same = [card, *(c for c in expected_nodes if c.source == card.source)]
    oracle = max((freshness(c.source_version, current) for c in same), key=SEVERITY.get)
    assert verdict.freshness == oracle
    for culprit in verdict.culprits:
        assert freshness(by_id[culprit].source_version, current) == oracle
        assert by_id[culprit].source == card.source


# -- through the record tool: the model names parents, the host picked the project -------------


def test_the_record_tool_takes_parents_only_from_the_callers_project(tmp_path):
    from host_helpers import caller, environ, export, host_config

    from cards import ArtifactError
    from harness_plugin._runtime import Runtime
    from harness_plugin.worker._caller import parse_caller
    from harness_plugin.worker._tools import ToolHost

    host = ToolHost(Runtime(host_config(tmp_path), environ=environ()), environ=environ())
    here, there = (
        parse_caller(caller(tmp_path)),
        parse_caller(caller(tmp_path, project_dir="other")),
    )

    def args(name: str, version: str, **extra: object) -> dict:
        fields = {"source_path": name, "title": name, "summary": "s", "source": "w"}
        return {
            **fields,
            "query_fingerprint": fingerprint(name),
            "source_version": version,
            **extra,
        }

    try:
        export(tmp_path, "p.bin", b"parent")
        export(tmp_path, "c.bin", b"child")
        parent = host.call("memory_artifact_record", args("p.bin", "v1"), here)["experiment_id"]
        foreign = host.call("memory_artifact_record", args("p.bin", "v1"), there)["experiment_id"]
        assert foreign != parent  # the same bytes, another project's experiment
        with pytest.raises(ArtifactError) as info:
            host.call("memory_artifact_record", args("c.bin", "v2", derived_from=[foreign]), here)
        assert info.value.code == "lineage.unknown_parent"
        child = host.call(
            "memory_artifact_record", args("c.bin", "v2", derived_from=[parent]), here
        )
        resolved = host.call(
            "memory_artifact_resolve",
            {"experiment_id": child["experiment_id"], "current_source_version": "v2"},
            here,
        )
        assert resolved["freshness"] == "stale" and resolved["stale_ancestors"] == [parent]
        assert resolved["derived_from"] == [parent]
    finally:
        host.close()
