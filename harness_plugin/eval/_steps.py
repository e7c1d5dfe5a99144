"""The steps around turns: histories, deliveries, restarts, the deriver, faults and damage."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from harness_plugin.eval._corpus import Deliver, Derive, History, Honcho, Restart, Step, Tamper
from harness_plugin.eval._leaks import Scope
from harness_plugin.eval._telemetry import elapsed_ms

if TYPE_CHECKING:
    from harness_plugin.eval._play import CaseRun

_SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "bo", "di", "fe")


def play(run: CaseRun, index: int, step: Step) -> None:
    """One step that is not a turn."""
    if isinstance(step, History):
        history(run, step)
    elif isinstance(step, Deliver):
        for actor in run.actors.values():
            actor.deliver()
        if run.backend.settle_s and run.mode == "memory":
            time.sleep(run.backend.settle_s)  # live: Honcho embeds new messages in the background
    elif isinstance(step, Restart):
        run.actors[step.person].restart()
    elif isinstance(step, Derive):
        derive(run, step)
    elif isinstance(step, Honcho):
        honcho(run, step)
    elif isinstance(step, Tamper):
        tamper(run, step)
    else:  # a Turn is played by the run itself
        raise TypeError(f"not a step played here: {type(step).__name__}")


def history(run: CaseRun, step: History) -> None:
    """`turns` completed turns over `sessions` sessions, each captured (as fast as the worker)."""
    actor = run.actors[step.person]
    cwd = run.cwd(actor, step.project)
    for n in range(1, step.turns + 1):
        session = run.names.session(f"{step.session}-{(n - 1) % step.sessions}")
        caller: dict[str, object] = {"session_id": session, "cwd": cwd, "agent_kind": "root"}
        state = actor.session(session)
        state.turns += 1
        turn = state.turns
        user = run.fill(step.user.replace("{n}", str(n)), actor) + filler(n, step.pad_chars)
        answer = run.fill(step.assistant.replace("{n}", str(n)), actor)
        run.append(actor, caller, state.event("turn/start", {"turn": turn}))
        run.append(actor, caller, state.event("user/message", {
            "content": [{"type": "text", "text": user}], "source": {"kind": "user"},
            "role": "user"}))  # fmt: skip
        run.append(actor, caller, state.event("assistant/message", {"turn": turn, "step": 1,
            "message": {"role": "assistant", "content": [{"type": "text", "text": answer}],
                        "source": {"kind": "model"}}}))  # fmt: skip
        started = time.perf_counter()
        reply = run.append(actor, caller, state.event("turn/end", {"turn": turn,
                           "reason": {"kind": "completed"}}))  # fmt: skip
        if isinstance(reply, dict) and reply.get("captured"):
            run.record_ms.append(elapsed_ms(started))


def filler(n: int, chars: int) -> str:
    """Deterministic made-up words, about `chars` characters, different for every `n`."""
    words: list[str] = []
    size = 0
    i = n * 7919
    while size < chars:
        word = "".join(_SYLLABLES[(i >> shift) % len(_SYLLABLES)] for shift in (0, 4, 8))
        words.append(word)
        size += len(word) + 1
        i += 104729
    return (" " + " ".join(words))[: chars + 1] if chars else ""


def derive(run: CaseRun, step: Derive) -> None:
    """What Honcho's deriver would have concluded about a person (the fake only)."""
    fake = run.backend.fake
    if fake is None:
        return  # a real Honcho derives for itself, in its own time
    actor = run.actors[step.person]
    representation = None
    if step.representation is not None:
        line = run.fill(step.representation, actor)
        if step.representation_lines:
            lines = (line.replace("{n}", str(n)) for n in range(step.representation_lines))
            representation = "\n".join(lines)
        else:
            representation = line
    card = [run.fill(entry, actor) for entry in step.peer_card] or None
    fake.set_peer_memory(actor.workspace, actor.peer, representation=representation,
                         peer_card=card)  # fmt: skip
    said = [run.fill(fact, actor) for fact in step.facts]
    run.facts.add(said, Scope(actor.workspace, actor.peer, None))


def honcho(run: CaseRun, step: Honcho) -> None:
    """A fault of the fake Honcho (a real one is never touched)."""
    backend = run.backend
    if backend.fake is None:
        return
    if step.release:
        backend.release()
    if step.down is not None:
        backend.fake.down = step.down
    for kind in step.hold:
        backend.hold(kind)


def tamper(run: CaseRun, step: Tamper) -> None:
    """Flip a byte of, or remove, the stored object of a labelled experiment."""
    label = run.labels.get(step.experiment)
    if label is None:
        return  # never recorded (the baseline): nothing to damage
    actor = run.actors[step.person]
    store = actor.host.runtime.stores[run.names.project(step.project)]
    path = store.resolve(label.experiment_id).path
    if step.how == "remove":
        os.unlink(path)
        return
    os.chmod(path, 0o600)
    with open(path, "r+b") as handle:
        first = handle.read(1)
        handle.seek(0)
        handle.write(bytes([first[0] ^ 0xFF]))
    os.chmod(path, 0o400)
