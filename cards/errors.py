"""The one error root of artmem, with stable string codes.

Every error raised on purpose derives from `ArtifactError`. Its `code` is the stable value the CLI
and the tool surface report; `retryable` tells a caller (the outbox, the breaker) whether trying
again can help. Each class also subclasses the builtin a generic caller would catch.

    ArtifactError
    ├── ConfigError (ValueError)                 config.invalid
    ├── InvalidInput (ValueError)                input.invalid
    │   ├── InvalidId                            input.invalid_id
    │   ├── UnknownProject                       input.unknown_project
    │   ├── UnknownTool                          input.unknown_tool
    │   ├── InvalidRequest                       input.invalid_request
    │   ├── InvalidFilter                        slice.invalid_filter
    │   │   ├── FilterSyntaxError                slice.filter_syntax
    │   │   └── FilterTypeError                  slice.filter_type
    │   ├── UnknownColumn                        slice.unknown_column
    │   └── UnsupportedMediaType                 slice.unsupported_media_type
    ├── NotImplementedOp (NotImplementedError)   worker.not_implemented
    ├── ShuttingDown (RuntimeError, retryable)   worker.shutting_down
    ├── WorkerInternal (RuntimeError)            worker.internal
    ├── ToolFailed (RuntimeError)                <the host's code>, else client.tool_failed
    ├── NoToolBridge (RuntimeError)              client.no_bridge
    ├── NotInKernel (RuntimeError)               client.no_session
    ├── BadReply (ValueError)                    client.bad_reply
    ├── CardInvalid (ValueError)                 card.invalid
    │   └── UnsupportedVersion                   card.unsupported_version
    ├── PathRejected (PermissionError)           cas.path_rejected
    │   ├── PathEscape                           cas.path_escape
    │   ├── NotRegularFile                       cas.not_regular_file
    │   ├── HardLinked                           cas.hard_linked
    │   └── ForeignOwner                         cas.foreign_owner
    ├── SourceMissing (FileNotFoundError)        cas.source_missing
    ├── SourceChanged (RuntimeError)             cas.source_changed
    ├── LimitExceeded (ValueError)               cas.limit_exceeded
    │   ├── ArtifactTooLarge                     cas.artifact_too_large
    │   ├── QuotaExceeded                        cas.quota_exceeded
    │   ├── TableTooLarge                        slice.table_too_large
    │   └── SliceTimeout                         slice.timeout
    ├── TableUnreadable (ValueError)             slice.table_unreadable
    ├── ExperimentNotFound (LookupError)         cas.experiment_not_found
    ├── ObjectMissing (FileNotFoundError)        cas.object_missing
    ├── IntegrityError (ValueError)              cas.integrity
    ├── StoreIOError (OSError, retryable)        cas.io
    ├── OutboxError (OSError, retryable)         indexer.outbox_io
    ├── NotOwner (RuntimeError)                  indexer.not_owner
    ├── HonchoDisabled (RuntimeError)            indexer.disabled
    └── RemoteError                              (the Honcho side; never stops local work)
        ├── RemoteUnavailable (ConnectionError, retryable)   indexer.remote_unavailable
        ├── CircuitOpen (ConnectionError, retryable)         indexer.circuit_open
        ├── RemoteUnauthorized (PermissionError)             indexer.remote_unauthorized
        │   └── RemoteMisconfigured                          indexer.remote_misconfigured
        └── RemoteRejected (ValueError)                      indexer.remote_rejected

`indexer.retries_exhausted` is a code without a class: the outbox records it on a card whose
delivery was dead-lettered after its last retry. `indexer.outbox_corrupt` is one too: the
dead-letter reason of an outbox document that failed verification and was moved aside.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

_LISTED_COLUMNS = 20


class ErrorCode(enum.StrEnum):
    """Stable error codes: part of the public contract of the CLI and the tools."""

    CONFIG_INVALID = "config.invalid"
    INPUT_INVALID = "input.invalid"
    INVALID_ID = "input.invalid_id"
    UNKNOWN_PROJECT = "input.unknown_project"
    UNKNOWN_TOOL = "input.unknown_tool"
    INVALID_REQUEST = "input.invalid_request"
    NOT_IMPLEMENTED = "worker.not_implemented"
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
    OUTBOX_IO = "indexer.outbox_io"
    NOT_OWNER = "indexer.not_owner"
    REMOTE_UNAVAILABLE = "indexer.remote_unavailable"
    CIRCUIT_OPEN = "indexer.circuit_open"
    REMOTE_UNAUTHORIZED = "indexer.remote_unauthorized"
    REMOTE_REJECTED = "indexer.remote_rejected"
    REMOTE_MISCONFIGURED = "indexer.remote_misconfigured"
    RETRIES_EXHAUSTED = "indexer.retries_exhausted"
    HONCHO_DISABLED = "indexer.disabled"
    OUTBOX_CORRUPT = "indexer.outbox_corrupt"
    SLICE_TIMEOUT = "slice.timeout"


class ArtifactError(Exception):
    """Root of every error we raise on purpose; the CLI and tool surface catch only this."""

    # Class attributes, except on `ToolFailed`, which carries the code a remote host reported.
    code: ErrorCode
    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        """The content-free error shape the CLI and tools print."""
        return {"code": str(self.code), "message": self.message}


class ConfigError(ArtifactError, ValueError):
    """The configuration file is missing, malformed or unsafe."""

    code = ErrorCode.CONFIG_INVALID


class InvalidInput(ArtifactError, ValueError):
    """A caller-supplied value is out of bounds or malformed."""

    code = ErrorCode.INPUT_INVALID


class InvalidId(InvalidInput):
    """An identifier does not have the form its kind requires."""

    code = ErrorCode.INVALID_ID


class UnknownProject(InvalidInput):
    """No configured project matches the working directory or the named project."""

    code = ErrorCode.UNKNOWN_PROJECT


class UnknownTool(InvalidInput):
    """No tool of that name is available (it may be disabled by configuration)."""

    code = ErrorCode.UNKNOWN_TOOL


class InvalidRequest(InvalidInput):
    """A worker request is malformed: not JSON, wrong version, missing caller, unknown op."""

    code = ErrorCode.INVALID_REQUEST


class NotImplementedOp(ArtifactError, NotImplementedError):
    """The worker knows this op but does not implement it yet."""

    code = ErrorCode.NOT_IMPLEMENTED


class ShuttingDown(ArtifactError, RuntimeError):
    """The worker is shutting down and admits no new calls; retry against a new worker."""

    code = ErrorCode.SHUTTING_DOWN
    retryable = True


class WorkerInternal(ArtifactError, RuntimeError):
    """The worker failed in a way it did not expect (a bug); the message is content-free."""

    code = ErrorCode.WORKER_INTERNAL


class ToolFailed(ArtifactError, RuntimeError):
    """A host tool called from a kernel failed; `code` is the host's, when it is one of ours."""

    code = ErrorCode.TOOL_FAILED

    def __init__(self, host_code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.host_code = host_code
        self.retryable = retryable
        if host_code in ErrorCode.__members__.values():
            self.code = ErrorCode(host_code)


class NoToolBridge(ArtifactError, RuntimeError):
    """The kernel has no `dsh_tools` bridge to call host tools through."""

    code = ErrorCode.NO_TOOL_BRIDGE


class NotInKernel(ArtifactError, RuntimeError):
    """`RLM_SESSION_DIR` is not set: the code is not running inside a kernel session."""

    code = ErrorCode.NOT_IN_KERNEL


class BadReply(ArtifactError, ValueError):
    """A peer (the tool bridge, the worker) answered with something of the wrong shape."""

    code = ErrorCode.BAD_REPLY


class CardInvalid(ArtifactError, ValueError):
    """A stored or proposed experiment card fails validation."""

    code = ErrorCode.CARD_INVALID


class UnsupportedVersion(CardInvalid):
    """A document carries a schema version this build does not understand."""

    code = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, message: str, *, version: object) -> None:
        super().__init__(message)
        self.version = version


class PathRejected(ArtifactError, PermissionError):
    """A source path is not eligible for ingest."""

    code = ErrorCode.PATH_REJECTED


class PathEscape(PathRejected):
    """A path leaves the caller's exports directory or passes through a symlink."""

    code = ErrorCode.PATH_ESCAPE


class NotRegularFile(PathRejected):
    """The source is a directory, FIFO, socket or device."""

    code = ErrorCode.NOT_REGULAR_FILE


class HardLinked(PathRejected):
    """The source has more than one hard link, so it may alias a file outside exports."""

    code = ErrorCode.HARD_LINKED


class ForeignOwner(PathRejected):
    """The source is not owned by the session directory's owner: the kernel did not write it."""

    code = ErrorCode.FOREIGN_OWNER


class SourceMissing(ArtifactError, FileNotFoundError):
    """The source file (or a directory on its path) does not exist."""

    code = ErrorCode.SOURCE_MISSING


class SourceChanged(ArtifactError, RuntimeError):
    """The source file was replaced, truncated or grown while it was streamed."""

    code = ErrorCode.SOURCE_CHANGED


class LimitExceeded(ArtifactError, ValueError):
    """A configured bound would be exceeded."""

    code = ErrorCode.LIMIT_EXCEEDED

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class ArtifactTooLarge(LimitExceeded):
    """One artifact is larger than the per-artifact limit."""

    code = ErrorCode.ARTIFACT_TOO_LARGE


class QuotaExceeded(LimitExceeded):
    """Recording would exceed the project's byte or card quota."""

    code = ErrorCode.QUOTA_EXCEEDED


class ExperimentNotFound(ArtifactError, LookupError):
    """No card with that experiment id exists in the caller's project."""

    code = ErrorCode.EXPERIMENT_NOT_FOUND


class ObjectMissing(ArtifactError, FileNotFoundError):
    """A card points to an object that is not in the store."""

    code = ErrorCode.OBJECT_MISSING


class IntegrityError(ArtifactError, ValueError):
    """Stored bytes do not match their recorded size or digest."""

    code = ErrorCode.INTEGRITY


class StoreIOError(ArtifactError, OSError):
    """The store could not be read or written (disk full, permissions); may pass."""

    code = ErrorCode.STORE_IO
    retryable = True


class OutboxError(ArtifactError, OSError):
    """The outbox could not be read or written; admission failed and nothing was queued."""

    code = ErrorCode.OUTBOX_IO
    retryable = True


class NotOwner(ArtifactError, RuntimeError):
    """Another worker owns this state root (or replaced this one); this one must not publish."""

    code = ErrorCode.NOT_OWNER


class RemoteError(ArtifactError):
    """A failure on the Honcho side. Local record, search and resolve never depend on it."""

    code = ErrorCode.REMOTE_UNAVAILABLE


class RemoteUnavailable(RemoteError, ConnectionError):
    """Timeout, connection failure, rate limit or 5xx: the outcome may be ambiguous; retry."""

    code = ErrorCode.REMOTE_UNAVAILABLE
    retryable = True


class CircuitOpen(RemoteError, ConnectionError):
    """The circuit breaker is open: no request was sent."""

    code = ErrorCode.CIRCUIT_OPEN
    retryable = True


class RemoteUnauthorized(RemoteError, PermissionError):
    """Honcho refused the credentials (401/403): retrying cannot help until an operator acts."""

    code = ErrorCode.REMOTE_UNAUTHORIZED


class RemoteMisconfigured(RemoteUnauthorized):
    """Honcho is reachable but not set up as configured (e.g. the workspace does not exist)."""

    code = ErrorCode.REMOTE_MISCONFIGURED


class RemoteRejected(RemoteError, ValueError):
    """Honcho permanently rejected the request (422, 4xx, invalid ids): dead-letter it."""

    code = ErrorCode.REMOTE_REJECTED


class InvalidFilter(InvalidInput):
    """A filter expression is rejected; `position` is the 0-based offset of the problem."""

    code = ErrorCode.INVALID_FILTER

    def __init__(self, message: str, *, position: int) -> None:
        super().__init__(f"{message} (at position {position})")
        self.position = position


class FilterSyntaxError(InvalidFilter):
    """The filter text is not in the expression language, or exceeds its bounds."""

    code = ErrorCode.FILTER_SYNTAX


class FilterTypeError(InvalidFilter):
    """A literal or comparison does not fit the type of the column it is compared with."""

    code = ErrorCode.FILTER_TYPE


class UnknownColumn(InvalidInput):
    """A projected or filtered column is not in the table (or its name is ambiguous)."""

    code = ErrorCode.UNKNOWN_COLUMN

    def __init__(
        self, column: str, available: Sequence[str], *, position: int | None = None
    ) -> None:
        shown = ", ".join(repr(name) for name in available[:_LISTED_COLUMNS])
        more = len(available) - _LISTED_COLUMNS
        if more > 0:
            shown += f", and {more} more"
        where = "" if position is None else f" (at position {position})"
        super().__init__(f"no single column named {column[:200]!r}{where}; available: {shown}")
        self.column = column
        self.available = tuple(available)
        self.position = position


class UnsupportedMediaType(InvalidInput):
    """The artifact's media type is not one slicing can read."""

    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE

    def __init__(self, media_type: str, supported: Sequence[str]) -> None:
        names = ", ".join(supported)
        super().__init__(f"cannot slice media type {media_type!r}; supported: {names}")
        self.media_type = media_type
        self.supported = tuple(supported)


class TableTooLarge(LimitExceeded):
    """The table's metadata, width or a single read exceeds a slicing bound."""

    code = ErrorCode.TABLE_TOO_LARGE


class TableUnreadable(ArtifactError, ValueError):
    """The bytes are intact but are not a readable table of the declared media type."""

    code = ErrorCode.TABLE_UNREADABLE


class HonchoDisabled(ArtifactError, RuntimeError):
    """The operation needs Honcho indexing, which the configuration leaves off."""

    code = ErrorCode.HONCHO_DISABLED


class SliceTimeout(LimitExceeded):
    """A slice or table description did not finish within its wall-clock budget (seconds)."""

    code = ErrorCode.SLICE_TIMEOUT
