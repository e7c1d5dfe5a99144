"""The evaluation corpus (Honcho spec §22): one declarative TOML scenario a case, strictly valid.

A case names its synthetic people and projects, then plays steps: turns of DSH sessions (a turn
may ask for first-step recall and make tool calls, each with expectations), long histories,
deliveries, worker restarts, what Honcho's deriver would have concluded (fake only), Honcho
faults (fake only) and damage to stored bytes. Text may hold placeholders that the runner fills
at run time, so no secret-shaped string sits in a file: `{secret:KIND}` (a synthetic secret of
that shape), `{fp:NAME}` (a query fingerprint), `{exports:SESSION}` (that session's exports
directory) and, in a history, `{n}` (the turn number).

Identifiers (case, person, session, project, directory, label) are kept apart from content
(everything said, recorded or expected): the report may carry identifiers, never content.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from importlib import resources
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cards import InvalidInput
from cards.model import validation_message

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
Ident = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")]
Dir = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,30}(/[a-z][a-z0-9-]{0,30}){0,3}$")]
Text = Annotated[str, Field(min_length=1, max_length=20_000)]
Fact = Annotated[str, Field(min_length=4, max_length=200)]
GateTag = Literal["isolation", "correction", "freshness", "injection", "outage"]
ToolName = Literal[
    "memory_search",
    "memory_recall",
    "memory_record",
    "memory_correct",
    "memory_status",
    "memory_artifact_record",
    "memory_artifact_resolve",
]
ExpectKind = Literal[
    "present",  # the fact is in what the model sees
    "absent",  # the fact is not
    "superseded",  # the correction (fact) is present, labelled as superseding the old fact
    "subordinate",  # the fact is present only as dated, untrusted data below current evidence
    "inert",  # stored instructions stay data: one block, no forged lines, labelled untrusted
    "within_budget",  # the injection fits the recall token and item budgets
    "no_injection",  # recall injected nothing (with reason `code`, when given)
    "no_results",  # a search or recall found nothing
    "fails_open",  # the call answered although its remote part failed or timed out
    "error",  # the call failed safely with `code`
    "ok",  # the call succeeded
    "freshness",  # a resolve said `value` (fresh, stale, unverifiable, not_checked)
    "hit",  # a search found `experiment` (from `value`: local, honcho or both, when given)
    "no_hit",  # a search did not find `experiment`
    "exact_first",  # the first hit is `experiment`, matched exactly
    "not_exact",  # `experiment` is not marked as an exact match
    "same_experiment",  # a record answered the id of `experiment` (idempotent identity)
    "identical_bytes",  # the resolved path holds exactly the bytes recorded as `experiment`
]
POSITIVE: frozenset[str] = frozenset(
    {
        "present",
        "superseded",
        "subordinate",
        "ok",
        "freshness",
        "hit",
        "exact_first",
        "same_experiment",
        "identical_bytes",
    }
)
_NEEDS_FACT = {"present", "absent", "superseded", "subordinate"}
_NEEDS_EXPERIMENT = {"hit", "no_hit", "exact_first", "not_exact", "same_experiment"}


class Expect(BaseModel):
    """One expectation about what a recall or tool call showed."""

    model_config = _STRICT

    expect: ExpectKind
    fact: Fact | None = None
    old: Fact | None = None
    code: Annotated[str, Field(pattern=r"^[a-z_]+\.[a-z_.]+$")] | None = None
    value: Ident | None = None
    experiment: Ident | None = None

    @model_validator(mode="after")
    def _complete(self) -> Expect:
        if (self.fact is None) == (self.expect in _NEEDS_FACT):
            raise ValueError(f"`fact` goes with {sorted(_NEEDS_FACT)} and only those")
        if (self.old is None) == (self.expect == "superseded"):
            raise ValueError("`old` goes with superseded and only with it")
        if self.expect in _NEEDS_EXPERIMENT and self.experiment is None:
            raise ValueError(f"{self.expect} needs `experiment`")
        if self.expect == "error" and self.code is None:
            raise ValueError("error needs `code`")
        if self.expect == "freshness" and self.value is None:
            raise ValueError("freshness needs `value`")
        return self

    @property
    def positive(self) -> bool:
        """Whether this asks for memory to be there (the baseline cannot meet it)."""
        return self.expect in POSITIVE


class FileSpec(BaseModel):
    """An export the kernel writes before recording it: `text`, or `size` filler bytes."""

    model_config = _STRICT

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9._-]{0,60}$")]
    text: Text | None = None
    size: Annotated[int, Field(ge=1, le=16 << 20)] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FileSpec:
        if (self.text is None) == (self.size is None):
            raise ValueError("a file has `text` or `size`, not both")
        return self


class Call(BaseModel):
    """A tool call the model makes during a turn, and what it must show."""

    model_config = _STRICT

    tool: ToolName
    arguments: dict[str, str | int | list[str]] = {}
    label: Ident | None = None  # memory_artifact_record: remember the experiment by this name
    experiment: Ident | None = None  # memory_artifact_resolve: the labelled experiment
    file: FileSpec | None = None  # memory_artifact_record: the export to write first
    supersedes_fact: Fact | None = None  # memory_correct: the memory it corrects
    child: bool = False  # made by a child agent
    project: Ident | None = None  # from this project's directory instead of the turn's
    expect: list[Expect] = []
    facts: list[Fact] = []  # card text that later probes may see (owned by the project)


class Turn(BaseModel):
    """One DSH turn replayed as session events, with recall and tool calls in the middle."""

    model_config = _STRICT

    kind: Literal["turn"]
    person: Ident = "ada"
    session: Ident
    project: Ident = "trial"
    dir: Dir | None = None  # the working directory (under the person's work/), if not the root
    child: bool = False  # a child (subagent) session
    user: Text
    assistant: Text | None = None
    end: Literal["completed", "error", "aborted", "cancelled"] = "completed"
    tool_output: Text | None = None  # a tool runs in this turn and prints this
    subagent_text: Text | None = None  # a subagent reports this back to the root
    plugin_text: Text | None = None  # another plugin injects this as a message
    hostile_fields: Text | None = None  # put into every event field capture must not read
    recall: list[Expect] | None = None  # ask recall/first-step at step 1 and check
    calls: list[Call] = []
    capture: Literal["captured", "skipped"] | None = None
    facts: list[Fact] = []  # what this turn states (owned by its person and project)

    @model_validator(mode="after")
    def _facts_are_said(self) -> Turn:
        said = " ".join(t for t in (self.user, self.assistant or "") if t)
        for fact in self.facts:
            if fact not in said:
                raise ValueError("every fact of a turn must be part of what it says")
        return self


class History(BaseModel):
    """A long history: `turns` completed turns spread over `sessions` sessions."""

    model_config = _STRICT

    kind: Literal["history"]
    person: Ident = "ada"
    project: Ident = "trial"
    session: Ident
    sessions: Annotated[int, Field(ge=1, le=64)] = 1
    turns: Annotated[int, Field(ge=1, le=10_000)]
    user: Text  # `{n}` is the turn's number
    assistant: Text
    pad_chars: Annotated[int, Field(ge=0, le=8_000)] = 0  # filler words added to each message


class Deliver(BaseModel):
    """Run the delivery worker of every person until their outboxes are empty."""

    model_config = _STRICT

    kind: Literal["deliver"]


class Restart(BaseModel):
    """Replace a person's worker process (same state root), as after a restart."""

    model_config = _STRICT

    kind: Literal["restart"]
    person: Ident = "ada"


