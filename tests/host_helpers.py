"""A configured host (stores, optional Honcho over the HTTP fake) for tool and worker tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness_plugin.config import config_from_mapping

KEY = "host-test-key-91c2"


def host_config(
    tmp: Path,
    *,
    honcho_url: str | None = None,
    artifact_memory: bool = True,
    capture: dict | None = None,
    recall: dict | None = None,
    **honcho,
):
    project_root = tmp / "work" / "trial"
    project_root.mkdir(parents=True, exist_ok=True)
    (tmp / "work" / "other").mkdir(parents=True, exist_ok=True)
    document: dict[str, object] = {
        "artifact_root": str(tmp / "artifacts"),
        "rlm_root": str(tmp / "rlm"),
        "state_root": str(tmp / "state"),
        "projects": [
            {"id": "trial-analysis", "root": str(project_root)},
            {"id": "other-project", "root": str(tmp / "work" / "other")},
        ],
        "tools": {"artifact_memory": artifact_memory},
    }
    if honcho_url is not None:
        document["honcho"] = {
            "enabled": True,
            "base_url": honcho_url,
            "workspace_id": "artmem-dev",
            "api_key_env": "ARTMEM_HOST_TEST_KEY",
            "create_workspace": True,
            "timeout_s": 2,
            **honcho,
        }
    if capture is not None:
        document["capture"] = capture
    if recall is not None:
        document["recall"] = recall
    return config_from_mapping(document)


def caller(tmp: Path, session: str = "s1", project_dir: str = "trial", **extra) -> dict:
    return {
        "session_id": session,
        "cwd": str(tmp / "work" / project_dir),
        "call_id": "cell-1:rlm:1",
        "root_call_id": "turn-1",
        "agent_kind": "root",
        **extra,
    }


def export(tmp: Path, name: str, data: bytes, session: str = "s1") -> Path:
    exports = tmp / "rlm" / "sessions" / session / "exports"
    exports.mkdir(parents=True, exist_ok=True)
    path = exports / name
    path.write_bytes(data)
    return path


def environ() -> dict[str, str]:
    return {**os.environ, "ARTMEM_HOST_TEST_KEY": KEY}


def write_config(tmp: Path, extra: str = "", project_dir: str = "trial") -> tuple[Path, Path]:
    """An `artmem.toml` over roots in `tmp` with project trial-analysis; (config, project root)."""
    project_root = tmp / "work" / project_dir
    project_root.mkdir(parents=True, exist_ok=True)
    config = tmp / "artmem.toml"
    config.write_text(
        f'artifact_root = "{tmp / "artifacts"}"\nrlm_root = "{tmp / "rlm"}"\n'
        f'state_root = "{tmp / "state"}"\n'
        f'[[projects]]\nid = "trial-analysis"\nroot = "{project_root}"\n' + extra
    )
    return config, project_root


def cli_project(tmp: Path, monkeypatch: pytest.MonkeyPatch, extra: str = "") -> Path:
    """`write_config` in `tmp`, used by the CLI from the project's root; session s1's exports."""
    config, project_root = write_config(tmp, extra)
    monkeypatch.setenv("ARTMEM_CONFIG", str(config))
    monkeypatch.chdir(project_root)
    exports = tmp / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    return exports


def call_tool(tmp: Path, name: str, arguments: dict) -> dict:
    """One tool call by a kernel of session s1 in project trial-analysis, on a fresh host."""
    from harness_plugin._runtime import Runtime
    from harness_plugin.worker._caller import parse_caller
    from harness_plugin.worker._tools import ToolHost

    host = ToolHost(Runtime(host_config(tmp), environ=environ()), environ=environ())
    try:
        return host.call(name, arguments, parse_caller(caller(tmp)))
    finally:
        host.close()
