"""A tool call the model makes during a turn, through the worker's `tools/call`.

Before the call, what a kernel or a model would do: write the export a record names (into the
calling session's `exports/`), name a labelled experiment by its id, and, before a correction,
search for the memory it corrects. The host supplies the caller (session, directory, call ids,
root or child); the arguments are the model's. Reads become probes, writes become records.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import msgspec

from cards import ArtifactError
from harness_plugin.eval._checks import Labelled, Seen, norm
from harness_plugin.eval._corpus import Call, FileSpec
from harness_plugin.eval._leaks import Scope
from harness_plugin.eval._telemetry import Method, Record, WriteMethod, elapsed_ms
from harness_plugin.worker import _serve

if TYPE_CHECKING:
    from harness_plugin.eval._turn import TurnPlay

WRITES = {"memory_record", "memory_correct", "memory_artifact_record"}
UNKNOWN_EXPERIMENT = "exp_" + "a" * 52  # well-formed, never recorded: what a model would guess


def call(turn: TurnPlay, made: Call) -> tuple[str, str]:
    """Make the call; its arguments and its result (or error code) as the session records them."""
    run, actor = turn.run, turn.actor
    cwd = run.cwd(actor, made.project) if made.project else turn.cwd
    scope = run.scope(actor, cwd)
    arguments, written = prepare(turn, made)
    if made.supersedes_fact is not None:
        found = message_id_of(turn, cwd, run.fill(made.supersedes_fact, actor))
        if found is not None:
            arguments["supersedes"] = found
    child = turn.step.child or made.child
    started = time.perf_counter()
    result, code = invoke(turn, cwd, made.tool, arguments, child=child)
    ms = elapsed_ms(started)
    if code != "ok":
        run.errors[code] += 1
    if result is not None and made.label and written is not None:
        run.labels[made.label] = Labelled(str(result["experiment_id"]), written)
    seen = Seen(made.tool, code, result=result)
    if made.tool in WRITES:
        record = Record(step=turn.index, method=cast(WriteMethod, made.tool), outcome=code,
                        latency_ms=ms)  # fmt: skip
        run.write(record, seen, made.expect, actor)
    else:
        run.probe((turn.index, actor, scope), cast(Method, made.tool), seen, ms, made.expect)
        _degraded(turn, made.tool, result)
    if code == "ok" and made.facts:
        card = [run.fill(fact, actor) for fact in made.facts]
        run.facts.add(card, Scope(actor.workspace, None, scope.project))
    shown = msgspec.json.encode(result).decode() if result is not None else code
    return msgspec.json.encode(arguments).decode(), shown


def _degraded(turn: TurnPlay, tool: str, result: Mapping[str, object] | None) -> None:
    """A call that answered without its remote part: a timeout or an error, for the counts."""
    remote = result.get("remote") if result else None
    status = remote.get("status") if isinstance(remote, Mapping) else None
    if status == "timeout":
        turn.run.timeouts += 1
    elif status == "error":
        turn.run.errors[f"{tool}.remote_error"] += 1
    if result is not None and result.get("status") == "unavailable":
        turn.run.errors[f"{tool}.{result.get('reason') or 'unavailable'}"] += 1


def invoke(
    turn: TurnPlay, cwd: str, tool: str, arguments: dict[str, object], *, child: bool = False
) -> tuple[Mapping[str, object] | None, str]:
    """`tools/call` with the host's caller; the result, or None and the error code."""
    turn.state.calls += 1
    caller = {
        "session_id": turn.session,
        "cwd": cwd,
        "call_id": f"{turn.session}:call-{turn.state.calls}",
        "root_call_id": f"{turn.session}:turn-{turn.number}",
        "agent_kind": "child" if child else "root",
    }
    try:
        result = _serve._call(turn.actor.host, caller, {"name": tool, "arguments": arguments})
    except ArtifactError as exc:
        return None, str(exc.code)
    except Exception:  # a crash is what the worker would report: an internal error
        return None, "worker.internal"
    return (result, "ok") if isinstance(result, Mapping) else (None, "ok")


def prepare(turn: TurnPlay, made: Call) -> tuple[dict[str, object], str | None]:
    """The call's arguments, filled in; and the SHA-256 of the export it writes first, if any."""
    run, actor = turn.run, turn.actor
    filled: dict[str, object] = {}
    for key, value in made.arguments.items():
        if isinstance(value, str):
            filled[key] = run.fill(value, actor)
        elif isinstance(value, list):
            filled[key] = [run.fill(item, actor) for item in value]
        else:
            filled[key] = value
    written = None
    if made.file is not None:
        data = file_bytes(run.case.id, made.file, lambda text: run.fill(text, actor))
        (actor.exports(turn.session) / made.file.name).write_bytes(data)
        filled.setdefault("source_path", made.file.name)
        written = hashlib.sha256(data).hexdigest()
    if made.experiment is not None:
        label = run.labels.get(made.experiment)
        filled["experiment_id"] = label.experiment_id if label else UNKNOWN_EXPERIMENT
    return filled, written


def file_bytes(case_id: str, spec: FileSpec, fill: Callable[[str], str]) -> bytes:
    """The bytes of an export: its text (placeholders filled), or deterministic filler."""
    if spec.text is not None:
        return fill(spec.text).encode("utf-8")
    assert spec.size is not None
    out = bytearray()
    counter = 0
    while len(out) < spec.size:
        out += hashlib.sha256(f"{case_id}/{spec.name}/{counter}".encode()).digest()
        counter += 1
    return bytes(out[: spec.size])


def message_id_of(turn: TurnPlay, cwd: str, fact: str) -> str | None:
    """What a model does before `memory_correct`: search for the memory it corrects."""
    started = time.perf_counter()
    result, code = invoke(turn, cwd, "memory_search", {"query": fact})
    ms = elapsed_ms(started)
    seen = Seen("memory_search", code, result=result)
    turn.run.probe((turn.index, turn.actor, turn.run.scope(turn.actor, cwd)), "memory_search",
                   seen, ms, [])  # fmt: skip
    items = result.get("conversation", []) if result is not None else []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and norm(fact) in norm(str(item.get("text", ""))):
            return str(item.get("message_id"))
    return None
