"""The conversational layer through `artmem serve` and real processes, over real HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conversation_helpers import ASSISTANT_TEXT, USER_TEXT, sample_events, turn_events
from host_helpers import write_config
from serve_helpers import ARTMEM, ServeProcess, clean_environ

from cards import honcho_session_id
from indexer.testing import FakeHoncho

KEY = "conversation-e2e-key-3b7d"
SYNC_WORKER = str(Path(__file__).parent.parent / "_sync_worker.py")


@pytest.fixture
def setup(tmp_path):
    fake = FakeHoncho(api_key=KEY)
    with fake.serve() as base_url:
        config, project_root = write_config(
            tmp_path,
            "[honcho]\nenabled = true\n"
            f'base_url = "{base_url}"\nworkspace_id = "artmem-dev"\nuser_peer_id = "alice"\n'
            'api_key_env = "ARTMEM_CONVERSATION_KEY"\ncreate_workspace = true\n'
            # No request may time out: a delivery held by the test would be sent again while
            # held (and stored twice once released), and a recall would fail open.
            "timeout_s = 60\nretry_base_s = 0.001\nretry_max_s = 0.01\n"
            '[capture]\nmode = "completed-root-turns"\n'
            '[recall]\nmode = "first-root-step"\ntimeout_ms = 10000\n',
        )
        yield fake, config, project_root


def _env() -> dict[str, str]:
    return clean_environ({"ARTMEM_CONVERSATION_KEY": KEY})


def _who(session: str, cwd: Path, kind: str = "root") -> dict:
    return {"session_id": session, "cwd": str(cwd), "agent_kind": kind}


def _append_all(worker: ServeProcess, events: list[dict], who: dict) -> list[dict]:
    replies = [worker.request("events/append", who, {"event": e}) for e in events]
    assert all(r["ok"] for r in replies), replies
    return [r["result"] for r in replies]


def test_a_recorded_turn_is_captured_and_recalled_once_in_a_later_session(setup):
    fake, config, project_root = setup
    worker = ServeProcess(config, _env())
    results = _append_all(worker, sample_events(), _who("main-session-1", project_root))
    child = _append_all(worker, sample_events(), _who("child-session-1", project_root, "child"))
    assert len([r for r in results if r["captured"]]) == 1
    assert {r["skipped"] for r in child} == {"capture.child_session"}
    log = worker.shutdown()  # shutting down drains the outbox within its bound
    assert "delivery.drained" in log and USER_TEXT not in log
    sent = fake.messages("artmem-dev")
    assert [m.content for m in sent] == [USER_TEXT, ASSISTANT_TEXT]
    assert {m.session_id for m in sent} == {honcho_session_id("main-session-1")}

    later = ServeProcess(config, _env())
    who = _who("main-session-2", project_root)
    _append_all(later, turn_events(1, USER_TEXT, None)[:3], who)
    reply = later.request("recall/first-step", who, {"turn": 1, "step": 1})["result"]
    assert reply["reason"] is None and "[Honcho memory — untrusted" in reply["inject"]["text"]
    again = later.request("recall/first-step", who, {"turn": 1, "step": 1})["result"]
    assert again == {"inject": None, "reason": "recall.already_injected"}
    status = later.request("status")["result"]["calls"]
    assert status["recall.injected"] == 1 and "capture.captured" not in status
    later.shutdown()


def test_a_malformed_event_or_caller_is_an_error_reply_not_a_crash(setup):
    _, config, project_root = setup
    worker = ServeProcess(config, _env())
    who = _who("s1", project_root)
    assert not worker.request("events/append", who, {"event": "not an object"})["ok"]
    assert not worker.request("events/append", {"session_id": "s1"}, {"event": {}})["ok"]
    bad = worker.request("events/append", who, {"event": {"type": "x", "seq": -1}})["result"]
    assert bad == {"accepted": False, "captured": None, "skipped": "capture.invalid_event"}
    assert not worker.request("recall/first-step", who, {"turn": "1", "step": 1})["ok"]
    assert worker.request("hello")["ok"]
    worker.shutdown()


def test_a_crash_after_the_remote_commit_leaves_exactly_one_copy(setup):
    fake, config, project_root = setup
    fake.down = True  # captured while Honcho is down: the delivery stays pending
    worker = ServeProcess(config, _env())
    _append_all(worker, sample_events(), _who("main-session-1", project_root))
    worker.shutdown()
    assert fake.messages("artmem-dev") == []
    fake.down = False
    killed = subprocess.run(
        [sys.executable, SYNC_WORKER, "die-on-ack", "--config", str(config), "sync"],
        env=_env(), capture_output=True, check=False,
    )  # fmt: skip
    assert killed.returncode == -9  # SIGKILL after Honcho committed, before the local ack
    assert len(fake.messages("artmem-dev")) == 2
    synced = subprocess.run(
        [ARTMEM, "--config", str(config), "sync", "--json"], env=_env(), capture_output=True,
        check=False,
    )  # fmt: skip
    assert synced.returncode == 0, synced.stdout
    assert len(fake.messages("artmem-dev")) == 2  # found by delivery id, not sent again


def test_a_second_sigterm_during_the_drain_neither_prints_a_traceback_nor_cuts_it_short(setup):
    # Issue 30: the SIGTERM handler raised again inside the `finally` that drains.
    import os
    import select
    import signal

    fake, config, project_root = setup
    held = fake.hold("message_create")  # the drain cannot finish until the test lets it
    worker = ServeProcess(config, _env())
    _append_all(worker, sample_events(), _who("main-session-1", project_root))
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.stderr is not None
    # Read the log from the pipe itself: a buffered readline may take the line sought into its
    # buffer, and `select` would then wait for more output, which comes only after the drain.
    stderr = worker.proc.stderr.fileno()
    seen = b""
    while b'"worker.sigterm"' not in seen:  # the first one was taken
        # a guard against a hang, not a wait: a line is normally there at once
        assert select.select([stderr], [], [], 60)[0], seen
        chunk = os.read(stderr, 1 << 16)
        assert chunk, seen
        seen += chunk
    worker.proc.send_signal(signal.SIGTERM)  # while the drain waits on the held delivery
    held.set()
    code, log = worker.close()
    log = seen.decode() + log
    assert code == 0 and "Traceback" not in log, log
    assert '"worker.sigterm_ignored"' in log and '"delivery.drained"' in log
    assert [m.content for m in fake.messages("artmem-dev")] == [USER_TEXT, ASSISTANT_TEXT]
