"""Shared fixtures: real temporary workspaces, a store, and export helpers."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from cards import CardMetadata, parse_metadata
from cas import ProjectStore, Provenance, VerificationCache

settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile("ci", parent=settings.get_profile("default"), max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else "default")

SESSION = "s1"
PROJECT = "trial-analysis"


def fingerprint(text: str = "q") -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_metadata(**overrides: object) -> CardMetadata:
    return parse_metadata(metadata_fields(**overrides))


def metadata_fields(**overrides: object) -> dict[str, object]:
    """What a caller gives to record a result (the fields of `make_metadata`)."""
    fields: dict[str, object] = {
        "title": "Treatment response by cohort",
        "summary": "Aggregate response table for the preregistered cohort comparison.",
        "query_fingerprint": fingerprint(),
        "source": "trial-warehouse",
        "source_version": "snapshot-2026-11-01",
        "tags": ["cohort", "response"],
        "columns": ["cohort", "response"],
    }
    fields.update(overrides)
    return fields


@dataclass
class Workspace:
    root: Path
    artifact_root: Path
    rlm_root: Path

    def exports(self, session: str = SESSION) -> Path:
        path = self.rlm_root / "sessions" / session / "exports"
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def export(self, name: str, data: bytes, session: str = SESSION) -> Path:
        path = self.exports(session) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def store(self, project: str = PROJECT, **kwargs: object) -> ProjectStore:
        kwargs.setdefault("cache", VerificationCache())
        return ProjectStore(str(self.artifact_root), project, **kwargs)  # type: ignore[arg-type]

    def record(self, store: ProjectStore, name: str, session: str = SESSION, **meta: object):
        return store.record(
            str(self.rlm_root), Provenance(session_id=session), make_metadata(**meta), name
        )

    def record_data(
        self, store: ProjectStore, data: bytes, media_type: str, *, measured: bool = False
    ):
        """Record `data` as `media_type` under a name of its digest.

        `measured`: the card's columns are read from the table, as a record without
        `--column` reads them (warnings included); else it names one, and nothing is read.
        """
        name = "t-" + hashlib.sha256(data).hexdigest()[:16]
        self.export(name, data)
        fields = metadata_fields(media_type=media_type)
        if measured:
            del fields["columns"]
        else:
            fields["columns"] = ["k"]
        return store.record(
            str(self.rlm_root), Provenance(session_id=SESSION), parse_metadata(fields), name
        )

    def project_dir(self, store: ProjectStore) -> Path:
        return self.artifact_root.joinpath(*store.layout.root)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    artifact_root = tmp_path / "artifacts"
    rlm_root = tmp_path / "rlm"
    rlm_root.mkdir()
    return Workspace(root=tmp_path, artifact_root=artifact_root, rlm_root=rlm_root)
