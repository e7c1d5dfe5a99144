"""One driver for `artmem serve` as a real process: what the harness does, minus the harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ARTMEM = str(Path(sys.executable).parent / "artmem")


def clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any Honcho setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HONCHO")}
    return {**env, **(extra or {})}


class ServeProcess:
    """`artmem --config CONFIG serve`, spoken to line by line over its pipes."""

    def __init__(self, config: Path, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [ARTMEM, "--config", str(config), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else clean_environ(),
        )
        self.next_id = 0

    def send(self, request: object) -> None:
        """Write one request line (a str is sent as it is)."""
        line = request if isinstance(request, str) else json.dumps(request)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        """The next reply line."""
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())

    def ask(self, request: object) -> dict:
        """Send a request and read the next reply (one request in flight)."""
        self.send(request)
        return self.read()

    def request(self, op: str, caller: dict | None = None, params: dict | None = None) -> dict:
        """Send `op` with a fresh id and return its reply (checked to carry that id)."""
        self.next_id += 1
        line = {"v": 1, "id": self.next_id, "op": op, "caller": caller, "params": params or {}}
        reply = self.ask(line)
        assert reply["id"] == self.next_id, reply
        return reply

    def end_input(self) -> None:
        """Close the worker's stdin (end of input)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.stdin = None  # communicate() must not flush a closed pipe

    def close(self) -> tuple[int, str]:
        """Wait for exit; the worker must have written nothing more. Returns (status, log)."""
        out, err = self.proc.communicate(timeout=120)
        assert out == ""
        return self.proc.returncode, err

    def shutdown(self) -> str:
        """The `shutdown` op, then end of input; the worker must exit 0. Returns its log."""
        assert self.request("shutdown")["ok"]
        self.end_input()
        status, err = self.close()
        assert status == 0, err
        return err
