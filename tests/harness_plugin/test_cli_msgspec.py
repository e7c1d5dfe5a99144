"""The CLI imports msgspec without `typing_extensions` (`harness_plugin.cli._import_msgspec`).

msgspec then resolves annotations through Python's own `typing`. That must change nothing: the
JSON Schema of every struct a command encodes or decodes (which resolves every field's type,
and whether it is required) is the same as with typing_extensions loaded, and a card
round-trips to the same bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent

_PROBE = """
import json, sys
if sys.argv[1] == "hidden":
    from harness_plugin.cli import _import_msgspec
    _import_msgspec()
    assert "typing_extensions" not in sys.modules, "typing_extensions was loaded"
import importlib
import msgspec
loaded = "typing_extensions" in sys.modules
names = ("cards.card", "cards.results", "cards.structs", "cards.table_read", "cards.lineage",
         "cas._results", "cas._backend", "harness_plugin.config")
modules = [importlib.import_module(name) for name in names]
structs = sorted(
    {
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, msgspec.Struct)
        and value.__module__ == module.__name__
    },
    key=lambda kind: (kind.__module__, kind.__qualname__),
)
schemas = {}
for kind in structs:
    try:
        schemas[f"{kind.__module__}.{kind.__qualname__}"] = msgspec.json.schema(kind)
    except NameError:  # a field typed only under TYPE_CHECKING: never encoded by its schema
        pass
print(json.dumps({"typing_extensions": loaded, "schemas": schemas}))
"""


def _schemas(mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_msgspec_without_typing_extensions_sees_every_struct_alike():
    hidden, usual = _schemas("hidden"), _schemas("usual")
    assert hidden["typing_extensions"] is False
    assert usual["typing_extensions"] is True  # the comparison is with it really loaded
    assert len(usual["schemas"]) > 25  # the probe found the structs
    assert hidden["schemas"] == usual["schemas"]
