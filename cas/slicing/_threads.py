"""What keeps a table-reading process single-threaded, so it may fork its readers itself.

Also what a process asks before it forks (`threads`), how a descriptor is marked to cross to
the reading helper (`Passed`), and how the readers load without numpy (`import_readers`):
cheap to import, unlike the helper itself.

Native libraries start threads at import unless their environment says not to: pyarrow's
jemalloc its background purging thread, numpy's BLAS a pool per CPU. A table reader uses
neither. The CLI sets these (where the environment does not already) before anything imports
pyarrow; the reading helper always runs with them.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from types import ModuleType

ONE_THREAD_ENV = {
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class Passed(int):
    """A descriptor that crosses to the helper's child as a descriptor (`SCM_RIGHTS`).

    It is the descriptor's number in this process (an `int`, so a forked child uses it as is);
    pickled for the helper, it is sent beside the pickle and becomes the child's own number.
    """


def threads() -> int:
    """How many threads this process runs (native ones too, where /proc says)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


READERS = ("cas.slicing._slice", "cas.slicing._export", "cas.slicing._footer")


def import_readers() -> None:
    """Import the table readers (pyarrow, its compute, dataset and formats) without numpy.

    pyarrow imports numpy whenever it is installed (about 0.15 s, and BLAS's thread pool with
    it); no reader uses it. numpy is hidden only while they load: a later `import numpy` works
    as usual (pyarrow keeps no numpy interop in this process). A no-op once they are loaded.
    """
    for name in READERS:
        import_reader(name)


def import_reader(name: str) -> ModuleType:
    """The reader module `name`, imported without numpy if pyarrow is not loaded yet."""
    if "pyarrow" in sys.modules or "numpy" in sys.modules:
        return importlib.import_module(name)
    sys.modules["numpy"] = None  # type: ignore[assignment]  # its import now fails
    try:
        return importlib.import_module(name)
    finally:
        del sys.modules["numpy"]
