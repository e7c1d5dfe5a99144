"""The pure core of artmem: identities, canonical JSON, card models, bounds and errors.

Nothing here does I/O, reads the clock or draws randomness. The card structs (`cards.card`,
msgspec) and the pydantic models (`cards.model`, `cards.wire`, `cards.remote`) load on first use
(PEP 562): `artmem --help` builds neither, and recording or reading a card imports no pydantic.
"""

from typing import TYPE_CHECKING

from cards._ids import (
    ArtifactId,
    ExperimentId,
    ProjectId,
    ProjectKey,
    QueryFingerprint,
    SessionId,
    artifact_id_for_digest,
    experiment_id,
    honcho_session_id,
    is_honcho_id,
    parse_artifact_id,
    parse_experiment_id,
    parse_project_id,
    parse_session_id,
    project_key,
)
from cards.canonical import canonical_json
from cards.errors import (
    ArtifactError,
    ConfigError,
    ConsentRefused,
    InvalidFilter,
    InvalidId,
    InvalidInput,
    InvalidRequest,
    NotOwner,
    ObjectMissing,
    OutboxError,
    ProjectMismatch,
    RemoteError,
    RemoteMisconfigured,
    RemoteRejected,
    RemoteUnauthorized,
    RemoteUnavailable,
    ShuttingDown,
    SourceMissing,
    UnknownColumn,
    UnknownParent,
    UnknownProject,
    UnknownTool,
    UnsupportedMediaType,
    excerpt,
)
from cards.lazy import lazy_exports as _lazy_exports
from cards.policy import DEFAULT_LIMITS, Freshness, IndexState, Limits, freshness_verdict

if TYPE_CHECKING:
    from cards.card import (
        CardMetadata,
        ExperimentCardV1,
        IndexStatus,
        dump_card,
        parse_card,
        parse_metadata,
    )
    from cards.model import validation_message
    from cards.remote import (
        RemoteCard,
        card_delivery_id,
        conversation_delivery_id,
        project_card,
        projection_revision,
    )

_LAZY = {
    "CardMetadata": "cards.card",
    "ExperimentCardV1": "cards.card",
    "IndexStatus": "cards.card",
    "dump_card": "cards.card",
    "parse_card": "cards.card",
    "parse_metadata": "cards.card",
    "validation_message": "cards.model",
    "RemoteCard": "cards.remote",
    "card_delivery_id": "cards.remote",
    "conversation_delivery_id": "cards.remote",
    "project_card": "cards.remote",
    "projection_revision": "cards.remote",
}

__all__ = [
    "excerpt",
    "ArtifactError",
    "ArtifactId",
    "CardMetadata",
    "ConfigError",
    "ConsentRefused",
    "ProjectMismatch",
    "DEFAULT_LIMITS",
    "ExperimentCardV1",
    "ExperimentId",
    "Freshness",
    "IndexState",
    "IndexStatus",
    "InvalidFilter",
    "InvalidId",
    "InvalidInput",
    "InvalidRequest",
    "Limits",
    "NotOwner",
    "ObjectMissing",
    "OutboxError",
    "ProjectId",
    "ProjectKey",
    "QueryFingerprint",
    "RemoteCard",
    "RemoteError",
    "RemoteMisconfigured",
    "RemoteRejected",
    "RemoteUnauthorized",
    "RemoteUnavailable",
    "SessionId",
    "ShuttingDown",
    "SourceMissing",
    "UnknownColumn",
    "UnknownParent",
    "UnknownProject",
    "UnknownTool",
    "UnsupportedMediaType",
    "artifact_id_for_digest",
    "canonical_json",
    "card_delivery_id",
    "conversation_delivery_id",
    "dump_card",
    "experiment_id",
    "honcho_session_id",
    "freshness_verdict",
    "is_honcho_id",
    "parse_artifact_id",
    "parse_card",
    "parse_experiment_id",
    "parse_metadata",
    "parse_project_id",
    "parse_session_id",
    "project_card",
    "project_key",
    "projection_revision",
    "validation_message",
]


__getattr__, _ = _lazy_exports(__name__, _LAZY)  # eager names stay in dir(cards)
