"""Playing one case under one configuration: the run's actors, what they said, what was seen.

Everything reaches the workers through their own op handlers (`events/append`,
`recall/first-step`, `tools/call` of `artmem serve`); `_turn` replays turns, `_calls` makes tool
calls, `_steps` plays the rest. Each recall and tool call is a probe, judged against the corpus
and scanned for foreign facts; each write is timed.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from cards import ArtifactError
from harness_plugin.eval import _steps, _turn
from harness_plugin.eval._backend import Backend
from harness_plugin.eval._checks import Labelled, Seen, observe, read_file, result_count
from harness_plugin.eval._corpus import Case, Derive, Expect, Turn
from harness_plugin.eval._leaks import Facts, Scope
from harness_plugin.eval._telemetry import Method, Observation, Probe, Record
from harness_plugin.eval._world import Actor, Mode, Names, expand, person_config
from harness_plugin.worker import _serve


@dataclass
class CaseRun:
    """One case in one mode: the actors, what they recorded and said, and the telemetry."""

    case: Case
    mode: Mode
    backend: Backend
    root: Path
    names: Names = field(init=False)
    actors: dict[str, Actor] = field(default_factory=dict)
    labels: dict[str, Labelled] = field(default_factory=dict)
    facts: Facts = field(default_factory=Facts)
    probes: list[Probe] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    record_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    timeouts: int = 0

    def __post_init__(self) -> None:
        self.names = Names(self.case)
        for person in self.case.people:
            base = self.root / self.mode / person.id
            config = person_config(self.case, self.mode, person, self.backend, base)
            self.actors[person.id] = Actor(
                person=person,
                peer=self.names.peer(person),
                workspace=self.backend.workspaces[person.workspace],
                base=base,
                config=config,
                environ=dict(self.backend.environ),
                backend=self.backend,
            )

    def play(self) -> None:
        """Every step of the case, in order."""
        for index, step in enumerate(self.case.steps):
            if isinstance(step, Turn):
                _turn.TurnPlay(self, index, step).play()
            else:
                _steps.play(self, index, step)

    def close(self) -> None:
        """Release held requests, then stop every worker."""
        self.backend.release()
        for actor in self.actors.values():
            actor.close()

    # -- where and what ------------------------------------------------------------------------

    def fill(self, text: str, actor: Actor) -> str:
        """`text` with its placeholders filled in for `actor`."""
        return expand(text, self.case.id, lambda s: actor.exports(self.names.session(s)))

    def cwd(self, actor: Actor, project: str, directory: str | None = None) -> str:
        """The working directory of a step: a project's root or the directory named."""
        if directory is None:
            directory = next(p.dir for p in self.case.projects if p.id == project)
        return actor.directory(directory)

    def scope(self, actor: Actor, cwd: str) -> Scope:
        """Where a probe looks from: the project whose root holds `cwd` (longest root wins).

        Worked out here, independently of the worker's own mapping, so a mapping bug shows.
        """
        relative = Path(cwd).relative_to(actor.base / "work").parts
        best: tuple[int, str | None] = (0, None)
        for project in self.case.projects:
            parts = tuple(project.dir.split("/"))
            if relative[: len(parts)] == parts and len(parts) > best[0]:
                best = (len(parts), self.names.project(project.id))
        return Scope(actor.workspace, actor.peer, best[1])

    def append(self, actor: Actor, caller: dict[str, object], event: dict[str, object]) -> object:
        """`events/append` of one event; the reply, or None when the worker refused it."""
        try:
            return _serve._append(actor.host, caller, {"event": event})
        except ArtifactError as exc:
            self.errors[str(exc.code)] += 1
            return None

    # -- judging -------------------------------------------------------------------------------

    def probe(
        self,
        where: tuple[int, Actor, Scope],
        method: Method,
        seen: Seen,
        ms: float,
        expects: list[Expect],
    ) -> Probe:
        """Judge and keep one probe (`where`: the step, who asked, from which scope)."""
        index, actor, scope = where
        probe = Probe(
            step=index,
            method=method,
            peer=actor.peer,
            project=scope.project,
            outcome=seen.code,
            results=result_count(seen),
            latency_ms=ms,
            leaks=self.facts.leaks(seen.text, scope),
            observations=self.judge(expects, seen, actor),
        )
        self.probes.append(probe)
        return probe

    def write(self, record: Record, seen: Seen, expects: list[Expect], actor: Actor) -> None:
        """Judge and keep one write made through a tool."""
        record.observations = self.judge(expects, seen, actor)
        if seen.code == "ok":
            self.record_ms.append(record.latency_ms)
        self.records.append(record)

    def judge(self, expects: list[Expect], seen: Seen, actor: Actor) -> list[Observation]:
        """Every expectation, its placeholders filled, against what was seen.

        A live Honcho derives for itself: what the corpus told the fake's deriver is not there,
        so expectations about those facts are not judged live.
        """
        if self.backend.fake is None:
            derived = {fact for step in self.case.steps if isinstance(step, Derive)
                       for fact in step.facts}  # fmt: skip
            expects = [e for e in expects if e.fact not in derived]
        return [observe(self._filled(e, actor), seen, self.labels, read_file) for e in expects]

    def outbox_hits(self, planted: list[str]) -> int:
        """How many planted strings sit in any outbox document left on disk."""
        found = 0
        for actor in self.actors.values():
            for folder, _, files in os.walk(actor.base / "state" / "outbox"):
                for name in files:
                    data = (Path(folder) / name).read_bytes()
                    found += sum(1 for value in planted if _contains(data, value))
        return found

    def _filled(self, expect: Expect, actor: Actor) -> Expect:
        changes = {
            name: self.fill(value, actor)
            for name in ("fact", "old")
            if isinstance(value := getattr(expect, name), str)
        }
        return expect.model_copy(update=changes) if changes else expect


def _contains(data: bytes, value: str) -> bool:
    return value.encode() in data or msgspec.json.encode(value)[1:-1] in data
