"""The import rules of ARCHITECTURE.md: imports go one way, only the adapter imports honcho, the
core does no I/O, the host package is in rooms, and no module imports itself back.

Each package's `__init__` (and a public subpackage's, `cas.slicing`) is its API: no other
package imports a `_private` module, and every exported name is used by another package.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from cards.errors import ErrorCode

ROOT = Path(__file__).parent.parent
PACKAGES = ("cards", "fsedge", "cas", "indexer", "harness_plugin", "rlm_client")
ALLOWED = {
    "cards": set(),
    "fsedge": {"cards"},
    "cas": {"cards", "fsedge"},
    "indexer": {"cards", "fsedge", "cas"},
    "harness_plugin": {"cards", "fsedge", "cas", "indexer"},
    "rlm_client": {"cards", "cas"},
}
# The kernel side may use only the slicing part of the store: never writes, outbox or Honcho.
RLM_CLIENT_CAS_MODULES = {"cas.slicing"}
# Modules that must never load in a kernel (checked through sys.modules, not only imports).
KERNEL_FORBIDDEN = re.compile(
    r"(cas\._(store|local_store|backend|local_backend|bucket|objects|cardfiles|ingest|project"
    r"|hashing|verify|fsck|catalog|lifecycle|gc)"
    r"|indexer|harness_plugin|honcho|httpx|boto3|botocore|s3transfer|tantivy)(\..*)?"
)
API_PACKAGES = (*PACKAGES, "cas.slicing")
# APIs whose users are other packages (harness_plugin's and rlm_client's are people and kernels).
LIBRARY_APIS = ("cards", "fsedge", "cas", "cas.slicing", "indexer")
# Code-shaped strings that are not codes: a status file name and the worker's log events.
NOT_CODES = {
    "worker.json", "worker.started", "worker.eof", "worker.sigterm", "worker.sigterm_ignored",
    "worker.stopped", "worker.table_helper_failed",
}  # fmt: skip
ERROR_CODE_PREFIXES = ("config", "input", "worker", "slice", "card", "cas", "indexer", "client")
# The rooms of the host package, lowest first, and the rooms each may import: configuration
# (data), the shared host pieces (`harness_plugin._*`: stores, runtime, views, status, lineage,
# short ids, the catalogs), the conversational memory, the worker, the evaluation, the catalog
# page, the notebook API and the CLI. `api` is the package's own `__init__` (lazy names).
HOST_ROOMS: dict[str, set[str]] = {
    "config": set(),
    "host": {"config"},
    "memory": {"config", "host"},
    "worker": {"config", "host", "memory"},
    "eval": {"config", "host", "memory", "worker"},
    "ui": {"config", "host"},
    "notebook": {"config", "host", "ui"},
    "cli": {"config", "host", "memory", "worker", "eval", "ui"},
    "api": {"host", "worker"},
}
IO_MODULES = {
    "os", "io", "pathlib", "shutil", "socket", "subprocess", "tempfile", "time", "random",
    "secrets", "httpx", "fcntl", "honcho",
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


def test_only_the_catalog_engine_imports_tantivy():
    for package in PACKAGES:
        for path in _modules(package):
            if any(n.split(".")[0] == "tantivy" for n in _imports(path)):
                assert path.relative_to(ROOT).as_posix() == "cas/_catalog_engine.py"


def test_rlm_client_uses_only_the_slicing_part_of_the_store():
    for path in _modules("rlm_client"):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "cas":
                module = ".".join(name.split(".")[:2])
                assert module in RLM_CLIENT_CAS_MODULES, f"{path.name} imports {name}"
            assert top not in {"indexer", "harness_plugin", "honcho", "httpx"}


def _probed(probe: str) -> Any:
    """What `probe` prints as JSON, run in a fresh interpreter at the repository root."""
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_importing_rlm_client_loads_no_store_write_module():
    """Through `sys.modules` in a fresh interpreter: indirect imports count too."""
    probe = (
        "import json, sys, rlm_client\n"
        "rlm_client.read_slice, rlm_client.record, rlm_client.export_table\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = _probed(probe)
    assert "cas.slicing._slice" in loaded  # the probe did load the slicing path
    forbidden = [name for name in loaded if KERNEL_FORBIDDEN.fullmatch(name)]
    assert forbidden == []


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


@pytest.mark.parametrize("package", (*PACKAGES, "benchmarks"))
def test_no_package_imports_another_packages_private_module(package):
    for path in _modules(package):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in PACKAGES and top != package:
                    assert not _private(module), f"{path.relative_to(ROOT)} imports {module}"


def _unit(path: Path) -> str:
    """The unit `path` belongs to: its package, or `cas.slicing` for the slicing subpackage."""
    parts = path.relative_to(ROOT).parts
    return "cas.slicing" if parts[:2] == ("cas", "slicing") else parts[0]


def _names_used_from(api: str) -> set[str]:
    """Names other packages (and the benchmarks) take from `api` or its public submodules.

    `cas.slicing` counts as another package for `cas`'s store modules, and the reverse.
    """
    used: set[str] = set()
    for package in (*PACKAGES, "benchmarks"):
        for path in _modules(package):
            if _unit(path) == api or (api == "cas" and _unit(path) == "cas.slicing"):
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            aliases = {api} | {
                alias.asname
                for node in ast.walk(tree)
                if isinstance(node, ast.Import)
                for alias in node.names
                if alias.name == api and alias.asname
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == api and node.level == 0:
                    used.update(alias.name for alias in node.names)
                elif isinstance(node, ast.Attribute) and ast.unparse(node.value) in aliases:
                    used.add(node.attr)
    return used


def _unit_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    return "cas.slicing" if parts[:2] == ["cas", "slicing"] else parts[0]


def _unit_graph() -> dict[str, set[str]]:
    """Which unit imports which (a package, with `cas.slicing` a unit of its own)."""
    graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in _modules(package):
            source = _unit(path)
            graph.setdefault(source, set())
            for name in _imports(path):
                target = _unit_of(name)
                if target is not None and target != source:
                    graph[source].add(target)
                    graph.setdefault(target, set())
    return graph


def test_the_store_and_slicing_cross_only_through_public_apis():
    """No `cas` module imports a private slicing module, and slicing imports nothing of `cas`."""
    for path in _modules("cas"):
        inside = _unit(path)
        for name in _imports(path):
            if inside == "cas" and name.startswith("cas.slicing."):
                assert not _private(name.removeprefix("cas.")), f"{path.name} imports {name}"
            if inside == "cas.slicing" and _unit_of(name) == "cas":
                raise AssertionError(f"slicing's {path.name} imports the store's {name}")


def test_the_packages_import_each_other_without_a_cycle():
    assert _cycles(_unit_graph()) == []


@pytest.mark.parametrize("api", LIBRARY_APIS)
def test_every_exported_name_is_used_by_another_package(api):
    exported = set(getattr(importlib.import_module(api), "__all__", []))
    unused = exported - _names_used_from(api)
    assert unused == set(), f"{api} exports names no other package uses"


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_every_emitted_error_code_is_an_error_code():
    shape = re.compile(rf"(?:{'|'.join(ERROR_CODE_PREFIXES)})\.[a-z][a-z_]*")
    modules = {
        p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".") for p in ROOT.rglob("*.py")
    }
    known = {str(code) for code in ErrorCode}
    for package in PACKAGES:
        for path in _modules(package):
            for text in _string_constants(path):
                if shape.fullmatch(text) and text not in modules and text not in NOT_CODES:
                    assert text in known, f"{path.relative_to(ROOT)} emits {text!r}"


def test_the_pure_core_does_no_io():
    for path in _modules("cards"):
        for name in _imports(path):
            assert name.split(".")[0] not in IO_MODULES, f"{path.name} imports {name}"


@pytest.mark.parametrize("package", API_PACKAGES)
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


SEAM = ("stat", "read", "list", "create", "replace", "delete")


def test_the_storage_seam_is_six_operations_both_backends_implement():
    import inspect

    from cas._backend import Backend
    from cas._bucket._backend import BucketBackend
    from cas._local_backend import LocalBackend

    declared = {name for name in vars(Backend) if not name.startswith("_")}
    assert declared == set(SEAM)
    for implementation in (LocalBackend, BucketBackend):
        for name in SEAM:
            want = inspect.signature(getattr(Backend, name))
            assert inspect.signature(getattr(implementation, name)) == want, (implementation, name)


def test_the_seam_and_the_local_store_never_import_the_bucket():
    seam = _imports(ROOT / "cas" / "_backend.py")
    assert not {name for name in seam if name.startswith(("cas._local", "cas._bucket"))}
    assert not {name.split(".")[0] for name in seam} & IO_MODULES
    for path in _modules("cas"):
        if "_bucket" in path.parts or path.name == "__init__.py":
            continue  # `cas/__init__` names the bucket store lazily, for the host
        bucket = {name for name in _imports(path) if name.startswith("cas._bucket")}
        assert not bucket, f"{path.name} imports {bucket}"


# The one store's modules: every path (record, resolve, cards, usage, fsck, edit, rm, retirement)
# reaches storage through `Room.keys` (the seam) and the backend's `Objects`, never by itself.
GENERIC_STORE = (
    "_store", "_room", "_backend", "_cardfiles", "_layout", "_results", "_fsck", "_lifecycle",
    "_retirement",
)  # fmt: skip
BACKEND_MODULES = re.compile(
    r"(os|fcntl|shutil|boto3|botocore|fsedge\._\w+|"
    r"cas\._(local_backend|local_store|local_cards|project|objects|usage|bucket))(\..*)?"
)


@pytest.mark.parametrize("module", GENERIC_STORE)
def test_the_one_store_reaches_storage_only_through_its_backend(module):
    imported = _imports(ROOT / "cas" / f"{module}.py")
    direct = {name for name in imported if BACKEND_MODULES.fullmatch(name)}
    fsedge = {name for name in imported if name.startswith("fsedge.")} - {"fsedge.utc_now"}
    assert not direct | fsedge, f"cas/{module}.py imports {sorted(direct | fsedge)}"


def test_no_store_module_asks_which_backend_it_has():
    """A backend's faster ways are typed extensions (`Summarised`, `CardFiles`), not isinstance."""
    for module in GENERIC_STORE:
        source = (ROOT / "cas" / f"{module}.py").read_text()
        for name in ("ProjectStore", "BucketStore", "LocalBackend", "BucketBackend", "Project)"):
            assert f"isinstance({name}" not in source and f", {name})" not in source, module


