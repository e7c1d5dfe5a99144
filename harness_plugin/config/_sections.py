"""The sections of the configuration file, each a strict msgspec struct, and their own checks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from cards import DEFAULT_LIMITS, ConfigError, Limits, is_honcho_id
from cards.structs import HONCHO_ID, whole
from cas.slicing import DEFAULT_SLICE_LIMITS, ExportLimits, SliceLimits
from harness_plugin.config._memory import Section


def _absolute(name: str, value: str) -> None:
    if not os.path.isabs(value):
        raise ValueError(f"{name} must be an absolute path")
    if os.path.normpath(value) != value or "\x00" in value:
        raise ValueError(
            f"{name} must be a normalised path "
            "(no trailing '/', no '.', '..' or repeated separators)"
        )


class ProjectConfig(Section, frozen=True):
    """A configured project: the working directories below `root` belong to `id`."""

    id: str
    root: str

    def __post_init__(self) -> None:
        if not is_honcho_id(self.id):  # a project id is used as a Honcho id
            raise ValueError("id must be a project id: 1-512 of A-Z, a-z, 0-9, '_' and '-'")
        _absolute("root", self.root)


class LimitsConfig(Section, frozen=True):
    """Operator bounds: Honcho spec §28.5's defaults, which may be lowered (bytes also raised)."""

    artifact_bytes: int | None = None
    project_bytes: int | None = None
    cards_per_project: int | None = None
    title_chars: int | None = None
    summary_chars: int | None = None
    tags: int | None = None
    tag_chars: int | None = None
    columns: int | None = None
    column_chars: int | None = None
    search_results: int | None = None

    def resolve(self) -> Limits:
        """The effective limits.

        Raises:
            ConfigError: a value is not a positive integer at most its default.
        """
        return DEFAULT_LIMITS.lowered(**_given(self))


def _given(section: Section) -> dict[str, int]:
    """The bounds a table of integer bounds sets (those left out are None)."""
    return {k: v for k, v in msgspec.structs.asdict(section).items() if isinstance(v, int)}


def _check_base_url(name: str, value: str) -> None:
    if not value.isprintable() or any(c.isspace() for c in value):
        raise ValueError(f"{name} must not hold spaces or control characters")
    from urllib.parse import urlsplit  # with ipaddress, ~2 ms: only a configured URL pays

    url = urlsplit(value)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"{name} must be an absolute http(s) URL")
    if url.username or url.password or url.query or url.fragment:
        raise ValueError(f"{name} must not hold credentials, a query or a fragment")


def _without_slash(section: Section, name: str) -> None:
    """Store the URL `name` of a frozen table without a trailing '/' (as validation's result)."""
    value = getattr(section, name)
    if value is not None and value.endswith("/"):
        msgspec.structs.force_setattr(section, name, value.rstrip("/"))


HonchoId = Annotated[str, Meta(pattern=HONCHO_ID)]
DEFAULT_HONCHO_URL = "http://127.0.0.1:8000"


class HonchoConfig(Section, frozen=True):
    """Remote indexing through Honcho; off unless enabled.

    The API key lives only in the environment variable `api_key_env` names: never in this file,
    in status or in logs.
    """

    enabled: bool = False
    base_url: str = DEFAULT_HONCHO_URL
    workspace_id: HonchoId = "artmem"
    user_peer_id: HonchoId = "user"
    assistant_peer_id: HonchoId = "artmem-assistant"
    api_key_env: Annotated[str, Meta(pattern=whole(r"[A-Z_][A-Z0-9_]{0,127}"))] = "HONCHO_API_KEY"
    timeout_s: Annotated[float, Meta(gt=0, le=120)] = 5.0
    create_workspace: bool = False
    max_sessions_in_flight: Annotated[int, Meta(ge=1, le=64)] = 4
    retry_base_s: Annotated[float, Meta(gt=0, le=3600)] = 1.0
    retry_max_s: Annotated[float, Meta(gt=0, le=86400)] = 300.0
    max_attempts: Annotated[int, Meta(ge=1, le=10_000)] = 50
    drain_timeout_s: Annotated[float, Meta(gt=0, le=3600)] = 10.0
    reconcile_batch: Annotated[int, Meta(ge=1, le=100_000)] = 500
    search_timeout_s: Annotated[float, Meta(gt=0, le=60)] = 2.0

    def __post_init__(self) -> None:
        if self.base_url != DEFAULT_HONCHO_URL:  # valid, and checking it costs every start ~2 ms
            _check_base_url("base_url", self.base_url)
            _without_slash(self, "base_url")

    def api_key(self, environ: Mapping[str, str]) -> str:
        """The API key from the named environment variable.

        Raises:
            ConfigError: the variable is unset or empty.
        """
        key = environ.get(self.api_key_env, "")
        if not key:
            raise ConfigError(
                f"honcho is enabled but the environment variable {self.api_key_env} is unset"
            )
        return key


