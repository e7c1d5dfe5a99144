"""Lazy package exports (PEP 562): a name's module loads on first use, not at import."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module `__getattr__` and `__dir__` of `package`, which exports `exports`.

    `exports` maps each public name to the module defining it; a loaded name is cached in the
    package's namespace, so later lookups never reach `__getattr__`.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> object:  # noqa: N807 - the module hook's required name
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(exports)

    return __getattr__, __dir__
