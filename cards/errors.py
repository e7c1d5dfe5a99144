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
    │   ├── UnknownParent                        lineage.unknown_parent
    │   ├── ParentsFixed                         lineage.parents_fixed
    │   ├── IdentityField                        input.identity_field
    │   └── UnsupportedMediaType                 slice.unsupported_media_type
    ├── ShuttingDown (RuntimeError, retryable)   worker.shutting_down
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
    ├── BackendUnsupported (RuntimeError)        cas.backend_unsupported
    ├── EditConflict (RuntimeError)              cas.edit_conflict
    ├── UnattendedRefused (PermissionError)      cas.unattended_refused
    ├── OutboxError (OSError, retryable)         indexer.outbox_io
    ├── NotOwner (RuntimeError)                  indexer.not_owner
    ├── HonchoDisabled (RuntimeError)            indexer.disabled
    ├── ConsentRefused (PermissionError)         memory.consent_refused
    │   └── ProjectMismatch                      memory.project_mismatch
    └── RemoteError                              (the Honcho side; never stops local work)
        ├── RemoteUnavailable (ConnectionError, retryable)   indexer.remote_unavailable
        ├── RemoteUnauthorized (PermissionError)             indexer.remote_unauthorized
        │   └── RemoteMisconfigured                          indexer.remote_misconfigured
        └── RemoteRejected (ValueError)                      indexer.remote_rejected

`indexer.retries_exhausted` is a code without a class: the outbox records it on a card whose
delivery was dead-lettered after its last retry. `indexer.outbox_corrupt` is one too: the
dead-letter reason of an outbox document that failed verification and was moved aside; and
`worker.internal`, the worker's answer to a failure it did not expect (a bug).
"""

from __future__ import annotations

from cards._error_root import ArtifactError as ArtifactError
from cards._error_root import ErrorCode as ErrorCode
from cards._error_root import InvalidInput as InvalidInput
from cards._error_root import LimitExceeded as LimitExceeded
from cards._error_root import excerpt as excerpt
from cards._slice_errors import FilterSyntaxError as FilterSyntaxError
from cards._slice_errors import FilterTypeError as FilterTypeError
from cards._slice_errors import InvalidFilter as InvalidFilter
from cards._slice_errors import SliceTimeout as SliceTimeout
from cards._slice_errors import TableTooLarge as TableTooLarge
from cards._slice_errors import TableUnreadable as TableUnreadable
from cards._slice_errors import UnknownColumn as UnknownColumn
from cards._slice_errors import UnsupportedMediaType as UnsupportedMediaType


class ConfigError(ArtifactError, ValueError):
    """The configuration file is missing, malformed or unsafe."""

    code = ErrorCode.CONFIG_INVALID


class InvalidId(InvalidInput):
    """An identifier does not have the form its kind requires."""

    code = ErrorCode.INVALID_ID


class UnknownProject(InvalidInput):
    """No configured project matches the working directory or the named project."""

    code = ErrorCode.UNKNOWN_PROJECT


class UnknownTool(InvalidInput):
    """No tool of that name is available (it may be disabled by configuration)."""

    code = ErrorCode.UNKNOWN_TOOL


class UnknownParent(InvalidInput):
    """A named parent is not an experiment of the caller's project (missing, or another's)."""

    code = ErrorCode.UNKNOWN_PARENT


class ParentsFixed(InvalidInput):
    """A re-record names other parents: a card's parents are fixed when it is first written.

    That rule is what keeps lineage acyclic: every parent existed before its child.
    """

    code = ErrorCode.PARENTS_FIXED


class InvalidRequest(InvalidInput):
    """A worker request is malformed: not JSON, wrong version, missing caller, unknown op."""

    code = ErrorCode.INVALID_REQUEST


class ShuttingDown(ArtifactError, RuntimeError):
    """The worker is shutting down and admits no new calls; retry against a new worker."""

    code = ErrorCode.SHUTTING_DOWN
    retryable = True


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


class BackendUnsupported(ArtifactError, RuntimeError):
    """The storage service lacks a capability an operation needs; `capability` names it."""

    code = ErrorCode.BACKEND_UNSUPPORTED

    def __init__(self, capability: str, message: str) -> None:
        super().__init__(message)
        self.capability = capability


class IdentityField(InvalidInput):
    """An edit names a field of the experiment's identity: that is a new record, not an edit."""

    code = ErrorCode.IDENTITY_FIELD


class EditConflict(ArtifactError, RuntimeError):
    """The card changed since the revision an edit was decided on; nothing was written.

    `revision` is the card's revision now: read the card again and decide the edit again.
    """

    code = ErrorCode.EDIT_CONFLICT

    def __init__(self, message: str, revision: str) -> None:
        super().__init__(message)
        self.revision = revision


class UnattendedRefused(ArtifactError, PermissionError):
    """A destructive operator command would run with no one at a terminal, and policy forbids it."""

    code = ErrorCode.UNATTENDED_REFUSED


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


class RemoteUnauthorized(RemoteError, PermissionError):
    """Honcho refused the credentials (401/403): retrying cannot help until an operator acts."""

    code = ErrorCode.REMOTE_UNAUTHORIZED


class RemoteMisconfigured(RemoteUnauthorized):
    """Honcho is reachable but not set up as configured (e.g. the workspace does not exist)."""

    code = ErrorCode.REMOTE_MISCONFIGURED


class RemoteRejected(RemoteError, ValueError):
    """Honcho permanently rejected the request (422, 4xx, invalid ids): dead-letter it."""

    code = ErrorCode.REMOTE_REJECTED


class ConsentRefused(ArtifactError, PermissionError):
    """A memory note was not grounded in the person's latest message of the calling session."""

    code = ErrorCode.CONSENT_REFUSED


class ProjectMismatch(ConsentRefused):
    """A session's note came from another project than the one where the session started."""

    code = ErrorCode.PROJECT_MISMATCH


class HonchoDisabled(ArtifactError, RuntimeError):
    """The operation needs Honcho indexing, which the configuration leaves off."""

    code = ErrorCode.HONCHO_DISABLED
