"""The synthetic world of one case run: people, their machines, their workers, their names.

Every person has a machine of their own (artifact, RLM and state roots, and the case's project
roots under `work/`) and a worker (`ToolHost`, the object `artmem serve` runs) configured for
one of two runs: `memory` (Honcho, capture, recall, the conversational and artifact tools on)
or `baseline` (all of it off: no conversational or artifact tool exists). Identifiers are
namespaced by case (`eval-05-ada`), so cases sharing the run's workspaces never meet.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cards import NotOwner
from harness_plugin._runtime import Runtime
from harness_plugin.config import Config, config_from_mapping
from harness_plugin.eval._backend import Backend
from harness_plugin.eval._corpus import Case, Person
from harness_plugin.worker._tools import ToolHost
from indexer import Ownership

Mode = Literal["memory", "baseline"]
MODES: tuple[Mode, Mode] = ("memory", "baseline")
_PLACEHOLDER = re.compile(r"\{(secret|fp|exports):([a-z0-9_-]{1,40})\}")


@dataclass(frozen=True)
class Names:
    """The synthetic identifiers of one case."""

    case: Case

    @property
    def prefix(self) -> str:
        """What every identifier of the case starts with."""
        return f"eval-{self.case.number:02d}"

    def peer(self, person: Person) -> str:
        """The Honcho peer of a person (two people may share a peer in two workspaces)."""
        return f"{self.prefix}-{person.peer or person.id}"

    def project(self, project: str) -> str:
        """The configured project id."""
        return f"{self.prefix}-{project}"

    def session(self, session: str) -> str:
        """The DSH session id."""
        return f"{self.prefix}-{session}"


@dataclass
class SessionState:
    """Event sequence numbers and turn numbers of one DSH session."""

    seq: int = 0
    turns: int = 0
    calls: int = 0
    time_ms: int = 1_796_061_496_000

    def event(self, kind: str, data: dict[str, object]) -> dict[str, object]:
        """The next event of this session, shaped as DSH emits it."""
        self.seq += 1
        self.time_ms += 7
        return {"type": kind, "seq": self.seq, "time": self.time_ms, "data": data}


@dataclass
class Actor:
    """One person's machine and worker in one run."""

    person: Person
    peer: str
    workspace: str
    base: Path
    config: Config
    environ: dict[str, str]
    backend: Backend
    host: ToolHost = field(init=False)
    sessions: dict[str, SessionState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.host = self._start()

    def _start(self) -> ToolHost:
        runtime = Runtime(self.config, self.environ, transport=self.backend.transport)
        return ToolHost(runtime, environ=self.environ)

    def session(self, session_id: str) -> SessionState:
        """The event state of a session (the same session id continues where it stopped)."""
        return self.sessions.setdefault(session_id, SessionState())

    def directory(self, relative: str) -> str:
        """An absolute working directory under this person's `work/` (created)."""
        path = self.base / "work" / relative
        path.mkdir(parents=True, exist_ok=True)
        return str(path)

    def exports(self, session_id: str) -> Path:
        """The exports directory of a session on this machine (created, as a kernel would)."""
        path = self.base / "rlm" / "sessions" / session_id / "exports"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def restart(self) -> None:
        """A new worker over the same roots (what a process restart leaves behind)."""
        self.host.close()
        self.host = self._start()

    def deliver(self) -> int:
        """Run the delivery worker until the outbox is empty (or its drain deadline passes).

        Raises:
            NotOwner: another worker holds the state root.
        """
        runtime = self.host.runtime
        if runtime.outbox is None:
            return 0
        ownership = Ownership(self.config.state_root)
        if not ownership.acquire():
            raise NotOwner("another worker owns this evaluation state root")
        service = runtime.service()
        try:
            report = runtime.worker(ownership, service).drain(self.config.honcho.drain_timeout_s)
        finally:
            service.close()
            ownership.release()
        return report.delivered + report.deduplicated

    def close(self) -> None:
        """Stop the worker's threads and connections."""
        self.host.close()


def person_config(case: Case, mode: Mode, person: Person, backend: Backend, base: Path) -> Config:
    """The configuration of one person's machine for one run.

    Raises:
        ConfigError: the case's overrides do not make a valid configuration.
    """
    names = Names(case)
    for name in ("artifacts", "rlm", "state", "work"):
        (base / name).mkdir(parents=True, exist_ok=True)
    projects = []
    for project in case.projects:
        root = base / "work" / project.dir
        root.mkdir(parents=True, exist_ok=True)
        projects.append({"id": names.project(project.id), "root": str(root)})
    document: dict[str, object] = {
        "artifact_root": str(base / "artifacts"),
        "rlm_root": str(base / "rlm"),
        "state_root": str(base / "state"),
        "projects": projects,
        "tools": {"artifact_memory": mode == "memory"},
        "limits": dict(case.config.limits),
    }
    if mode == "memory":
        document["honcho"] = {
            "enabled": True,
            "base_url": backend.base_url,
            "workspace_id": backend.workspaces[person.workspace],
            "user_peer_id": names.peer(person),
            "assistant_peer_id": f"{names.prefix}-assistant",
            "api_key_env": backend.api_key_env,
            "timeout_s": backend.timeout_s,
            "create_workspace": False,
            "retry_base_s": 0.01,
            "retry_max_s": 0.05,
            "drain_timeout_s": 60.0,
            "search_timeout_s": case.config.search_timeout_s or 2.0,
        }
        document["capture"] = {"mode": "completed-root-turns", **case.config.capture}
        document["recall"] = {"mode": "first-root-step", **case.config.recall}
    return config_from_mapping(document)


def synthetic_secret(case_id: str, key: str) -> str:
    """A made-up secret of the shape `key` names (`apikey`, `aws`, `github`, `word`)."""
    digest = hashlib.sha256(f"artmem-eval/{case_id}/{key}".encode()).hexdigest()
    shape = key.split("-")[0]
    if shape == "apikey":
        return "sk-" + "evalsynthetic" + digest[:24]
    if shape == "aws":
        return "AKIA" + digest[:16].upper()
    if shape == "github":
        return "ghp" + "_" + digest[:36]
    return "pw" + digest[:18]


def fingerprint(name: str) -> str:
    """The query fingerprint `{fp:NAME}` stands for."""
    return hashlib.sha256(f"artmem-eval/fp/{name}".encode()).hexdigest()


def expand(text: str, case_id: str, exports: Callable[[str], Path]) -> str:
    """`text` with its placeholders filled in."""

    def fill(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        if kind == "secret":
            return synthetic_secret(case_id, name)
        if kind == "fp":
            return fingerprint(name)
        return str(exports(name))

    return _PLACEHOLDER.sub(fill, text)


def planted_secrets(case: Case) -> list[str]:
    """Every synthetic secret the case's text will contain."""
    text = case.model_dump_json()
    found = {m.group(2) for m in _PLACEHOLDER.finditer(text) if m.group(1) == "secret"}
    return [synthetic_secret(case.id, key) for key in sorted(found)]


def known_secrets(case: Case) -> dict[str, list[str]]:
    """The planted secrets whose upload is a known defect, by defect id."""
    known: dict[str, list[str]] = {}
    for key, defect in sorted(case.known_failures.items()):
        known.setdefault(defect, []).append(synthetic_secret(case.id, key))
    return known
