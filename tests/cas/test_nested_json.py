"""The store's small JSON files are untrusted: nesting without end is refused, not a crash."""

from __future__ import annotations

import os

import pytest

from cards import artifact_id_for_digest, project_key
from cards.errors import IntegrityError
from cas._verify import _recorded, file_identity
from fsedge import parse_manifest

DEEP = b'{"size": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"


def test_a_deeply_nested_chunk_manifest_is_malformed():
    with pytest.raises(IntegrityError, match="malformed"):
        parse_manifest(DEEP)


def test_a_deeply_nested_verification_record_proves_nothing():
    identity = file_identity(project_key("p"), artifact_id_for_digest(bytes(32)), os.stat("."))
    assert _recorded(DEEP, identity, "00" * 32) is None
