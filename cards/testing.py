"""Cards for bytes held in memory, for tests and benchmarks (not shipped in the wheel).

The store records files through `cards.build.new_card`, with the digests it measured while
copying; these cards are what it would write for a file of the same bytes.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from cards._ids import ProjectId, QueryFingerprint, artifact_id_for_bytes, experiment_id
from cards.build import new_card
from cards.card import CardMetadata, ExperimentCardV1
from cards.policy import IndexState


def card_for_bytes(
    content: bytes,
    metadata: CardMetadata,
    *,
    project_id: ProjectId,
    session_id: str,
    now: datetime,
    chunk_manifest_sha256: str = "0" * 64,
) -> ExperimentCardV1:
    """A card for `content`, as the store would write it for a file of those bytes."""
    artifact_id = artifact_id_for_bytes(content)
    return new_card(
        experiment_id=experiment_id(
            project_id,
            artifact_id,
            QueryFingerprint(metadata.query_fingerprint),
            metadata.source_version,
        ),
        project_id=project_id,
        artifact_id=artifact_id,
        sha256=hashlib.sha256(content).hexdigest(),
        size=len(content),
        chunk_manifest_sha256=chunk_manifest_sha256,
        metadata=metadata,
        session_id=session_id,
        root_agent_id=None,
        tool_call_id=None,
        index_state=IndexState.DISABLED,
        now=now,
    )
