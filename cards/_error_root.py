"""The root of `cards.errors`: the stable codes, `ArtifactError`, and two shared bases.

The slicing errors (`cards._slice_errors`) and the rest (`cards.errors`) both build on this module,
without a cycle. Import these names from `cards.errors` or `cards`.
"""

from __future__ import annotations

import enum

MAX_MESSAGE_CHARS = 1000  # an error message is for a person; nothing in it is data
EXCERPT_CHARS = 60


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A short, escaped rendering of a value a caller or a file supplied, for an error message.

    Strings are quoted with every non-printable character escaped (controls, bidi overrides,
    invisible characters) and cut at `limit` characters; numbers and None are shown; anything
    else (a hostile card may hold a list or an object where a version belongs) only by its type.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}… ({len(value)} characters)"
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        text = str(value) if value.bit_length() < 64 else f"<int of {value.bit_length()} bits>"
        return text
    return f"<{type(value).__name__}>"


def _printable(message: str) -> str:
    """`message` with non-printable characters escaped and its length bounded."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "… (message truncated)"
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class ErrorCode(enum.StrEnum):
    """Stable error codes: part of the public contract of the CLI and the tools."""

    CONFIG_INVALID = "config.invalid"
    INPUT_INVALID = "input.invalid"
    INVALID_ID = "input.invalid_id"
    UNKNOWN_PROJECT = "input.unknown_project"
    UNKNOWN_TOOL = "input.unknown_tool"
    INVALID_REQUEST = "input.invalid_request"
    SHUTTING_DOWN = "worker.shutting_down"
    WORKER_INTERNAL = "worker.internal"
    TOOL_FAILED = "client.tool_failed"
    NO_TOOL_BRIDGE = "client.no_bridge"
    NOT_IN_KERNEL = "client.no_session"
    BAD_REPLY = "client.bad_reply"
    INVALID_FILTER = "slice.invalid_filter"
    FILTER_SYNTAX = "slice.filter_syntax"
    FILTER_TYPE = "slice.filter_type"
    UNKNOWN_COLUMN = "slice.unknown_column"
    UNSUPPORTED_MEDIA_TYPE = "slice.unsupported_media_type"
    TABLE_TOO_LARGE = "slice.table_too_large"
    TABLE_UNREADABLE = "slice.table_unreadable"
    CARD_INVALID = "card.invalid"
    UNSUPPORTED_VERSION = "card.unsupported_version"
    PATH_REJECTED = "cas.path_rejected"
    PATH_ESCAPE = "cas.path_escape"
    NOT_REGULAR_FILE = "cas.not_regular_file"
    HARD_LINKED = "cas.hard_linked"
    FOREIGN_OWNER = "cas.foreign_owner"
    SOURCE_MISSING = "cas.source_missing"
    SOURCE_CHANGED = "cas.source_changed"
    LIMIT_EXCEEDED = "cas.limit_exceeded"
    ARTIFACT_TOO_LARGE = "cas.artifact_too_large"
    QUOTA_EXCEEDED = "cas.quota_exceeded"
    EXPERIMENT_NOT_FOUND = "cas.experiment_not_found"
    OBJECT_MISSING = "cas.object_missing"
    INTEGRITY = "cas.integrity"
    STORE_IO = "cas.io"
    BACKEND_UNSUPPORTED = "cas.backend_unsupported"
    OUTBOX_IO = "indexer.outbox_io"
    NOT_OWNER = "indexer.not_owner"
    REMOTE_UNAVAILABLE = "indexer.remote_unavailable"
    REMOTE_UNAUTHORIZED = "indexer.remote_unauthorized"
    REMOTE_REJECTED = "indexer.remote_rejected"
    REMOTE_MISCONFIGURED = "indexer.remote_misconfigured"
    RETRIES_EXHAUSTED = "indexer.retries_exhausted"
    HONCHO_DISABLED = "indexer.disabled"
    OUTBOX_CORRUPT = "indexer.outbox_corrupt"
    SLICE_TIMEOUT = "slice.timeout"
    CONSENT_REFUSED = "memory.consent_refused"
    PROJECT_MISMATCH = "memory.project_mismatch"
    UNKNOWN_PARENT = "lineage.unknown_parent"
    PARENTS_FIXED = "lineage.parents_fixed"
    EDIT_CONFLICT = "cas.edit_conflict"
    IDENTITY_FIELD = "input.identity_field"
    UNATTENDED_REFUSED = "cas.unattended_refused"


class ArtifactError(Exception):
    """Root of every error we raise on purpose; the CLI and tool surface catch only this."""

    # Class attributes, except on `ToolFailed`, which carries the code a remote host reported.
    code: ErrorCode
    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        """The content-free error shape the CLI and tools print.

        The message is printed as a person can read it safely whatever reached it: bounded, with
        control and other non-printable characters escaped (a last line of defence behind
        `excerpt`, which every message quoting an outside value uses).
        """
        return {"code": str(self.code), "message": _printable(self.message)}


class InvalidInput(ArtifactError, ValueError):
    """A caller-supplied value is out of bounds or malformed."""

    code = ErrorCode.INPUT_INVALID


class LimitExceeded(ArtifactError, ValueError):
    """A configured bound would be exceeded."""

    code = ErrorCode.LIMIT_EXCEEDED

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit
