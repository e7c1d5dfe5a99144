"""The store on an S3-compatible bucket, with a verified local cache.

Rooms: `_settings` (where the bucket is), `_keys` (the layout of a project in the bucket),
`_client` (the one module that talks to the bucket; its SDK loads with the first client),
`_publish` (conditional creates of objects),
`_cache` (verified local copies), `_ranged` (ranged reads of one object version, for slices),
`_proofs` (kept proofs of stored versions), `_backend` (the project's keys, through the seam),
`_store` (`BucketStore`, which orchestrates them).
"""

from __future__ import annotations

from cas._bucket._settings import BucketSettings
from cas._bucket._store import BucketStore

__all__ = ["BucketSettings", "BucketStore"]
