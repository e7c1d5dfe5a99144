"""The one place that builds a project's store from a configuration (which itself stays data).

Apart from the composition root (`_runtime`), so that the notebook API builds its read-only
store without loading what wires the outbox and the Honcho service.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cards import IndexState
from harness_plugin.config import Config

if TYPE_CHECKING:
    from cas import Store

BUCKET_CACHE_DIR = "bucket-cache"  # below the state root: the bucket store's verified copies


def build_store(config: Config, project_id: str, *, read_only: bool = False) -> Store:
    """The store of one configured project, on the configured backend.

    A `read_only` store (the notebook API) records nothing and writes no card; a bucket store
    still fills its verified local cache when it resolves. A bucket store loads its SDK only
    when it first talks to the bucket.
    """
    initial = IndexState.PENDING if config.honcho.enabled else IndexState.DISABLED
    storage = config.storage
    if storage.backend == "s3":
        from cas import BucketSettings, BucketStore  # only for a bucket

        assert storage.bucket is not None  # validated
        settings = BucketSettings(
            bucket=storage.bucket,
            cache_root=os.path.join(config.state_root, BUCKET_CACHE_DIR),
            prefix=storage.prefix,
            endpoint_url=storage.endpoint_url,
            region=storage.region,
            part_checksums=storage.part_checksums,
        )
        return BucketStore(
            settings,
            project_id,
            limits=config.effective_limits,
            integrity=config.integrity,
            require_owner=config.ingest.require_owner,
            initial_index_state=initial,
            read_only=read_only,
        )
    from cas import ProjectStore  # the store's rooms load with the first store

    return ProjectStore(
        config.artifact_root,
        project_id,
        limits=config.effective_limits,
        integrity=config.integrity,
        require_owner=config.ingest.require_owner,
        initial_index_state=initial,
        read_only=read_only,
    )
