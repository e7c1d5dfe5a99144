"""DESIGN.md §2: imports go one way, only the adapter imports honcho, the core does no I/O."""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGES = ("cards", "cas", "indexer", "harness_plugin", "rlm_client")
ALLOWED = {
    "cards": set(),
    "cas": {"cards"},
    "indexer": {"cards", "cas"},
    "harness_plugin": {"cards", "cas", "indexer"},
    "rlm_client": {"cards", "cas"},
}
# The kernel side may use only the slicing part of the store: never writes, outbox or Honcho.
RLM_CLIENT_CAS_MODULES = {"cas._slice", "cas._expr", "cas._chunks"}
IO_MODULES = {
    "os", "io", "pathlib", "shutil", "socket", "subprocess", "tempfile", "time", "random",
    "secrets", "httpx", "portalocker", "fcntl", "honcho",
}  # fmt: skip


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_follow_the_design(package):
    for path in _modules(package):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in PACKAGES and top != package:
                assert top in ALLOWED[package], f"{path.relative_to(ROOT)} imports {name}"


def test_only_the_adapter_imports_honcho():
    for package in PACKAGES:
        for path in _modules(package):
            if any(n.split(".")[0] == "honcho" for n in _imports(path)):
                assert path.relative_to(ROOT).as_posix() == "indexer/honcho_adapter.py"


def test_rlm_client_uses_only_the_slicing_part_of_the_store():
    for path in _modules("rlm_client"):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "cas":
                module = ".".join(name.split(".")[:2])
                assert module in RLM_CLIENT_CAS_MODULES, f"{path.name} imports {name}"
            assert top not in {"indexer", "harness_plugin", "honcho", "httpx", "portalocker"}


def test_the_pure_core_does_no_io():
    for path in _modules("cards"):
        for name in _imports(path):
            assert name.split(".")[0] not in IO_MODULES, f"{path.name} imports {name}"


@pytest.mark.parametrize("package", PACKAGES)
def test_dunder_all_lists_exactly_the_public_names(package):
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", [])
    for name in exported:
        getattr(module, name)  # every listed name resolves (lazily, for cas)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in ("annotations", "importlib", "TYPE_CHECKING")
    }
    assert sorted(exported) == sorted(public)
    assert len(set(exported)) == len(exported)