def test_only_the_bucket_client_imports_the_s3_sdk():
    for path in _modules("cas"):
        sdk = {name for name in _imports(path) if name.split(".")[0] in ("boto3", "botocore")}
        if path.name != "_client.py":
            assert not sdk, f"{path} imports {sdk}"


# The operator's lifecycle (`artmem edit`, `rm`, `gc`): what changes or deletes, and the modules
# that hold it. Only the operator's CLI may reach it; never a tool, the worker or a kernel.
LIFECYCLE_NAMES = {
    "edit_card", "remove_experiments", "collect_garbage", "collect_bucket_garbage", "retire",
    "card_revision", "CardEdit",
}  # fmt: skip
LIFECYCLE_MODULES = re.compile(
    r"cas\._lifecycle|cas\._gc|cas\._bucket\._gc|indexer\._retire|harness_plugin\.cli\._lifecycle_commands"
)
# The commands themselves, and the CLI's dispatch that runs them (the worker room cannot import
# the CLI room: `test_the_host_package_is_in_rooms`).
OPERATOR_ONLY = {
    ROOT / "harness_plugin" / "cli" / "_lifecycle_commands.py",
    ROOT / "harness_plugin" / "cli" / "__init__.py",
}


def _names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    found |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found |= {alias.name for alias in node.names}
    return found


