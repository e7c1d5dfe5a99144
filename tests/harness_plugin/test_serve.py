"""`artmem serve`: the JSONL protocol, concurrency, bad input, and every way to shut down."""

from __future__ import annotations

import io
import json
import signal

import pytest
from conftest import fingerprint
from host_helpers import caller, export, write_config
from serve_helpers import ServeProcess as Worker

from harness_plugin.worker._lines import (
    DISCARD_PIECE_BYTES,
    MAX_LINE_BYTES,
    Oversized,
    prefix_id,
    read_line,
)


@pytest.fixture
def config(tmp_path):
    return write_config(tmp_path, "[tools]\nartifact_memory = true\n")[0]


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
    assert codes[9] == "input.invalid_request" and codes[10] == "input.unknown_tool"
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


HELLO = {"v": 1, "id": "after", "op": "hello", "caller": None}
BIG = 10 << 20


def _expect_hello_only_after(worker: Worker, *errors: dict) -> None:
    """The replies before the hello are exactly `errors`; nothing else ever comes out."""
    worker.send(HELLO)
    for expected in errors:
        reply = worker.read()
        assert reply["ok"] is False and reply["v"] == 1
        assert {k: reply[k] for k in expected} == expected
    hello = worker.read()
    assert hello["id"] == "after" and hello["ok"]
    worker.end_input()
    code, _ = worker.close()  # asserts nothing was written after the hello reply
    assert code == 0


def test_an_oversized_line_gets_one_error_with_its_id_and_its_rest_is_never_parsed(config):
    worker = Worker(config)
    head = (
        '{"v":1,"id":"big-1","op":"tools/call","caller":null,'
        '"params":{"name":"memory_search","arguments":{"query":"'
    )
    # Cut into pieces of the limit, this line would end with a whole shutdown request.
    tail = '{"v":1,"id":99,"op":"shutdown","caller":null}'
    pieces = BIG // (MAX_LINE_BYTES + 1) + 1
    worker.send(head + "x" * (pieces * (MAX_LINE_BYTES + 1) - len(head)) + tail)
    error = {"id": "big-1", "error": {
        "code": "input.invalid_request",
        "message": f"the request line is longer than {MAX_LINE_BYTES} bytes",
        "retryable": False,
    }}  # fmt: skip
    _expect_hello_only_after(worker, error)


