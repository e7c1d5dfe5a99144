"""What every msgspec struct of ours shares: whole-string patterns, and where an error is.

msgspec matches a `Meta(pattern=...)` with `re.search`, so a pattern must be anchored at both
ends, and with the end-of-text anchor: a `$` would let a final newline through. msgspec reports
the first failure as one string, "what - at `$.a[0].b`"; `error_at` splits it, for messages
that name the field.
"""

from __future__ import annotations

from typing import NamedTuple

from msgspec import ValidationError

from cards import _ids

_UNKNOWN = "Object contains unknown field `"


def whole(body: str) -> str:
    """`body` matching a whole string only."""
    return rf"^(?:{body})\Z"


HONCHO_ID = whole(_ids.HONCHO_ID.pattern)  # a Honcho workspace, peer or session id


class ErrorAt(NamedTuple):
    """A failure: the path to the field (keys and indices), and what msgspec says is wrong.

    `unknown` is the key itself when an unknown key is what is wrong (`path` then leads to the
    object holding it).
    """

    path: list[str]
    message: str
    unknown: str | None


def error_at(exc: ValidationError) -> ErrorAt:
    """Where msgspec's failure is, and what it says."""
    message, _, where = str(exc).rpartition(" - at `")
    if not message:
        message, where = str(exc), "$`"
    parts = where.rstrip("`").removeprefix("$").replace("[", ".").replace("]", "").split(".")
    path = [part for part in parts if part]
    unknown = None
    if message.startswith(_UNKNOWN):
        unknown = message.removeprefix(_UNKNOWN).removesuffix("`")
    return ErrorAt(path, message, unknown)
