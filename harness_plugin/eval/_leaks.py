"""Leakage: every fact belongs to a scope, and a probe must show no fact of another scope.

Facts are what the corpus says turns state, cards hold and Honcho's deriver concluded. A turn's
fact belongs to its workspace, person and project; a card's to its workspace and project (the
project's card index is shared by the team); a derived one to its workspace and person (global
context may span projects). A probe that shows a fact whose every owner is foreign to the probe's
own scope leaks, whatever the expectations said.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness_plugin.eval._checks import norm


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a fact was said, or where a probe looks from (None: any)."""

    workspace: str
    peer: str | None
    project: str | None

    def foreign_to(self, probe: Scope) -> bool:
        """Whether a fact of this scope must not reach `probe`."""
        if self.workspace != probe.workspace:
            return True
        if self.peer is not None and self.peer != probe.peer:
            return True
        return self.project is not None and self.project != probe.project


@dataclass
class Facts:
    """Every fact said so far, with its scopes."""

    owned: dict[str, set[Scope]] = field(default_factory=dict)

    def add(self, facts: Sequence[str], scope: Scope) -> None:
        """`facts` were said (or recorded, or derived) in `scope`."""
        for fact in facts:
            self.owned.setdefault(norm(fact), set()).add(scope)

    def leaks(self, text: str, probe: Scope) -> int:
        """How many facts of other scopes, never said in the probe's own, `text` shows."""
        seen = norm(text)
        count = 0
        for fact, scopes in self.owned.items():
            if fact in seen and all(scope.foreign_to(probe) for scope in scopes):
                count += 1
        return count
