"""Identities: the exact formulas of ARCHITECTURE.md, and one validating parser per id kind."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import NewType

from cards.errors import InvalidId

ArtifactId = NewType("ArtifactId", str)
ExperimentId = NewType("ExperimentId", str)
ProjectId = NewType("ProjectId", str)
ProjectKey = NewType("ProjectKey", str)
SessionId = NewType("SessionId", str)
QueryFingerprint = NewType("QueryFingerprint", str)

IDENTITY_SCHEMA_VERSION = 1
_PROJECT_KEY_DOMAIN = b"artmem/project-key/v1\x00"
_JSON_STRING = json.JSONEncoder(ensure_ascii=False).encode

# 52 = len(base32url(32 bytes)): 256 bits in 5-bit symbols, padding removed.
_DIGEST_ID = r"[a-z2-7]{52}"
ARTIFACT_ID = re.compile(rf"art_{_DIGEST_ID}")
EXPERIMENT_ID = re.compile(rf"exp_{_DIGEST_ID}")
HONCHO_ID = re.compile(r"[A-Za-z0-9_-]{1,512}")  # Honcho's id alphabet
PROJECT_ID = HONCHO_ID  # a project id is used as a Honcho id
# The kernel runtime's own session-id rule: no leading dot, so never '.' or '..'.
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def base32url(data: bytes) -> str:
    """Lowercase RFC 4648 base32 with the `=` padding removed."""
    return base64.b32encode(data).decode("ascii").rstrip("=").lower()


def artifact_id_for_digest(sha256_digest: bytes) -> ArtifactId:
    """The artifact id of content whose SHA-256 digest is `sha256_digest` (32 raw bytes).

    Raises:
        InvalidId: the digest is not 32 bytes long.
    """
    if len(sha256_digest) != 32:
        raise InvalidId("a SHA-256 digest is 32 bytes")
    return ArtifactId("art_" + base32url(sha256_digest))


def artifact_id_for_bytes(content: bytes) -> ArtifactId:
    """The artifact id of `content` (small inputs only; the store streams)."""
    return artifact_id_for_digest(hashlib.sha256(content).digest())


def experiment_identity(
    project_id: ProjectId,
    artifact_id: ArtifactId,
    query_fingerprint: QueryFingerprint,
    source_version: str,
) -> bytes:
    """The canonical identity JSON that an experiment id is the digest of.

    Written out directly (keys already in sorted order, each string JSON-encoded) because every
    card read at start recomputes it; `canonical_json` of the same object gives the same bytes.
    """
    encode = _JSON_STRING
    return (
        f'{{"artifact_id":{encode(artifact_id)},"project_id":{encode(project_id)},'
        f'"query_fingerprint":{encode(query_fingerprint)},'
        f'"schema_version":{IDENTITY_SCHEMA_VERSION},"source_version":{encode(source_version)}}}'
    ).encode()


def experiment_id(
    project_id: ProjectId,
    artifact_id: ArtifactId,
    query_fingerprint: QueryFingerprint,
    source_version: str,
) -> ExperimentId:
    """The experiment id: descriptive fields (title, summary, tags) never affect it."""
    identity = experiment_identity(project_id, artifact_id, query_fingerprint, source_version)
    return ExperimentId("exp_" + base32url(hashlib.sha256(identity).digest()))


def project_key(project_id: ProjectId) -> ProjectKey:
    """The one-way, path-safe directory name of a project."""
    digest = hashlib.sha256(_PROJECT_KEY_DOMAIN + project_id.encode("utf-8")).digest()
    return ProjectKey("prj_" + base32url(digest))


def honcho_session_id(session_id: str) -> str:
    """The Honcho session that mirrors a harness session."""
    return "dsh_" + base32url(hashlib.sha256(session_id.encode("utf-8")).digest())


def _parse(pattern: re.Pattern[str], value: object, kind: str) -> str:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise InvalidId(f"not a valid {kind}")
    return value


def parse_artifact_id(value: object) -> ArtifactId:
    """Validate an artifact id (`art_` + 52 base32url characters).

    Raises:
        InvalidId: `value` is not an artifact id.
    """
    return ArtifactId(_parse(ARTIFACT_ID, value, "artifact id"))


def parse_experiment_id(value: object) -> ExperimentId:
    """Validate an experiment id (`exp_` + 52 base32url characters).

    Raises:
        InvalidId: `value` is not an experiment id.
    """
    return ExperimentId(_parse(EXPERIMENT_ID, value, "experiment id"))


def parse_project_id(value: object) -> ProjectId:
    """Validate a project id (`[A-Za-z0-9_-]{1,512}`, Honcho's id alphabet).

    Raises:
        InvalidId: `value` is not a project id.
    """
    return ProjectId(_parse(PROJECT_ID, value, "project id"))


def parse_session_id(value: object) -> SessionId:
    """Validate a harness session id (the kernel runtime's rule; never '.' or '..').

    Raises:
        InvalidId: `value` is not a session id.
    """
    return SessionId(_parse(SESSION_ID, value, "session id"))


def parse_query_fingerprint(value: object) -> QueryFingerprint:
    """Validate a query fingerprint: 64 lowercase hexadecimal characters.

    Raises:
        InvalidId: `value` is not a lowercase SHA-256 hex digest.
    """
    return QueryFingerprint(_parse(SHA256_HEX, value, "query fingerprint (64 lowercase hex)"))


def is_honcho_id(value: str) -> bool:
    """Whether `value` is a valid Honcho workspace, peer or session id."""
    return HONCHO_ID.fullmatch(value) is not None


def is_sha256_hex(value: str) -> bool:
    """Whether `value` is a lowercase SHA-256 hex digest."""
    return SHA256_HEX.fullmatch(value) is not None
