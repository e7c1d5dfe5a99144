"""The caller of a tool: supplied by the host for every call, never by the model or kernel."""

from __future__ import annotations

import os
from typing import Annotated, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from cards import InvalidRequest, SessionId, parse_session_id
from cards.model import validation_message


def _absolute(value: str) -> str:
    if not os.path.isabs(value) or "\x00" in value:
        raise ValueError("must be an absolute path")
    return value


def _printable(value: str) -> str:
    if not value.isprintable():
        raise ValueError("must be printable")
    return value


_M = TypeVar("_M", bound=BaseModel)
CallId = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_printable)]


class Caller(BaseModel):
    """Who is calling: the harness session, its working directory, and the call lineage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: Annotated[SessionId, AfterValidator(parse_session_id)]
    cwd: Annotated[str, Field(max_length=4096), AfterValidator(_absolute)]
    call_id: CallId
    root_call_id: CallId
    agent_kind: Literal["root", "child"]

    @property
    def root_agent_id(self) -> str | None:
        """The root agent's id when the caller is the root (in DSH, the agent id is the session)."""
        return self.session_id if self.agent_kind == "root" else None


class SessionCaller(BaseModel):
    """The caller of a session-level request (`events/append`, `recall/first-step`).

    The same host-supplied identity as a tool caller; call ids are optional, since an event or
    a step is not a tool call.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: Annotated[SessionId, AfterValidator(parse_session_id)]
    cwd: Annotated[str, Field(max_length=4096), AfterValidator(_absolute)]
    agent_kind: Literal["root", "child"]
    call_id: CallId | None = None
    root_call_id: CallId | None = None


def parse_session_caller(document: object) -> SessionCaller:
    """Validate the host-supplied caller of a session-level request.

    Raises:
        InvalidRequest: the caller is missing or malformed (the message names fields only).
    """
    return _parse(SessionCaller, document, "this op")


def parse_caller(document: object) -> Caller:
    """Validate the host-supplied caller of a request.

    Raises:
        InvalidRequest: the caller is missing or malformed (the message names fields only).
    """
    return _parse(Caller, document, "tools/call")


def _parse(model: type[_M], document: object, what: str) -> _M:
    if document is None:
        raise InvalidRequest(f"{what} needs a caller supplied by the host")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise InvalidRequest(f"invalid caller: {validation_message(exc)}") from exc