class SliceConfig(Section, frozen=True):
    """Bounds on slices, in two sets that are kept apart.

    `max_*` bound what a slice holds in memory or hands to a model or kernel (the tools,
    kernels' `read_slice`, the notebook API, `artmem slice` on stdout); each may only be
    lowered. `export_max_*` bound an operator's slice streamed into a file (`artmem slice
    --out`), which holds one batch at a time: by default no row bound, 64 GiB of rows'
    materialised bytes and an hour; they may be raised (see `ExportLimits`).
    """

    max_rows: int | None = None
    max_bytes: int | None = None
    max_columns: int | None = None
    max_footer_bytes: int | None = None
    max_read_bytes: int | None = None
    max_filter_chars: int | None = None
    max_memory_bytes: int | None = None
    max_seconds: int | None = None
    export_max_rows: int | None = None
    export_max_bytes: int | None = None
    export_max_seconds: int | None = None

    def resolve(self) -> SliceLimits:
        """The effective slice limits, the export bounds among them.

        Raises:
            ConfigError: a slice bound is not a positive integer at most its default, or an
                export bound is not a positive integer within its maximum.
        """
        bounds = _given(self)
        export = {
            name.removeprefix("export_"): bounds.pop(name)
            for name in list(bounds)
            if name.startswith("export_")
        }
        return DEFAULT_SLICE_LIMITS.lowered(**bounds).with_export(ExportLimits(**export))


class ToolsConfig(Section, frozen=True):
    """Which tools the host surface offers; the artifact tools are off unless enabled."""

    artifact_memory: bool = False


class IngestConfig(Section, frozen=True):
    """How strictly a kernel's export is checked before it is recorded."""

    # A file to record must belong to the owner of its session directory, as a kernel's own
    # exports do; a file renamed into `exports/` by another user is refused. Turn this off only
    # where kernels legitimately write as another user than the one owning session directories.
    require_owner: bool = True


_CREDENTIAL_WORDS = ("key", "secret", "token", "password", "credential")


def _bucket_name(value: str) -> bool:
    return 3 <= len(value) <= 63 and all(c.islower() or c.isdigit() or c in ".-" for c in value)


def _prefix(value: str) -> bool:
    return not (
        value.startswith("/") or value.endswith("/") or "//" in value or not value.isprintable()
    )


def _region(value: str) -> bool:
    return 1 <= len(value) <= 64 and all(c.isalnum() or c == "-" for c in value)


class StorageConfig(Section, frozen=True):
    """Where the projects' stores live: the local `artifact_root` (default), or a bucket.

    With `backend = "s3"`, `bucket` (and optionally `prefix`, `endpoint_url` for MinIO, Ceph,
    R2 or tests, and `region`) name an S3-compatible bucket; each host keeps verified local
    copies under `<state_root>/bucket-cache/`. Credentials come only from the standard AWS
    chain (environment, shared files, instance roles): never from this file. `part_checksums =
    false` is for a service that refuses S3 SHA-256 checksums on uploads.
    """

    backend: Literal["local", "s3"] = "local"
    bucket: str | None = None
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    part_checksums: bool = True

    def __post_init__(self) -> None:
        if self.bucket is not None and not _bucket_name(self.bucket):
            raise ValueError(
                "bucket must be an S3 bucket name: 3-63 lowercase letters, digits, '.' or '-'"
            )
        if not _prefix(self.prefix):
            raise ValueError("prefix must not start or end with '/' or repeat it")
        if self.endpoint_url is not None:
            _check_base_url("endpoint_url", self.endpoint_url)
            _without_slash(self, "endpoint_url")
        if self.region is not None and not _region(self.region):
            raise ValueError("region must be a region name such as us-east-1")
        if self.backend == "s3" and self.bucket is None:
            raise ValueError('backend = "s3" needs a bucket')
