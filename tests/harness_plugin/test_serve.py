"""`artmem serve`: the JSONL protocol, concurrency, bad input, and every way to shut down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fingerprint
from host_helpers import caller, export, write_config

ARTMEM = str(Path(sys.executable).parent / "artmem")


@pytest.fixture
def config(tmp_path):
    return write_config(tmp_path, "[tools]\nartifact_memory = true\n")[0]


class Worker:
    def __init__(self, config: Path) -> None:
        self.proc = subprocess.Popen(
            [ARTMEM, "--config", str(config), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("HONCHO")},
        )

    def send(self, request: object) -> None:
        line = request if isinstance(request, str) else json.dumps(request)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        return json.loads(self.proc.stdout.readline())

    def ask(self, request: dict) -> dict:
        self.send(request)
        return self.read()

    def end_input(self) -> None:
        self.proc.stdin.close()
        self.proc.stdin = None  # communicate() must not flush a closed pipe

    def close(self) -> tuple[int, str]:
        out, err = self.proc.communicate(timeout=60)
        assert out == ""
        return self.proc.returncode, err


def _call(rid, name, arguments, who):
    return {"v": 1, "id": rid, "op": "tools/call", "caller": who,
            "params": {"name": name, "arguments": arguments}}  # fmt: skip


def test_protocol_round_trip_and_shutdown(config, tmp_path):
    worker = Worker(config)
    hello = worker.ask({"v": 1, "id": 1, "op": "hello", "caller": None, "params": {}})
    assert hello["ok"] and hello["result"]["protocol"] == 1
    listed = worker.ask({"v": 1, "id": 2, "op": "tools/list", "caller": None})
    names = [t["name"] for t in listed["result"]["tools"]]
    assert names == sorted(
        ["memory_artifact_record", "memory_artifact_resolve", "memory_search", "memory_status"]
    )
    export(tmp_path, "r.bin", b"payload")
    args = {
        "source_path": "r.bin", "title": "Cohort table", "summary": "Per-cohort response.",
        "query_fingerprint": fingerprint(), "source": "warehouse", "source_version": "v1",
    }  # fmt: skip
    recorded = worker.ask(_call("rec", "memory_artifact_record", args, caller(tmp_path)))
    assert recorded["ok"] and recorded["id"] == "rec"
    found = worker.ask(_call(3, "memory_search", {"query": "cohort"}, caller(tmp_path)))
    assert found["result"]["hits"][0]["experiment_id"] == recorded["result"]["experiment_id"]
    status = worker.ask({"v": 1, "id": 4, "op": "status", "caller": None})
    assert status["ok"] and status["result"]["projects"][0]["cards"] == 1
    calls = status["result"]["calls"]
    assert calls["memory_artifact_record.ok"] == 1 and calls["memory_search.remote_disabled"] == 1
    stopping = worker.ask({"v": 1, "id": 5, "op": "shutdown", "caller": None})
    assert stopping == {"v": 1, "id": 5, "ok": True, "result": {"stopping": True}}
    code, log = worker.close()
    assert code == 0
    lines = [json.loads(line) for line in log.splitlines()]
    assert {"worker.started", "worker.stopped"} <= {line["event"] for line in lines}
    for forbidden in ("Cohort", "payload", str(tmp_path), "r.bin"):
        assert forbidden not in log  # logs are content-free


def test_malformed_lines_get_errors_and_the_worker_keeps_going(config, tmp_path):
    worker = Worker(config)
    bad = [
        "not json",
        "[1, 2]",
        json.dumps({"v": 2, "id": 1, "op": "hello"}),
        json.dumps({"v": 1, "op": "hello"}),
        json.dumps({"v": 1, "id": 7, "op": "nope"}),
        json.dumps({"v": 1, "id": 8, "op": "tools/call", "params": {"name": "memory_status"}}),
        json.dumps({"v": 1, "id": 9, "op": "events/append", "caller": None}),
        json.dumps(_call(10, "memory_delete_everything", {}, caller(tmp_path))),
        json.dumps(_call(11, "memory_search", {"query": "x", "project_id": "p"}, caller(tmp_path))),
    ]
    codes = {}
    for line in bad:
        worker.send(line)
        reply = worker.read()
        assert reply["ok"] is False and reply["v"] == 1
        codes[reply["id"]] = reply["error"]["code"]
    assert codes[None] == "input.invalid_request"
    assert codes[7] == "input.invalid_request" and codes[8] == "input.invalid_request"
    assert codes[9] == "worker.not_implemented" and codes[10] == "input.unknown_tool"
    assert codes[11] == "input.invalid"
    ok = worker.ask({"v": 1, "id": 12, "op": "hello", "caller": None})
    assert ok["ok"]
    worker.end_input()  # end of input is a shutdown too
    code, _ = worker.close()
    assert code == 0


def test_concurrent_calls_each_get_their_reply(config, tmp_path):
    worker = Worker(config)
    for n in range(20):
        worker.send(_call(n, "memory_search", {"query": f"q{n}"}, caller(tmp_path)))
    replies = [worker.read() for _ in range(20)]
    assert sorted(r["id"] for r in replies) == list(range(20))
    assert all(r["ok"] for r in replies)
    worker.end_input()
    assert worker.close()[0] == 0


def test_sigterm_stops_cleanly(config, tmp_path):
    worker = Worker(config)
    assert worker.ask({"v": 1, "id": 1, "op": "hello", "caller": None})["ok"]
    worker.proc.send_signal(signal.SIGTERM)
    code, log = worker.close()
    assert code == 0 and "worker.sigterm" in log
