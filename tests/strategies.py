"""Hypothesis strategies shared by the test suite."""

from __future__ import annotations

import hashlib

from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)

# Display text: printable, no control characters, never blank.
_printable = st.characters(blacklist_categories=("Cc", "Cs"))
lines = st.text(_printable, min_size=1, max_size=60).filter(lambda s: s.strip() != "")
fingerprints = st.binary(min_size=1, max_size=16).map(lambda b: hashlib.sha256(b).hexdigest())

metadata_fields = st.fixed_dictionaries(
    {
        "title": lines,
        "summary": lines,
        "query_fingerprint": fingerprints,
        "source": lines,
        "source_version": lines,
    },
    optional={
        "tags": st.lists(lines, max_size=5),
        "columns": st.lists(lines, max_size=5),
        "shape": st.lists(st.integers(min_value=0, max_value=10**9), max_size=3),
        "media_type": st.sampled_from(
            ["application/octet-stream", "application/vnd.apache.parquet", "text/csv"]
        ),
    },
)


def build_card(fields: dict[str, object], content: bytes = b"x", project: str = "p1"):
    """A valid ExperimentCardV1 from metadata fields, for tests of the pure core."""
    from datetime import UTC, datetime

    from cards import (
        ArtifactRefV1,
        ExperimentCardV1,
        IndexState,
        IndexStatus,
        artifact_id_for_bytes,
        experiment_id,
    )

    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    artifact = artifact_id_for_bytes(content)
    fp = str(fields["query_fingerprint"])
    version = str(fields["source_version"])
    return ExperimentCardV1(
        schema_version=1,
        experiment_id=experiment_id(project, artifact, fp, version),
        artifact=ArtifactRefV1(
            schema_version=1,
            artifact_id=artifact,
            sha256=hashlib.sha256(content).hexdigest(),
            bytes=len(content),
            media_type=str(fields.get("media_type", "application/octet-stream")),
            created_at=now,
        ),
        chunk_manifest_sha256="0" * 64,
        title=fields["title"],
        summary=fields["summary"],
        query_fingerprint=fp,
        source=fields["source"],
        source_version=version,
        shape=fields.get("shape"),
        columns=fields.get("columns", []),
        tags=fields.get("tags", []),
        project_id=project,
        session_id="s1",
        producer="artmem test",
        created_at=now,
        updated_at=now,
        index=IndexStatus(state=IndexState.DISABLED),
    )