@pytest.mark.parametrize("package", ("harness_plugin", "rlm_client"))
def test_only_the_operators_cli_names_the_lifecycle(package):
    for path in _modules(package):
        if path in OPERATOR_ONLY:
            continue
        named = _names(path) & LIFECYCLE_NAMES
        assert not named, f"{path.relative_to(ROOT)} reaches the operator lifecycle: {named}"
        imported = {name for name in _imports(path) if LIFECYCLE_MODULES.match(name)}
        assert not imported, f"{path.relative_to(ROOT)} imports {imported}"
        strings = _string_constants(path)
        assert not any("_lifecycle_commands" in text for text in strings), path


def test_no_tool_or_worker_loads_the_lifecycle():
    """Through `sys.modules` in a fresh interpreter: the worker, every tool, and their schemas."""
    probe = (
        "import json, sys\n"
        "from harness_plugin.worker import _serve, _tools\n"
        "names = set(_tools.registry(True, conversation=True))\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'tools': sorted(names)}))"
    )
    loaded = _probed(probe)
    assert [m for m in loaded["modules"] if LIFECYCLE_MODULES.fullmatch(m)] == []
    words = ("edit", "rm", "remove", "delete", "gc", "garbage", "retire", "purge", "prune")
    for tool in loaded["tools"]:
        assert not any(word in tool.split("_") for word in words), tool


