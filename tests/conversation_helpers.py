"""DSH event streams for the conversational tests: the recorded sample and variations of it."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from host_helpers import KEY, environ, host_config

from harness_plugin._runtime import Runtime
from harness_plugin.worker._tools import ToolHost
from indexer import Ownership
from indexer.testing import FakeHoncho

SAMPLE = Path(__file__).parent / "fixtures" / "dsh-events-sample.jsonl"
WORKSPACE = "artmem-dev"
USER_TEXT = "prove the tool path"
ASSISTANT_TEXT = "CLI tool round trip complete: CLI_TOOL_ROUND_TRIP"
TOOL_ARGUMENTS = "printf CLI_TOOL_ROUND_TRIP"
NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # the fake's clock: dates in blocks are fixed


def sample_events() -> list[dict]:
    """The recorded headless DSH turn: a user message, a tool call, a final answer."""
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]


def turn_events(
    turn: int,
    user: str | list[dict],
    assistant: str | None,
    *,
    start_seq: int = 0,
    end: str = "completed",
) -> list[dict]:
    """A turn shaped like the sample: `user` text (or content parts), then a final answer."""
    parts = [{"type": "text", "text": user}] if isinstance(user, str) else user
    events = [
        {"type": "turn/start", "data": {"turn": turn}},
        {"type": "step/start", "data": {"turn": turn, "step": 1}},
        {"type": "user/message", "data": {"content": parts, "source": {"kind": "user"},
                                           "role": "user"}},
    ]  # fmt: skip
    if assistant is not None:
        message = {"role": "assistant", "content": [{"type": "text", "text": assistant}],
                   "source": {"kind": "model"}}  # fmt: skip
        events.append({"type": "assistant/message",
                       "data": {"turn": turn, "step": 1, "message": message}})  # fmt: skip
    events.append({"type": "turn/end", "data": {"turn": turn, "reason": {"kind": end}}})
    for offset, event in enumerate(events):
        event["seq"] = start_seq + offset
        event["time"] = 1_796_061_496_000 + offset
    return events


def renumbered(events: list[dict], start_seq: int) -> list[dict]:
    """A deep copy of `events` with sequence numbers from `start_seq`."""
    copied = copy.deepcopy(events)
    for offset, event in enumerate(copied):
        event["seq"] = start_seq + offset
    return copied


@dataclass
class Conversation:
    """An in-process host with capture and recall on, over the HTTP fake of Honcho."""

    tmp: Path
    fake: FakeHoncho = field(default_factory=lambda: FakeHoncho(api_key=KEY, clock=lambda: NOON))
    capture: dict = field(default_factory=lambda: {"mode": "completed-root-turns"})
    recall: dict = field(default_factory=lambda: {"mode": "first-root-step"})
    honcho: dict = field(default_factory=dict)
    base_url: str | None = None  # a real server instead of the fake (then `fake` is unused)

    def __post_init__(self) -> None:
        self.config = host_config(
            self.tmp,
            honcho_url=self.base_url or "http://honcho.test",
            capture=self.capture,
            recall=self.recall,
            **self.honcho,
        )
        self.host = self.new_host()

    def new_host(self) -> ToolHost:
        """A fresh host over the same state (as after a worker restart)."""
        transport = None if self.base_url else self.fake.transport()
        return ToolHost(Runtime(self.config, environ(), transport=transport))

    def cwd(self, project_dir: str = "trial") -> str:
        return str(self.tmp / "work" / project_dir)

    def feed(
        self, events: list[dict], session: str = "main-session-1", *, root: bool = True,
        project_dir: str = "trial",
    ) -> list[dict]:  # fmt: skip
        """Append `events` as the plugin would; the replies."""
        assert self.host.memory is not None
        cwd = self.cwd(project_dir)
        return [self.host.memory.append(session, cwd, root, event) for event in events]

    def deliver(self) -> None:
        """Run the delivery worker once, as `artmem serve` does in its thread."""
        runtime = self.host.runtime
        ownership = Ownership(self.config.state_root)
        assert ownership.acquire()
        service = runtime.service()
        try:
            runtime.worker(ownership, service).run_once()
        finally:
            service.close()
            ownership.release()

    def messages(self) -> list:
        return [m for m in self.fake.messages(WORKSPACE) if m.metadata.get("layer")]

    def first_step(self, session: str, turn: int, step: int = 1, **where) -> dict:
        assert self.host.memory is not None
        root = where.pop("root", True)
        cwd = self.cwd(where.pop("project_dir", "trial"))
        return self.host.memory.first_step(session, cwd, root, {"turn": turn, "step": step})

    def outbox_bytes(self) -> Iterator[bytes]:
        for path in (Path(self.config.state_root) / "outbox").rglob("*.json"):
            yield path.read_bytes()
