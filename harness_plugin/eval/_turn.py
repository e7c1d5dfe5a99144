"""One DSH turn, replayed as the session events DSH emits, in DSH's order.

The person's words wait in the inbox (`agent/inbox/spliced`), the turn starts and claims them,
step 1 starts and `agent/pre-step` runs: that is when first-step recall is asked, and its block
is then recorded as a plugin message, as DSH does. Only then is the person's `user/message`
committed. The model's tool calls follow (the model's call, `tool/call`, `tool/result`, the next
step), then other tools, a subagent's report, the final answer and `turn/end`, whose reply says
whether the turn was captured. What the turn states becomes facts of its person and project.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cards import ArtifactError
from harness_plugin.eval._calls import call
from harness_plugin.eval._checks import Seen
from harness_plugin.eval._corpus import Turn
from harness_plugin.eval._leaks import Scope
from harness_plugin.eval._telemetry import Observation, Record, elapsed_ms, estimated_tokens
from harness_plugin.eval._world import Actor, SessionState
from harness_plugin.worker import _serve

if TYPE_CHECKING:
    from harness_plugin.eval._play import CaseRun


@dataclass
class TurnPlay:
    """The events, recall and tool calls of one turn of one session."""

    run: CaseRun
    index: int
    step: Turn
    actor: Actor = field(init=False)
    session: str = field(init=False)
    cwd: str = field(init=False)
    scope: Scope = field(init=False)
    caller: dict[str, object] = field(init=False)
    state: SessionState = field(init=False)
    number: int = field(init=False)  # the turn's number in its session
    model_step: int = 1
    hostile: str | None = None

    def __post_init__(self) -> None:
        run, step = self.run, self.step
        self.actor = run.actors[step.person]
        self.session = run.names.session(step.session)
        self.cwd = run.cwd(self.actor, step.project, step.dir)
        self.scope = run.scope(self.actor, self.cwd)
        kind = "child" if step.child else "root"
        self.caller = {"session_id": self.session, "cwd": self.cwd, "agent_kind": kind}
        self.state = self.actor.session(self.session)
        self.state.turns += 1
        self.number = self.state.turns
        if step.hostile_fields:
            self.hostile = run.fill(step.hostile_fields, self.actor)

    def play(self) -> None:
        """The whole turn."""
        user = message(self.fill(self.step.user), {"kind": "user"}, self.hostile)
        self.emit("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [user]})
        self.emit("turn/start", {"turn": self.number})
        claimed = {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}
        self.emit("agent/inbox/spliced", claimed)
        self.emit("step/start", {"turn": self.number, "step": 1})
        if self.step.recall is not None:
            self.first_step()
        if self.step.plugin_text:
            note = {"kind": "plugin", "plugin": "eval-notes"}
            self.emit("user/message", message(self.fill(self.step.plugin_text), note))
        self.emit("user/message", user)
        self.tools()
        if self.step.assistant:
            text = self.fill(self.step.assistant)
            self.emit("assistant/message", answer(text, self.number, self.model_step, self.hostile))
        self.end()
        said = [self.fill(fact) for fact in self.step.facts]
        self.run.facts.add(said, Scope(self.actor.workspace, self.actor.peer, self.scope.project))

    def fill(self, text: str) -> str:
        """`text` with its placeholders filled in."""
        return self.run.fill(text, self.actor)

    def emit(self, kind: str, data: dict[str, object]) -> object:
        """The next event of this session, through `events/append`; the worker's reply."""
        return self.run.append(self.actor, self.caller, self.state.event(kind, data))

    def tools(self) -> None:
        """The model's tool calls, then the turn's other tools and its subagent's report."""
        for made in self.step.calls:
            arguments, output = call(self, made)
            self.tool_events(made.tool, arguments, output)
        if self.step.tool_output:
            output = self.fill(self.step.tool_output)
            self.tool_events("bash", '{"command": "cat results.txt"}', output)
        if self.step.subagent_text:
            report = self.fill(self.step.subagent_text)
            self.tool_events("task", '{"prompt": "review the plots"}', report)
            relayed = message(report, {"kind": "subagent", "agent": "reviewer"})
            self.emit("user/message", relayed)

    def tool_events(self, name: str, arguments: str, output: str) -> None:
        """One model step that calls a tool: the call, its result; then the next step starts."""
        self.state.calls += 1
        call_id = f"call-{self.state.calls}"
        turn, step = self.number, self.model_step
        part = {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}
        model = {"role": "assistant", "content": [part], "source": {"kind": "model"}}
        result = {"type": "tool-result", "toolCallId": call_id, "isError": False,
                  "content": [{"type": "text", "text": output}]}  # fmt: skip
        shown = {"source": {"kind": "tool", "callId": call_id}, "content": [result],
                 "role": "user"}  # fmt: skip
        self.emit("assistant/message", {"turn": turn, "step": step, "message": model})
        self.emit("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": name,
                                "arguments": arguments})  # fmt: skip
        self.emit("tool/result", {"turn": turn, "step": step, "message": shown})
        self.emit("step/end", {"turn": turn, "step": step})
        self.model_step += 1
        self.emit("step/start", {"turn": turn, "step": self.model_step})

    def first_step(self) -> None:
        """`recall/first-step` at step 1; the block, if any, recorded as a plugin message."""
        started = time.perf_counter()
        reply: object = None
        code = "ok"
        try:
            reply = _serve._first_step(self.actor.host, self.caller, {"turn": self.number,
                                                                      "step": 1})  # fmt: skip
        except ArtifactError as exc:
            code = str(exc.code)
        except Exception:  # a crash is what the worker would report: an internal error
            code = "worker.internal"
        ms = elapsed_ms(started)
        block, outcome = _block(reply, code)
        self.count(outcome, code)
        recall = self.actor.config.recall
        memory = self.run.mode == "memory"
        seen = Seen("first-step", outcome, injection=block,
                    budget_tokens=recall.max_tokens if memory else None,
                    max_items=recall.max_items if memory else None)  # fmt: skip
        probe = self.run.probe((self.index, self.actor, self.scope), "first-step", seen, ms,
                               self.step.recall or [])  # fmt: skip
        probe.timeout_ms = recall.timeout_ms if memory else None
        probe.budget_tokens = seen.budget_tokens
        probe.injected_chars = len(block or "")
        probe.estimated_tokens = estimated_tokens(len(block or ""))
        if block is not None:
            self.run.backend.transport.exclude(block)  # our own injection is never captured
            self.emit("user/message", message(block, {"kind": "plugin", "plugin": "artmem"}))

    def count(self, outcome: str, code: str) -> None:
        """A first step's timeout or error, for the run's counts."""
        if outcome == "recall.timeout":
            self.run.timeouts += 1
        elif outcome in ("recall.error", "recall.circuit_open") or code != "ok":
            self.run.errors[outcome] += 1

    def end(self) -> None:
        """`turn/end`, and the capture it admitted (timed: the capture's record latency)."""
        end = {"turn": self.number, "reason": {"kind": self.step.end}}
        started = time.perf_counter()
        reply = self.emit("turn/end", end)
        ms = elapsed_ms(started)
        captured = isinstance(reply, Mapping) and bool(reply.get("captured"))
        skipped = reply.get("skipped") if isinstance(reply, Mapping) else None
        outcome = "captured" if captured else str(skipped or "capture.refused")
        observations = []
        if self.step.capture is not None:
            observed = "captured" if captured else "skipped"
            observations.append(Observation(
                kind="capture", expected=self.step.capture, observed=observed,
                passed=observed == self.step.capture, positive=self.step.capture == "captured",
            ))  # fmt: skip
        if captured:
            self.run.record_ms.append(ms)
        self.run.records.append(Record(step=self.index, method="capture", outcome=outcome,
                                       latency_ms=ms, observations=observations))  # fmt: skip


