"""Experiment ids as people type them: the full id, or a unique prefix of it.

The prefix may leave out `exp_`, as `list` prints it. An id or prefix of no experiment of the
project is `ExperimentNotFound`, whichever form it has; a malformed one is `InvalidId`.
"""

from __future__ import annotations

import re

from cards import InvalidId
from cards.errors import ExperimentNotFound
from cas import Store

MIN_PREFIX = 8
_LISTED = 10
_FULL = re.compile(r"exp_[a-z2-7]{52}")
_PREFIX = re.compile(rf"(?:exp_)?[a-z2-7]{{{MIN_PREFIX},52}}")
EXPECTED_FORM = (
    "an experiment id is exp_ followed by 52 characters a-z and 2-7 (as `record` and `search` "
    f"print it), or a unique prefix of at least {MIN_PREFIX} of them, with or without exp_ (as "
    "`list` prints it), e.g. exp_k3lmqz2a or k3lmqz2a"
)


class AmbiguousId(InvalidId):
    """A short experiment id matches more than one card of the project."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:_LISTED])
        more = "" if len(candidates) <= _LISTED else f", and {len(candidates) - _LISTED} more"
        super().__init__(
            f"{prefix} matches {len(candidates)} experiments: {shown}{more}; type more characters"
        )
        self.candidates = tuple(candidates)


def expand(store: Store, text: str) -> str:
    """The full experiment id `text` names: itself, or the one id of the project it prefixes.

    Raises:
        InvalidId: `text` is neither an id nor a long enough prefix (the message shows the
            form).
        ExperimentNotFound: `text` is a prefix of no experiment of the project.
        AmbiguousId: the prefix matches more than one experiment.
    """
    if _FULL.fullmatch(text):
        return text
    if not _PREFIX.fullmatch(text):
        raise InvalidId(f"not a valid experiment id: {EXPECTED_FORM}")
    if not text.startswith("exp_"):
        text = "exp_" + text
    if _FULL.fullmatch(text):
        return text
    matches = sorted(
        c.experiment_id for c in store.scan_cards().cards if c.experiment_id.startswith(text)
    )
    if len(matches) > 1:
        raise AmbiguousId(text, matches)
    if not matches:
        raise ExperimentNotFound(f"no experiment of this project starts with {text}")
    return matches[0]