class Derive(BaseModel):
    """What Honcho's deriver would conclude about a person (fake Honcho only)."""

    model_config = _STRICT

    kind: Literal["derive"]
    person: Ident = "ada"
    representation: Text | None = None
    representation_lines: Annotated[int, Field(ge=0, le=5_000)] = 0  # repeat it, numbered
    peer_card: list[Text] = []
    facts: list[Fact] = []


class Honcho(BaseModel):
    """A Honcho fault (fake Honcho only): down, slow routes held, or everything released."""

    model_config = _STRICT

    kind: Literal["honcho"]
    down: bool | None = None
    hold: list[Literal["peer_context", "workspace_search", "session_search"]] = []
    release: bool = False


class Tamper(BaseModel):
    """Damage a recorded object on disk, as a failing disk or an operator would."""

    model_config = _STRICT

    kind: Literal["tamper"]
    person: Ident = "ada"
    project: Ident = "trial"
    experiment: Ident
    how: Literal["flip", "remove"]


Step = Annotated[
    Turn | History | Deliver | Restart | Derive | Honcho | Tamper, Field(discriminator="kind")
]


class Person(BaseModel):
    """A synthetic human: a peer in one of the run's workspaces, on their own machine."""

    model_config = _STRICT

    id: Ident
    peer: Ident | None = None  # the peer name, when two people share one (other workspaces)
    workspace: Literal["main", "second"] = "main"


