"""`record` without ceremony (issue 29): `--query TEXT`, and defaults for descriptive flags.

The fingerprint of `--query` is the SHA-256 of its text, which the card keeps for `show` (and
never hands to a tool's result or to Honcho). A title and a summary a person leaves out default
from the file and what reading it found; a re-record without them keeps the card's. The tool
contract stays as the specification writes it: a kernel's record still needs all three.
"""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from host_helpers import call_tool, write_config

from cards import ArtifactError
from cards.card import QUERY_CHARS
from harness_plugin.cli import main

QUERY = "SELECT id, x, note\nFROM drift\tWHERE site = 3"
CSV = b"id,x,note\n1,2,a\n3,4,\n"


@pytest.fixture
def exports(tmp_path, monkeypatch):
    config, root = write_config(tmp_path)
    monkeypatch.setenv("ARTMEM_CONFIG", str(config))
    monkeypatch.chdir(root)
    path = tmp_path / "rlm" / "sessions" / "s1" / "exports"
    path.mkdir(parents=True)
    (path / "drift.csv").write_bytes(CSV)
    return path


def run(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out or out.err)


def record(capsys, *flags: str, name: str = "drift.csv") -> tuple[int, dict]:
    return run(capsys, "record", "--session", "s1", name, "--source", "lab",
               "--source-version", "v1", *flags)  # fmt: skip


def test_the_query_text_is_the_fingerprint_and_show_displays_it(exports, capsys, tmp_path):
    code, out = record(capsys, "--query", QUERY)
    assert code == 0, out
    exp = out["experiment_id"]
    digest = hashlib.sha256(QUERY.encode()).hexdigest()
    code, again = record(capsys, "--query-fingerprint", digest)  # the same experiment
    assert again["experiment_id"] == exp and again["changed"] == []
    code, shown = run(capsys, "show", exp)
    assert shown["query"] == QUERY  # kept by the re-record that did not restate it
    assert main(["show", exp]) == 0
    text = capsys.readouterr().out
    assert "  query       SELECT id, x, note\n              FROM drift\\tWHERE site = 3\n" in text
    search = run(capsys, "search", digest)[1]  # exact fingerprint match
    assert [hit["experiment_id"] for hit in search["hits"]] == [exp]
    # Never in a tool's result (a model's context may be captured to Honcho).
    raw = call_tool(tmp_path, "memory_artifact_resolve", {"experiment_id": exp})
    assert "drift\t" not in json.dumps(raw) and "query" not in raw["card"]
    assert "SELECT" not in json.dumps(run(capsys, "list")[1])


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ([], "record needs --query TEXT"),
        (["--query", "q", "--query-fingerprint", "a" * 64], "not both"),
        (["--query", "q" * (QUERY_CHARS + 1)], f"at most {QUERY_CHARS}"),
        (["--query", "a\x1bb"], "query: must be printable text"),
        (["--query", "   "], "query: must be printable text"),
    ],
)
def test_a_missing_or_contradictory_query_is_a_typed_error(exports, capsys, flags, words):
    code, out = record(capsys, *flags)
    assert code == 1 and out["error"]["code"] == "input.invalid"
    assert words in out["error"]["message"]


def test_title_and_summary_default_from_the_file(exports, capsys):
    code, out = record(capsys, "--query", "q")
    exp = out["experiment_id"]
    card = run(capsys, "show", exp)[1]["card"]
    assert card["title"] == "drift.csv"
    assert card["summary"] == (
        "Recorded from drift.csv without a summary. A CSV table, 3 columns: id, x, note."
    )
    pq.write_table(pa.table({"k": range(1204)}), exports / "t.parquet")
    out = record(capsys, "--query", "q", name="t.parquet")[1]
    summary = run(capsys, "show", out["experiment_id"])[1]["card"]["summary"]
    assert summary.endswith("A Parquet table, 1,204 rows, 1 column: k.")
    (exports / "b.bin").write_bytes(b"\x00\x01")
    out = record(capsys, "--query", "q", name="b.bin")[1]
    card = run(capsys, "show", out["experiment_id"])[1]["card"]
    assert (card["title"], card["summary"]) == ("b.bin", "Recorded from b.bin without a summary.")


def test_a_re_record_without_them_keeps_the_cards_title_and_summary(exports, capsys):
    exp = record(capsys, "--query", "q", "--title", "Mine", "--summary", "My words.")[1][
        "experiment_id"
    ]
    code, out = record(capsys, "--query", "q")
    assert code == 0 and out["changed"] == []
    card = run(capsys, "show", exp)[1]["card"]
    assert (card["title"], card["summary"]) == ("Mine", "My words.")
    assert record(capsys, "--query", "q", "--title", "New")[1]["changed"] == ["title"]


def test_the_record_tool_still_requires_what_the_specification_requires(tmp_path, capsys):
    exports = tmp_path / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    (exports / "r.csv").write_bytes(CSV)
    arguments = {"source_path": "r.csv", "source": "lab", "source_version": "v1",
                 "query_fingerprint": "a" * 64}  # fmt: skip
    with pytest.raises(ArtifactError) as caught:
        call_tool(tmp_path, "memory_artifact_record", arguments)
    assert caught.value.code == "input.invalid"
    assert "title" in caught.value.message and "summary" in caught.value.message


def test_a_file_name_that_is_not_one_printable_line_still_gives_a_title(exports, capsys):
    (exports / "a\nb\x1b.csv").write_bytes(CSV)
    code, out = record(capsys, "--query", "q", name="a\nb\x1b.csv")
    assert code == 0, out
    card = run(capsys, "show", out["experiment_id"])[1]["card"]
    assert card["title"] == "a?b?.csv"
