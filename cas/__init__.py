"""The store: safe ingest, content-addressed objects, cards, integrity, search and fsck.

Rooms (each a private module; this file is the public API):

- `_objects`: the object files of a project (lstat/open/hash/walk/publish/quarantine);
- `_cardfiles`: the card files (read/find/scan/count/write);
- `_store`: `Store`, the one store (record, resolve, locate, cards, usage, fsck) over either
  backend's rooms; `_backend`: `Backend`, the storage seam (six operations on keys);
- `_local_store`: `ProjectStore`, the store in a local directory (`_local_backend` its keys),
  with `_ingest` (a kernel's export, opened safely), `_hashing` (the digests), `_verify`
  (proofs and their cache) and `_project` (a project's directory and lock); `_bucket/`:
  `BucketStore`, the store on an S3-compatible bucket with a verified local cache (its client
  loads only there);
- `_catalog`: exact-id and BM25 search over cards, a tantivy index per project kept under the
  state root (`_catalog_local`), `_catalog_engine` the tantivy edge, `_catalog_files` its files
  under the state root; `_fsck`: the
  operator's check and repair;
- `_fs`: the filesystem edge (descriptor-relative opens, staged files, atomic writes);
- `slicing/`: bounded, verified reads of recorded tables (its own public API).

Names load lazily (PEP 562), so a kernel importing `cas.slicing` never loads the write path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cards.lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from cas._bucket import BucketSettings, BucketStore
    from cas._catalog import Catalog, SearchHit
    from cas._catalog_local import CatalogCheck, LocalCatalog
    from cas._fs import atomic_write, make_dirs, make_root, open_dir, read_small, write_new
    from cas._fsck import FsckReport, fsck
    from cas._local_store import ProjectStore
    from cas._migrate import migrate
    from cas._results import Located, Provenance, Recorded, Resolved
    from cas._store import Store, utc_now
    from cas._verify import IntegrityMode, VerificationCache

_EXPORTS = {
    "Catalog": "cas._catalog",
    "SearchHit": "cas._catalog",
    "CatalogCheck": "cas._catalog_local",
    "LocalCatalog": "cas._catalog_local",
    "atomic_write": "cas._fs",
    "make_dirs": "cas._fs",
    "make_root": "cas._fs",
    "open_dir": "cas._fs",
    "read_small": "cas._fs",
    "write_new": "cas._fs",
    "BucketSettings": "cas._bucket",
    "BucketStore": "cas._bucket",
    "migrate": "cas._migrate",
    "FsckReport": "cas._fsck",
    "Store": "cas._store",
    "fsck": "cas._fsck",
    "Located": "cas._results",
    "Provenance": "cas._results",
    "Recorded": "cas._results",
    "Resolved": "cas._results",
    "ProjectStore": "cas._local_store",
    "utc_now": "cas._store",
    "IntegrityMode": "cas._verify",
    "VerificationCache": "cas._verify",
}

__all__ = [
    "BucketSettings",
    "BucketStore",
    "Catalog",
    "CatalogCheck",
    "FsckReport",
    "IntegrityMode",
    "LocalCatalog",
    "Located",
    "ProjectStore",
    "Provenance",
    "Recorded",
    "Resolved",
    "SearchHit",
    "Store",
    "VerificationCache",
    "atomic_write",
    "fsck",
    "make_dirs",
    "make_root",
    "migrate",
    "open_dir",
    "read_small",
    "utc_now",
    "write_new",
]

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
