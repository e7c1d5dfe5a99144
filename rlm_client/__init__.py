"""Memory for code running inside a kernel: export a result, record it, find it, slice it.

Every host operation goes through `dsh_tools.call`; this package holds no credential, names no
scope, and loads nothing that writes the store, the outbox or talks to Honcho.

    path = rlm_client.export_table(table, "treatment-response")
    recorded = await rlm_client.record(path, title=..., summary=..., query_fingerprint=...,
                                       source=..., source_version=...)
    hits = await rlm_client.search("cohort treatment response")
    resolved = await rlm_client.resolve(hits[0].experiment_id, current_source_version=...)
    piece = rlm_client.read_slice(resolved, columns=["cohort", "response"], where="cohort = 2")
"""

from rlm_client._client import Hit, Recorded, Resolved, record, resolve, search, use_bridge
from rlm_client._errors import ClientError
from rlm_client._export import export_table, exports_dir
from rlm_client._slice import read_slice

__all__ = [
    "ClientError",
    "Hit",
    "Recorded",
    "Resolved",
    "export_table",
    "exports_dir",
    "read_slice",
    "record",
    "resolve",
    "search",
    "use_bridge",
]
