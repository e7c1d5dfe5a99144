"""The three users meet: two kernel processes, the host worker, and a (fake) Honcho.

Kernel A exports and records a Parquet result larger than a kernel snapshot keeps (16 MiB);
kernel B, in another session, finds it with memory_search, resolves it and prints a bounded
slice. The test plays the host: it runs `artmem serve` and attaches each kernel's caller itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from host_helpers import write_config
from serve_helpers import ServeProcess

from indexer.testing import FakeHoncho

KEY = "e2e-honcho-key-77aa"
KERNEL = str(Path(__file__).parent / "_kernel.py")


class Host:
    """Forwards kernel tool calls to the worker, attaching the caller the harness would."""

    def __init__(self, config: Path, project_root: Path) -> None:
        self.project_root = project_root
        self.worker = ServeProcess(config, {**os.environ, "ARTMEM_E2E_KEY": KEY})
        self.request = self.worker.request

    def run_kernel(self, role: str, session_dir: Path) -> dict:
        env = {
            "RLM_SESSION_DIR": str(session_dir),
            "PATH": "/usr/bin:/bin",
            "PYTHONNOUSERSITE": "1",
        }
        kernel = subprocess.Popen(
            [sys.executable, KERNEL, role],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=session_dir,
        )
        calls = 0
        try:
            while True:
                message = json.loads(kernel.stdout.readline())
                if "done" in message:
                    return message["done"]
                calls += 1
                caller = {
                    "session_id": session_dir.name,
                    "cwd": str(self.project_root),
                    "call_id": f"{role}-cell-1:rlm:{calls}",
                    "root_call_id": f"{role}-turn-1",
                    "agent_kind": "root",
                }
                reply = self.request("tools/call", caller, message["call"])
                kernel.stdin.write(json.dumps(_bridge_result(reply)) + "\n")
                kernel.stdin.flush()
        finally:
            kernel.stdin.close()
            kernel.wait(timeout=60)
            kernel.stdout.close()

    def shutdown(self) -> str:
        return self.worker.shutdown()


def _bridge_result(reply: dict) -> dict:
    """The shape `dsh_tools.call` returns to Python: a failing tool is a dict, not a raise."""
    if reply["ok"]:
        return {"isError": False, "value": reply["result"], "content": []}
    error = reply["error"]
    return {"isError": True, "error": {"message": error["message"], "info": error}, "content": []}


@pytest.mark.slow
def test_two_kernels_record_find_resolve_and_slice(tmp_path):
    fake = FakeHoncho(api_key=KEY)
    with fake.serve() as base_url:
        config, project_root = write_config(
            tmp_path,
            "[tools]\nartifact_memory = true\n"
            f'[honcho]\nenabled = true\nbase_url = "{base_url}"\nworkspace_id = "artmem-e2e"\n'
            'api_key_env = "ARTMEM_E2E_KEY"\ncreate_workspace = true\n',
        )
        sessions = {}
        for name in ("sess-A", "sess-B"):
            sessions[name] = tmp_path / "rlm" / "sessions" / name
            sessions[name].mkdir(parents=True, mode=0o700)
        host = Host(config, project_root)
        try:
            produced = host.run_kernel("producer", sessions["sess-A"])
            consumed = host.run_kernel("consumer", sessions["sess-B"])
            status = host.request("status")["result"]
        finally:
            log = host.shutdown()

    assert "error" not in produced and "error" not in consumed, (produced, consumed)
    assert produced["bytes"] > 16 * 1024 * 1024 and produced["honcho_queued"]
    assert produced["sha256"] == produced["file_sha256"]
    assert consumed["experiment_id"] == produced["experiment_id"]
    assert consumed["freshness"] == "fresh"
    assert consumed["sha256"] == produced["file_sha256"]  # the bytes read are the bytes exported
    assert consumed["rows"] == 50 and consumed["truncated"] and consumed["first"] == 0
    for env in (produced["env"], consumed["env"]):
        assert not [k for k in env if k.startswith("HONCHO") or k == "ARTMEM_E2E_KEY"]

    # Honcho got the card projection after the worker's drain at shutdown, and nothing else.
    (message,) = fake.messages("artmem-e2e")
    assert message.metadata["experiment_id"] == produced["experiment_id"]
    assert message.metadata["kind"] == "experiment-card"
    sent = b"".join(r.raw_body for r in fake.requests)
    for forbidden in (b"PAR1", str(tmp_path).encode(), b"SELECT", KEY.encode()):
        assert forbidden not in sent

    # Status and logs are content-free.
    for text in (json.dumps(status), log):
        for forbidden in (str(tmp_path), "Treatment response", "trial-analysis", KEY):
            assert forbidden not in text
    assert status["projects"][0]["index_states"] in ({"queued": 1}, {"indexed": 1})