def message(
    text: str, source: Mapping[str, object], hostile: str | None = None
) -> dict[str, object]:
    """A message as DSH records it; `hostile` goes into every field capture must not read."""
    data: dict[str, object] = {
        "content": [{"type": "text", "text": text}],
        "source": dict(source),
        "role": "user",
    }
    if hostile is not None:
        data["id"] = hostile
        data["content"] = [
            {"type": "text", "text": text},
            {"type": "image", "mediaType": "image/png", "data": hostile, "text": hostile},
            {"type": "reasoning", "text": hostile},
            {"type": "file", "name": hostile, "text": hostile},
        ]
        data["source"] = {**source, "label": hostile}
        data["metadata"] = {"note": hostile}
    return data


def answer(text: str, turn: int, step: int, hostile: str | None) -> dict[str, object]:
    """The model's final answer of a turn (with `hostile` in its unread fields, if given)."""
    content: list[object] = [{"type": "text", "text": text}]
    model: dict[str, object] = {"role": "assistant", "content": content,
                                "source": {"kind": "model"}}  # fmt: skip
    if hostile is not None:
        model["id"] = hostile
        content.insert(0, {"type": "reasoning", "text": hostile})
        model["source"] = {"kind": "model", "model": hostile}
    return {"turn": turn, "step": step, "message": model}


def _block(reply: object, code: str) -> tuple[str | None, str]:
    """The injected block of a first-step reply, and the outcome code of the step."""
    inject = reply.get("inject") if isinstance(reply, Mapping) else None
    block = inject.get("text") if isinstance(inject, Mapping) else None
    if isinstance(block, str):
        return block, "injected"
    if isinstance(reply, Mapping):
        return None, str(reply.get("reason") or "recall.empty")
    return None, code
