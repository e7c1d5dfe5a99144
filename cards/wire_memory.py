"""The arguments of the conversational tools (`memory_recall`, `_record`, `_correct`).

Like `cards.wire`: arguments forbid unknown fields (no session, project, peer or workspace can
be named); their results (`cards.results`) label recalled text as untrusted data. There is no
forget or delete: a correction is a new record that names what it supersedes.
"""

from __future__ import annotations

import enum
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

_IN = ConfigDict(extra="forbid", frozen=True, strict=True)
MAX_NOTE_CHARS: Final = 2000
MAX_QUESTION_CHARS: Final = 1000


class NoteKind(enum.StrEnum):
    """What an explicit note records."""

    PREFERENCE = "preference"
    DECISION = "decision"
    FACT = "fact"


class RecallArgs(BaseModel):
    """Ask memory a focused question about the user or this project."""

    model_config = _IN

    question: Annotated[str, Field(min_length=1, max_length=MAX_QUESTION_CHARS)]


class MemoryRecordArgs(BaseModel):
    """Record an explicit durable note the user just stated in this session."""

    model_config = _IN

    content: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS)]
    kind: Annotated[NoteKind, Field(strict=False)] = NoteKind.FACT


class CorrectArgs(BaseModel):
    """Record a correction the user just stated; it supersedes, never deletes, older memory."""

    model_config = _IN

    content: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS)]
    supersedes: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")] | None = Field(
        default=None, description="the message id of the memory this corrects (from memory_recall)"
    )
