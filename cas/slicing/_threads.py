"""What keeps a table-reading process single-threaded, so it may fork its readers itself.

Native libraries start threads at import unless their environment says not to: pyarrow's
jemalloc its background purging thread, numpy's BLAS a pool per CPU. A table reader uses
neither. The CLI sets these (where the environment does not already) before anything imports
pyarrow; the reading helper always runs with them.
"""

from __future__ import annotations

ONE_THREAD_ENV = {
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