def test_the_worker_has_no_lifecycle_operation():
    from harness_plugin.worker import _serve

    text = Path(_serve.__file__).read_text()
    for op in ('"edit"', '"rm"', '"gc"', '"remove"', '"delete"'):
        assert op not in text


# -- the module graph: rooms and cycles ---------------------------------------------------


def _module_names() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for package in PACKAGES:
        for path in _modules(package):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def _graph(*, with_type_checking: bool) -> dict[str, set[str]]:
    """Module → the project's modules it imports (at module level or in a function).

    `from package import submodule` is an edge to the submodule, not to the package. Without
    `with_type_checking`, imports under `if TYPE_CHECKING:` are left out: they never run, so
    they neither order imports nor load anything.
    """
    names = _module_names()

    def known(name: str) -> str:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, path in names.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skipped: set[int] = set()
        if not with_type_checking:
            for node in ast.walk(tree):
                if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                    skipped.update(id(inner) for part in node.body for inner in ast.walk(part))
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    targets.add(child if child in names else known(node.module))
        graph[module] = targets - {"", module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_outside_the_store():
    cycles = _cycles(_graph(with_type_checking=False))
    assert [c for c in cycles if not all(m.split(".")[0] == "cas" for m in c)] == []


def test_no_import_cycle_in_the_store():
    assert _cycles(_graph(with_type_checking=False)) == []


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "api"
    return parts[1] if parts[1] in HOST_ROOMS else "host"


def test_the_host_package_is_in_rooms():
    """Each room imports only the rooms below it, type-only imports included."""
    for path in (ROOT / "harness_plugin").iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            assert path.name in HOST_ROOMS, f"harness_plugin/{path.name} is in no room"
        elif path.suffix == ".py" and not path.name.startswith("_"):
            assert path.stem in HOST_ROOMS, f"harness_plugin/{path.name} is in no room"
    for module, targets in _graph(with_type_checking=True).items():
        if module.split(".")[0] != "harness_plugin":
            continue
        room = _room(module)
        for target in targets:
            if target.split(".")[0] == "harness_plugin" and _room(target) != room:
                assert _room(target) in HOST_ROOMS[room], f"{module} ({room}) imports {target}"