@pytest.mark.parametrize(
    "line",
    [
        "g" * BIG,
        '\u00e9\u00df garbage {["' * (BIG // 16),
        '{"v":1,"op":"tools/call","params":{"id":7,"arguments":{"query":"' + "y" * BIG,
        '{"v":1,"id":' + "1" * BIG,
    ],
    ids=["letters", "unicode", "nested-id", "endless-id"],
)
def test_an_oversized_line_without_a_readable_id_gets_one_anonymous_error(config, line):
    worker = Worker(config)
    worker.send(line)
    _expect_hello_only_after(worker, {"id": None, "error": {
        "code": "input.invalid_request",
        "message": f"the request line is longer than {MAX_LINE_BYTES} bytes",
        "retryable": False,
    }})  # fmt: skip


def test_a_line_at_the_limit_is_served_and_one_byte_more_is_not(config):
    worker = Worker(config)
    request = json.dumps({"v": 1, "id": 3, "op": "hello", "caller": None})
    at_limit = worker.ask(request + " " * (MAX_LINE_BYTES - len(request)))
    assert at_limit["id"] == 3 and at_limit["ok"]
    worker.send(request[:-1] + " " * (MAX_LINE_BYTES + 1 - len(request)) + "}")
    _expect_hello_only_after(worker, {"id": 3, "error": {
        "code": "input.invalid_request",
        "message": f"the request line is longer than {MAX_LINE_BYTES} bytes",
        "retryable": False,
    }})  # fmt: skip


def test_blank_lines_are_ignored_silently(config):
    worker = Worker(config)
    for blank in ("", " ", "\t  \r", " " * 5000):
        worker.send(blank)
    _expect_hello_only_after(worker)


def test_after_shutdown_every_request_is_refused_until_the_input_closes(config, tmp_path):
    worker = Worker(config)
    assert worker.ask({"v": 1, "id": 1, "op": "shutdown", "caller": None})["ok"]
    later = [
        {"v": 1, "id": 2, "op": "hello", "caller": None},
        {"v": 1, "id": "three", "op": "tools/list", "caller": None},
        {"v": 1, "id": 4, "op": "status", "caller": None},
        _call(5, "memory_search", {"query": "cohort"}, caller(tmp_path)),
        {"v": 1, "id": 6, "op": "shutdown", "caller": None},
    ]
    for request in later:
        worker.send("")  # blank lines stay silent after shutdown too
        reply = worker.ask(request)
        assert reply == {"v": 1, "id": request["id"], "ok": False, "error": {
            "code": "worker.shutting_down",
            "message": "the worker is shutting down",
            "retryable": True,
        }}  # fmt: skip
    malformed = worker.ask("not json")  # a bad line is still reported as what it is
    assert malformed["id"] is None and malformed["error"]["code"] == "input.invalid_request"
    worker.end_input()
    code, log = worker.close()
    assert code == 0 and "worker.eof" in log and "worker.stopped" in log


class _Recording(io.BytesIO):
    """A byte stream that records how much each `readline` was allowed to return."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sizes: list[int] = []

    def readline(self, size: int | None = -1) -> bytes:
        assert size is not None and size > 0, "an unbounded read"
        self.sizes.append(size)
        return super().readline(size)


def test_read_line_reads_in_bounded_pieces_and_drops_the_rest_of_a_long_line():
    limit = 100
    stream = _Recording(b"a" * 99 + b"\n" + b"b" * 100_000 + b"\n" + b"last")
    assert read_line(stream, limit) == b"a" * 99 + b"\n"
    long = read_line(stream, limit)
    assert isinstance(long, Oversized)
    assert long.prefix == b"b" * (limit + 1) and long.size == 100_001
    assert read_line(stream, limit) == b"last"  # a last line without a newline
    assert read_line(stream, limit) is None
    assert max(stream.sizes) == max(limit + 1, DISCARD_PIECE_BYTES)


def test_read_line_at_the_limit():
    stream = io.BytesIO(b"c" * 10 + b"\n" + b"d" * 11 + b"\n" + b"e" * 11)
    assert read_line(stream, 10) == b"c" * 10 + b"\n"
    assert read_line(stream, 10) == Oversized(b"d" * 11, 12)
    assert read_line(stream, 10) == Oversized(b"e" * 11, 11)  # cut off by end of input
    assert read_line(stream, 10) is None


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (b'{"v":1,"id":"big-1","op":"tools/call","params":{"q":"xx', "big-1"),
        (b'{"v":1,"id":42,"op"', 42),
        (b'{ "id" : -7 ,', -7),
        (b'{"a":[{"id":1}],"id":2,', 2),
        (b'{"a":"\\"id\\":5","id":"x\\"y"}', 'x"y'),
        (b'{"v":1,"op":"id","id":3}', 3),
        (b'{"v":1,"params":{"id":7,"q":"xxx', None),  # not the request's id
        (b'{"v":1,"id":12', None),  # the number may go on
        (b'{"v":1,"id":"ab', None),
        (b'{"v":1,"id":1.5,', None),
        (b'{"v":1,"id":true,', None),
        (b'{"v":1,"id":"\\q",', None),  # not a JSON string
        (b'{"v":1,"id":"' + b"z" * 201 + b'",', None),
        (b'{"q":"unterminated "id":4,', None),
        (b'[{"id":1},', None),
        (b"garbage", None),
    ],
)
def test_prefix_id_finds_only_a_whole_top_level_id(prefix, expected):
    assert prefix_id(prefix) == expected
