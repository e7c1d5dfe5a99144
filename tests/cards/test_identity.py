"""Identities reproduce every shared vector; ids and parsers hold their invariants."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cards
import cards._ids
from cards import InvalidId, artifact_id_for_digest, canonical_json, experiment_id, project_key
from cards._ids import artifact_id_for_bytes, base32url, experiment_identity, honcho_session_id

VECTORS = json.loads((Path(__file__).parent.parent / "identity_vectors.json").read_text())


@pytest.mark.parametrize("row", VECTORS["base32url"])
def test_base32url_vectors(row):
    assert base32url(bytes.fromhex(row["bytes_hex"])) == row["text"]


@pytest.mark.parametrize("row", VECTORS["artifact_id"])
def test_artifact_id_vectors(row):
    content = bytes.fromhex(row["content_hex"])
    assert hashlib.sha256(content).hexdigest() == row["sha256"]
    assert artifact_id_for_bytes(content) == row["artifact_id"]
    assert artifact_id_for_digest(bytes.fromhex(row["sha256"])) == row["artifact_id"]


@pytest.mark.parametrize("row", VECTORS["project_key"])
def test_project_key_vectors(row):
    assert project_key(row["project_id"]) == row["project_key"]


@pytest.mark.parametrize("row", VECTORS["honcho_session_id"])
def test_honcho_session_vectors(row):
    assert honcho_session_id(row["dsh_session_id"]) == row["honcho_session_id"]


@pytest.mark.parametrize("row", VECTORS["experiment_id"])
def test_experiment_id_vectors(row):
    args = (row["project_id"], row["artifact_id"], row["query_fingerprint"], row["source_version"])
    assert experiment_identity(*args).decode("utf-8") == row["canonical_identity_json"]
    assert experiment_id(*args) == row["experiment_id"]


def test_every_vector_group_is_covered():
    tested = {"base32url", "artifact_id", "project_key", "honcho_session_id", "experiment_id"}
    assert set(VECTORS) - {"about"} == tested


@given(st.binary(max_size=64))
def test_base32url_is_lowercase_unpadded_and_injective_on_length(data):
    text = base32url(data)
    assert text == text.lower() and "=" not in text
    assert len(text) == -(-len(data) * 8 // 5)


@given(st.binary(max_size=256))
def test_artifact_ids_parse_and_have_their_shard(data):
    artifact = artifact_id_for_bytes(data)
    assert cards.parse_artifact_id(artifact) == artifact
    assert len(artifact) == 56


@given(
    project=st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True),
    version=st.text(min_size=1, max_size=40),
    content=st.binary(max_size=32),
)
def test_experiment_id_is_the_digest_of_key_order_free_identity(project, version, content):
    artifact = artifact_id_for_bytes(content)
    fp = hashlib.sha256(content).hexdigest()
    identity = {
        "source_version": version,
        "schema_version": 1,
        "query_fingerprint": fp,
        "project_id": project,
        "artifact_id": artifact,
    }
    reordered = dict(reversed(list(identity.items())))
    assert canonical_json(identity) == canonical_json(reordered)
    expected = "exp_" + base32url(hashlib.sha256(canonical_json(reordered)).digest())
    assert experiment_id(project, artifact, fp, version) == expected


def test_title_never_changes_identity():
    # experiment_id takes no descriptive field at all: the signature is the proof.
    import inspect

    params = list(inspect.signature(experiment_id).parameters)
    assert params == ["project_id", "artifact_id", "query_fingerprint", "source_version"]


@pytest.mark.parametrize(
    ("parser", "value"),
    [
        (cards.parse_artifact_id, "art_" + "a" * 51),
        (cards.parse_artifact_id, "ART_" + "a" * 52),
        (cards.parse_artifact_id, "art_" + "1" * 52),
        (cards.parse_experiment_id, "exp_../../etc/passwd"),
        (cards.parse_experiment_id, None),
        (cards.parse_project_id, ""),
        (cards.parse_project_id, "a/b"),
        (cards.parse_project_id, "x" * 513),
        (cards.parse_session_id, ".."),
        (cards.parse_session_id, "."),
        (cards.parse_session_id, "-leading"),
        (cards.parse_session_id, "a/b"),
        (cards.parse_session_id, "s" * 201),
        (cards._ids.parse_query_fingerprint, "A" * 64),
        (cards._ids.parse_query_fingerprint, "a" * 63),
    ],
)
def test_parsers_reject_malformed_ids(parser, value):
    with pytest.raises(InvalidId):
        parser(value)


@given(st.text(max_size=80))
def test_session_ids_never_name_a_parent_or_a_path(text):
    try:
        session = cards.parse_session_id(text)
    except InvalidId:
        return
    assert session not in (".", "..") and "/" not in session and "\x00" not in session


def test_digest_must_be_32_bytes():
    with pytest.raises(InvalidId):
        artifact_id_for_digest(b"short")


@given(
    project=st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True),
    version=st.text(max_size=40),
    content=st.binary(max_size=8),
)
def test_identity_bytes_equal_canonical_json(project, version, content):
    artifact = artifact_id_for_bytes(content)
    fp = hashlib.sha256(content).hexdigest()
    expected = canonical_json(
        {
            "artifact_id": artifact,
            "project_id": project,
            "query_fingerprint": fp,
            "schema_version": 1,
            "source_version": version,
        }
    )
    assert experiment_identity(project, artifact, fp, version) == expected
