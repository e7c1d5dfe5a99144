"""What keeps a table-reading process single-threaded, so it may fork its readers itself.

Also what a process asks before it forks (`threads`), and how a descriptor is marked to cross
to the reading helper (`Passed`): cheap to import, unlike the helper itself.

Native libraries start threads at import unless their environment says not to: pyarrow's
jemalloc its background purging thread, numpy's BLAS a pool per CPU. A table reader uses
neither. The CLI sets these (where the environment does not already) before anything imports
pyarrow; the reading helper always runs with them.
"""

from __future__ import annotations

import os
import threading

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
