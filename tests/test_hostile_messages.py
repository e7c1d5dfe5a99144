"""No error message repeats hostile text: 5,000-character values through every error path we reach.

A hostile value (terminal escapes, a bidi override, NUL, newlines, 5,000 characters) is fed
where a caller, a card file or a table can put it. What reaches a person or a model is short,
escaped, and never a long run of the value.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fingerprint
from host_helpers import caller, cli_project, write_config
from serve_helpers import ServeProcess

from cards import ArtifactError, dump_card, excerpt, parse_card, parse_experiment_id
from cards._error_root import MAX_MESSAGE_CHARS
from harness_plugin.cli import main

RUN = "Z" * 100  # (and "Y" * 100, below)
HOSTILE = "\x1b[2J\u202e\x00" + "Z" * 4990 + "\r\n\u200b"


def _check(message: str) -> None:
    assert len(message) <= MAX_MESSAGE_CHARS + 40, len(message)
    assert RUN not in message and RUN.replace("Z", "Y") not in message
    for forbidden in ("\x1b", "\u202e", "\x00", "\n", "\r", "\u200b"):
        assert forbidden not in message, repr(forbidden)


def _raised(call) -> str:
    with pytest.raises(ArtifactError) as caught:
        call()
    return caught.value.to_dict()["message"]


@pytest.mark.parametrize(
    "value", [HOSTILE, [HOSTILE], {"v": HOSTILE}, 10**30, -1.5, None, True, "2"]
)
def test_a_hostile_schema_version_is_named_briefly(value):
    card = {"schema_version": value, "title": HOSTILE}
    _check(_raised(lambda: parse_card(json.dumps(card).encode())))


def test_a_hostile_card_field_is_never_quoted(ws):
    ws.export("a.bin", b"bytes")
    document = json.loads(dump_card(ws.record(ws.store(), "a.bin").card))
    for field in ("title", "summary", "source", "media_type", "experiment_id"):
        bad = {**document, field: HOSTILE}
        _check(_raised(lambda bad=bad: parse_card(json.dumps(bad).encode())))


def test_a_hostile_id_is_never_quoted():
    _check(_raised(lambda: parse_experiment_id(HOSTILE)))


@pytest.mark.parametrize("value", [HOSTILE, "x" * 10_000, 12, None, ["a"]])
def test_excerpt_is_short_and_escaped(value):
    shown = excerpt(value)
    assert len(shown) < 120 and shown.isprintable()


@pytest.fixture
def workspace(tmp_path, monkeypatch, capsys):
    exports = cli_project(tmp_path, monkeypatch, "[tools]\nartifact_memory = true\n")
    # A table whose column name is itself hostile (a file can say anything).
    pq.write_table(pa.table({"k": [1, 2], HOSTILE: ["a", "b"]}), exports / "t.parquet")
    argv = ["record", "--session", "s1", "t.parquet", "--title", "T", "--summary", "S",
            "--query-fingerprint", fingerprint("t"), "--source", "w", "--source-version", "v1",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["experiment_id"]


def _cli_error(capsys, *argv: str) -> str:
    assert main([*argv, "--json"]) != 0
    out = capsys.readouterr().out
    return json.loads(out)["error"]["message"]


@pytest.mark.parametrize(
    "argv",
    [
        ["resolve", HOSTILE],
        ["show", "exp_" + HOSTILE],
        ["list", "--since", HOSTILE],
        ["search", HOSTILE, "--project", HOSTILE],
        ["record", "--session", HOSTILE, "x.bin", "--title", "T", "--summary", "S",
         "--query-fingerprint", "0" * 64, "--source", "w", "--source-version", "v1"],
        ["record", "--session", "s1", HOSTILE, "--title", "T", "--summary", "S",
         "--query-fingerprint", "0" * 64, "--source", "w", "--source-version", "v1"],
        ["record", "--session", "s1", "t.parquet", "--title", HOSTILE, "--summary", "S",
         "--query-fingerprint", "0" * 64, "--source", "w", "--source-version", "v1"],
        ["slice", "{exp}", "--where", HOSTILE],
        ["slice", "{exp}", "--where", f"k = '{HOSTILE}'"],
        ["slice", "{exp}", "--where", f"{HOSTILE[4:50]} = 1"],
        ["slice", "{exp}", "--columns", HOSTILE.replace("Z", "Y")],
        ["slice", "{exp}", "--format", HOSTILE],
        ["export", "{exp}", "/nonexistent-dir/" + "Z" * 200],
    ],
)  # fmt: skip
def test_cli_errors_never_repeat_hostile_text(workspace, capsys, argv):
    _check(_cli_error(capsys, *(a.replace("{exp}", workspace) for a in argv)))


def test_a_hostile_column_named_by_the_file_is_shown_briefly(workspace, capsys):
    _check(_cli_error(capsys, "slice", workspace, "--columns", "missing"))


def test_worker_errors_never_repeat_hostile_text(tmp_path):
    config, project_root = write_config(tmp_path, "[tools]\nartifact_memory = true\n")
    who = caller(tmp_path)
    worker = ServeProcess(config)
    try:
        replies = [
            worker.request("tools/call", who, {"name": HOSTILE, "arguments": {}}),
            worker.request(HOSTILE, who, {}),
            worker.request("tools/call", {**who, "session_id": HOSTILE}, {"name": "memory_status"}),
            worker.request(
                "tools/call", who, {"name": "memory_artifact_record", "arguments": {
                    "path": HOSTILE, "title": HOSTILE, "summary": HOSTILE, HOSTILE: 1}},
            ),
            worker.request("tools/call", who, {"name": "memory_artifact_resolve", "arguments": {
                "experiment_id": HOSTILE}}),
            worker.request("tools/call", who, {"name": "memory_search", "arguments": {
                "query": "q", "limit": HOSTILE}}),
        ]  # fmt: skip
    finally:
        worker.shutdown()
    for reply in replies:
        assert not reply["ok"], reply
        _check(reply["error"]["message"])
