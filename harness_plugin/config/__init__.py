"""Configuration: one strict TOML file, validated completely at start.

Unknown keys fail. Roots are absolute, must not be `/`, the home directory or a repository root,
and must not overlap one another. Limits may only be lowered.

The tables are msgspec structs, not pydantic models: every command reads this file first, and
msgspec validates it in C after a few milliseconds of import, where pydantic's import and model
construction cost a tenth of a second at every start.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from cards import (
    DEFAULT_LIMITS,
    ConfigError,
    Limits,
    ProjectId,
    UnknownProject,
    excerpt,
    is_honcho_id,
)
from cards.structs import HONCHO_ID, error_at, whole
from cas import IntegrityMode
from cas.slicing import DEFAULT_SLICE_LIMITS, ExportLimits, SliceLimits
from harness_plugin.config._memory import (
    CaptureConfig,
    CaptureMode,
    RecallConfig,
    RecallMode,
    Section,
)

CONFIG_ENV = "ARTMEM_CONFIG"
MAX_CONFIG_BYTES = 1 << 20


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


def _refuse_credentials(document: Mapping[str, object]) -> None:
    """A key of `[storage]` that names a credential fails before anything else is read."""
    storage = document.get("storage")
    if not isinstance(storage, Mapping):
        return
    for name in storage:
        if any(word in str(name).lower() for word in _CREDENTIAL_WORDS):
            raise ConfigError(
                "invalid configuration: storage: credentials must not be in the configuration "
                "file: the bucket's come from the standard AWS chain (AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, a shared credentials file, or an instance role)"
            )


class Config(Section, frozen=True):
    """The whole configuration file."""

    artifact_root: str
    rlm_root: str
    state_root: str
    projects: Annotated[tuple[ProjectConfig, ...], Meta(min_length=1, max_length=1000)]
    integrity: IntegrityMode = IntegrityMode.CACHED
    limits: LimitsConfig = LimitsConfig()
    honcho: HonchoConfig = HonchoConfig()
    tools: ToolsConfig = ToolsConfig()
    slice: SliceConfig = SliceConfig()
    ingest: IngestConfig = IngestConfig()
    capture: CaptureConfig = CaptureConfig()
    recall: RecallConfig = RecallConfig()
    storage: StorageConfig = StorageConfig()

    def __post_init__(self) -> None:
        needs_honcho = [
            name
            for name, on in (
                ("capture", self.capture.mode is not CaptureMode.OFF),
                ("recall", self.recall.mode is not RecallMode.OFF),
            )
            if on
        ]
        if needs_honcho and not self.honcho.enabled:
            raise ValueError(
                f"[{needs_honcho[0]}] needs Honcho: set [honcho] enabled = true, or mode = off"
            )
        roots = {"artifact_root": self.artifact_root, "rlm_root": self.rlm_root}
        roots["state_root"] = self.state_root
        for name, root in roots.items():
            _absolute(name, root)
        for name, root in roots.items():
            _check_dangerous(name, root)
        names = list(roots)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                if _overlap(roots[first], roots[second]):
                    raise ValueError(f"{first} and {second} overlap; they must be separate")
        for project in self.projects:
            for name in ("artifact_root", "state_root"):
                if _inside(_real(roots[name]), _real(project.root)):
                    raise ValueError(f"{name} lies inside the root of project {project.id}")
        ids = [p.id for p in self.projects]
        if len(set(ids)) != len(ids):
            raise ValueError("project ids must be unique")
        self.limits.resolve()
        self.slice.resolve()

    @property
    def managed_roots(self) -> tuple[str, str]:
        """The directories artmem manages, which no operator's output may land in."""
        return (self.artifact_root, self.state_root)

    @property
    def effective_limits(self) -> Limits:
        """The limits in force."""
        return self.limits.resolve()

    def project_for(self, cwd: str, explicit: str | None = None) -> ProjectId:
        """The project of a caller: `explicit` if given, else the longest root holding `cwd`.

        Raises:
            UnknownProject: `explicit` is not configured, or no project root holds `cwd`.
        """
        if explicit is not None:
            if any(p.id == explicit for p in self.projects):
                return ProjectId(explicit)
            raise UnknownProject("that project is not configured; see `projects` in the config")
        here = _real(cwd)
        matches = [p for p in self.projects if _inside(here, _real(p.root))]
        if not matches:
            raise UnknownProject(
                "the working directory is inside no configured project root; "
                "run from a project directory or pass --project ID"
            )
        best = max(matches, key=lambda p: len(_parts(_real(p.root))))
        return ProjectId(best.id)


def _real(path: str) -> str:
    return os.path.realpath(path)


def _parts(path: str) -> tuple[str, ...]:
    """The components of an absolute, normalised path (pathlib costs every command ~5 ms)."""
    return tuple(part for part in path.split(os.sep) if part)


def _inside(path: str, root: str) -> bool:
    """Component-wise containment (`/a/b1` is not inside `/a/b`)."""
    parts = _parts(root)
    return _parts(path)[: len(parts)] == parts


def _overlap(first: str, second: str) -> bool:
    a, b = _real(first), _real(second)
    return _inside(a, b) or _inside(b, a)


def _check_dangerous(name: str, root: str) -> None:
    real = _real(root)
    if real == "/":
        raise ValueError(f"{name} must not be the filesystem root")
    home = os.environ.get("HOME")
    if home and real == _real(home):
        raise ValueError(f"{name} must not be the home directory")
    if os.path.exists(os.path.join(real, ".git")):
        raise ValueError(f"{name} must not be a repository root")


def parse_config(text: str) -> Config:
    """Validate configuration text.

    Raises:
        ConfigError: the text is not valid TOML or not a valid configuration.
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the configuration is not valid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError("the configuration is not valid TOML: it nests too deeply") from None
    return config_from_mapping(document)


def config_from_mapping(document: Mapping[str, object]) -> Config:
    """Validate an already-parsed configuration document.

    Raises:
        ConfigError: the document is not a valid configuration.
    """
    _refuse_credentials(document)
    try:
        return msgspec.convert(document, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {_describe(exc)}") from exc
    except RecursionError:
        raise ConfigError("invalid configuration: it nests too deeply") from None


def _describe(exc: msgspec.ValidationError) -> str:
    """The error as "a.0.b: what" (msgspec stops at the first, saying "what - at `$.a[0].b`")."""
    path, message, unknown = error_at(exc)
    if unknown is not None:  # name the key itself, as every other error does
        path.append(unknown)
        message = "not a known key"
    return f"{'.'.join(path)}: {message}" if path else message  # msgspec names no root


def load_config(path: str | None, environ: Mapping[str, str] = os.environ) -> Config:
    """Find and validate the configuration: `path`, else `$ARTMEM_CONFIG`.

    Raises:
        ConfigError: no configuration was named, or it cannot be read or is invalid.
    """
    chosen = path or environ.get(CONFIG_ENV)
    if not chosen:
        raise ConfigError(f"no configuration: pass --config PATH or set {CONFIG_ENV}")
    try:
        with open(chosen, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration file {excerpt(chosen, 1000)}: {exc.strerror}"
        ) from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError("the configuration file is larger than 1 MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("the configuration file is not UTF-8") from exc
    return parse_config(text)
