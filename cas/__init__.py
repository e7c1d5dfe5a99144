"""The store: safe ingest, content-addressed objects, cards, integrity, search and fsck.

Rooms (each a private module; this file is the public API):

- `_objects`: the object files of a project (lstat/open/hash/walk/publish/quarantine);
- `_cardfiles`: the cards of any backend through its keys; `_local_cards` the local faster ones;
- `_store`: `Store`, the one store (record, resolve, locate, cards, usage, fsck) over a backend's
  keys (`_backend`: `Backend`, the storage seam, six operations) and its `Objects`;
- `_local_store`: `LocalObjects` and `ProjectStore`, the store in a local directory
  (`_local_backend` its keys), with `_ingest` (a kernel's export, opened safely), `_hashing`
  (the digests), `_verify` (proofs and their cache) and `_project` (a project's directory and
  lock); `_bucket/`: `BucketObjects` and `BucketStore`, the store on an S3-compatible bucket
  with a verified local cache (its client loads only there);
- `_catalog`: exact-id and BM25 search over cards, a tantivy index per project kept under the
  state root (`_catalog_local`), `_catalog_engine` the tantivy edge, `_catalog_files` its files
  under the state root; `_fsck`: the
  operator's check and repair;
- `_lifecycle`: the operator's edit and removal of cards (`_retirement` reads what was removed),
  `_gc`: garbage collection (a bucket's in `_bucket/_gc`);
- `slicing/`: bounded, verified reads of recorded tables (its own public API).

Names load lazily (PEP 562), so a kernel importing `cas.slicing` never loads the write path.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cas._bucket import BucketSettings, BucketStore
    from cas._bucket._gc import collect_bucket_garbage
    from cas._catalog import Catalog, SearchHit
    from cas._catalog_local import CatalogCheck, LocalCatalog
    from cas._fsck import FsckReport, fsck
    from cas._gc import GcReport, Retention, collect_garbage
    from cas._lifecycle import (
        CardEdit,
        Removed,
        card_revision,
        edit_card,
        remove_experiments,
    )
    from cas._local_store import ProjectStore
    from cas._migrate import migrate
    from cas._results import Located, Provenance, Recorded, Resolved
    from cas._retirement import retired_among
    from cas._store import Store
    from cas._verify import IntegrityMode, VerificationCache

_EXPORTS = {
    "Catalog": "cas._catalog",
    "SearchHit": "cas._catalog",
    "CatalogCheck": "cas._catalog_local",
    "LocalCatalog": "cas._catalog_local",
    "BucketSettings": "cas._bucket",
    "BucketStore": "cas._bucket",
    "migrate": "cas._migrate",
    "collect_bucket_garbage": "cas._bucket._gc",
    "FsckReport": "cas._fsck",
    "Store": "cas._store",
    "fsck": "cas._fsck",
    "GcReport": "cas._gc",
    "Retention": "cas._gc",
    "collect_garbage": "cas._gc",
    "CardEdit": "cas._lifecycle",
    "Removed": "cas._lifecycle",
    "card_revision": "cas._lifecycle",
    "edit_card": "cas._lifecycle",
    "remove_experiments": "cas._lifecycle",
    "retired_among": "cas._retirement",
    "Located": "cas._results",
    "Provenance": "cas._results",
    "Recorded": "cas._results",
    "Resolved": "cas._results",
    "ProjectStore": "cas._local_store",
    "IntegrityMode": "cas._verify",
    "VerificationCache": "cas._verify",
}

__all__ = [
    "BucketSettings",
    "BucketStore",
    "CardEdit",
    "Catalog",
    "CatalogCheck",
    "FsckReport",
    "GcReport",
    "IntegrityMode",
    "LocalCatalog",
    "Located",
    "ProjectStore",
    "Provenance",
    "Recorded",
    "Removed",
    "Resolved",
    "Retention",
    "SearchHit",
    "Store",
    "VerificationCache",
    "card_revision",
    "collect_bucket_garbage",
    "collect_garbage",
    "edit_card",
    "fsck",
    "migrate",
    "remove_experiments",
    "retired_among",
]


def __getattr__(name: str) -> object:
    """Load an exported name's module on first use (PEP 562) and keep the name here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The exported names."""
    return sorted(_EXPORTS)
