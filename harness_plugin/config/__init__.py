"""Configuration: one strict TOML file, validated completely at start.

Unknown keys fail. Roots are absolute, must not be `/`, the home directory or a repository root,
and must not overlap one another. Limits may only be lowered.

The sections are in `_sections` (the memory's in `_memory`). They are msgspec structs, not pydantic
models: every command reads this file first, and msgspec validates it in C after a few milliseconds
of import, where pydantic's import and model construction cost a tenth of a second at every start.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Annotated

import msgspec
from msgspec import Meta

from cards import ConfigError, Limits, ProjectId, UnknownProject, excerpt
from cards.structs import Fault, find_problem
from cas import IntegrityMode
from harness_plugin.config._memory import (
    CaptureConfig,
    CaptureMode,
    RecallConfig,
    RecallMode,
    Section,
)
from harness_plugin.config._retention import RetentionConfig
from harness_plugin.config._sections import (
    _CREDENTIAL_WORDS,
    HonchoConfig,
    IngestConfig,
    LimitsConfig,
    ProjectConfig,
    SliceConfig,
    StorageConfig,
    ToolsConfig,
    _absolute,
)

__all__ = [
    "CONFIG_ENV",
    "CaptureConfig",
    "Config",
    "HonchoConfig",
    "IngestConfig",
    "LimitsConfig",
    "ProjectConfig",
    "RecallConfig",
    "SliceConfig",
    "StorageConfig",
    "ToolsConfig",
    "config_from_mapping",
    "load_config",
    "parse_config",
]

CONFIG_ENV = "ARTMEM_CONFIG"
MAX_CONFIG_BYTES = 1 << 20


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
    retention: RetentionConfig = RetentionConfig()

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

    def project_for(
        self, cwd: str, explicit: str | None = None, *, naming: str = "pass --project ID"
    ) -> ProjectId:
        """The project of a caller: `explicit` if given, else the longest root holding `cwd`.

        `naming` says how this caller names a project, for the error of a `cwd` in none.

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
                f"run from a project directory or {naming}"
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
        raise ConfigError(f"invalid configuration: {_describe(document)}") from exc
    except RecursionError:
        raise ConfigError("invalid configuration: it nests too deeply") from None


def _describe(document: Mapping[str, object]) -> str:
    """The first problem of `document`, which msgspec refused, as "a.0.b: what"."""
    path, fault, detail = find_problem(document, Config)
    message = {
        Fault.UNKNOWN: "not a known key",
        Fault.MISSING: "is required",
        Fault.TYPE: f"must be {detail}",
        Fault.PATTERN: f"must match the pattern {detail}",
        Fault.CHOICE: "is not one of the allowed values",
    }.get(fault, detail)
    return f"{'.'.join(path)}: {message}" if path else message


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
