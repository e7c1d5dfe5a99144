"""The filesystem edge every package may use: safe opens, atomic writes, chunk manifests.

Descriptor-relative opens, staged and atomic writes, and the chunk manifest that binds an
object's bytes. Below `cas` (the store) and `cas.slicing` (its reads), beside `cards`: it
imports only `cards`. Rooms:

- `_fs`: opens one component at a time with `O_NOFOLLOW` under held directory descriptors,
  named staged files, atomic writes;
- `_reads`: reads that finish (whole positional reads, a small file whole, a kernel copy);
- `_output`: files for people outside the store (`--out`, `export`): unnamed stages, a new file
  written beside a path, never over one unless asked;
- `_outside`: refusing an operator's output destination inside the store's roots;
- `_chunks`: the chunk manifest (xxh3-128 per 4 MiB chunk);
- `_clock`: the one clock (`utc_now`).
"""

from __future__ import annotations

from fsedge._chunks import CHUNK_BYTES, ChunkManifest, chunk_count, parse_manifest
from fsedge._clock import utc_now
from fsedge._fs import (
    DIR_MODE,
    FILE_MODE,
    OBJECT_MODE,
    SHARED_FILE_MODE,
    STAGE_PREFIX,
    STAGE_SUFFIX,
    Staged,
    WriteBehind,
    atomic_write,
    fsync_dir,
    is_stale_stage,
    list_dir_beneath,
    make_dirs,
    make_root,
    open_dir,
    open_dir_beneath,
    open_file_beneath,
    staged,
    write_all,
)
from fsedge._output import staged_beside, write_new
from fsedge._reads import copy_range, pread_full, pread_into, read_small

__all__ = [
    "CHUNK_BYTES",
    "DIR_MODE",
    "FILE_MODE",
    "OBJECT_MODE",
    "SHARED_FILE_MODE",
    "STAGE_PREFIX",
    "STAGE_SUFFIX",
    "ChunkManifest",
    "Staged",
    "WriteBehind",
    "atomic_write",
    "chunk_count",
    "copy_range",
    "fsync_dir",
    "is_stale_stage",
    "list_dir_beneath",
    "make_dirs",
    "make_root",
    "open_dir",
    "open_dir_beneath",
    "open_file_beneath",
    "parse_manifest",
    "pread_full",
    "pread_into",
    "read_small",
    "staged",
    "staged_beside",
    "utc_now",
    "write_all",
    "write_new",
]