class Project(BaseModel):
    """A configured project: its id and its root under each person's work/ directory."""

    model_config = _STRICT

    id: Ident
    dir: Dir


class CaseConfig(BaseModel):
    """Overrides of the memory configuration for one case (memory run; limits in both)."""

    model_config = _STRICT

    capture: dict[str, int | str | bool] = {}
    recall: dict[str, int | str | bool] = {}
    search_timeout_s: Annotated[float, Field(gt=0, le=10)] | None = None
    limits: dict[str, int] = {}


_DEFAULT_PEOPLE = [Person(id="ada")]
_DEFAULT_PROJECTS = [Project(id="trial", dir="trial"), Project(id="atlas", dir="atlas")]


class Case(BaseModel):
    """One corpus case: who, where, and the steps to play."""

    model_config = _STRICT

    id: Annotated[str, Field(pattern=r"^c[0-9]{2}-[a-z][a-z-]{2,40}$")]
    spec_case: Annotated[int, Field(ge=1, le=17)]
    gates: list[GateTag] = []
    fake_only: bool = False  # needs fault injection or the deriver: skipped with --live
    people: list[Person] = _DEFAULT_PEOPLE
    projects: list[Project] = _DEFAULT_PROJECTS
    config: CaseConfig = CaseConfig()
    # A planted secret whose upload is a known product defect (secret key -> defect id): its
    # uploads are reported under the defect, apart from the no-secrets gate, until it is fixed.
    known_failures: dict[Ident, Ident] = {}
    steps: Annotated[list[Step], Field(min_length=1)]

    @model_validator(mode="after")
    def _references_resolve(self) -> Case:
        people = {p.id for p in self.people}
        projects = {p.id for p in self.projects}
        for key in self.known_failures:
            if "{secret:" + key + "}" not in self.model_dump_json():
                raise ValueError("a known failure names a secret the case never plants")
        for step in self.steps:
            if getattr(step, "person", "ada") not in people:
                raise ValueError("a step names a person the case does not declare")
            if getattr(step, "project", "trial") not in projects:
                raise ValueError("a step names a project the case does not declare")
        return self

    @property
    def number(self) -> int:
        """The case number as the file name gives it (`c05-...` is 5)."""
        return int(self.id[1:3])


def load_corpus() -> list[Case]:
    """Every case shipped in `corpus/`, in file-name order.

    Raises:
        InvalidInput: a corpus file is not valid TOML or not a valid case.
    """
    folder = resources.files(__package__ or "harness_plugin.eval").joinpath("corpus")
    cases = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            cases.append(parse_case(entry.name, entry.read_text(encoding="utf-8")))
    return cases


def parse_case(name: str, text: str) -> Case:
    """One case from its TOML text; its id must match the file name.

    Raises:
        InvalidInput: the text is not valid TOML or not a valid case.
    """
    try:
        case = Case.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"corpus file {name} is not valid TOML: {exc}") from exc
    except ValidationError as exc:
        raise InvalidInput(f"corpus file {name}: {validation_message(exc)}") from exc
    if f"{case.id}.toml" != name:
        raise InvalidInput(f"corpus file {name} holds case {case.id}")
    return case


def select(cases: list[Case], wanted: list[str]) -> list[Case]:
    """The cases named by id or number (all when `wanted` is empty).

    Raises:
        InvalidInput: a name matches no case.
    """
    if not wanted:
        return cases
    chosen: list[Case] = []
    for name in wanted:
        found = [c for c in cases if name in (c.id, str(c.number), f"{c.number:02d}")]
        if not found:
            raise InvalidInput("no corpus case has that id or number")
        chosen.extend(c for c in found if c not in chosen)
    return sorted(chosen, key=lambda c: c.id)


def expectations(case: Case) -> Iterator[Expect]:
    """Every expectation of a case, in step order."""
    for step in case.steps:
        if isinstance(step, Turn):
            yield from step.recall or []
            for call in step.calls:
                yield from call.expect
