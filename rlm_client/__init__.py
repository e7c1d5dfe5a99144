"""Memory for code running inside a kernel: export a result, record it, find it, slice it.

Every host operation goes through `dsh_tools.call`; this package holds no credential, names no
scope, and loads nothing that writes the store, the outbox or talks to Honcho. Results are the
host's result structs (`cards.results`); every failure is an `ArtifactError` (also exported as
`ClientError`), whose `code` is the host's stable code when the host refused.

    path = rlm_client.export_table(table, "treatment-response")
    recorded = await rlm_client.record(path, title=..., summary=..., query_fingerprint=...,
                                       source=..., source_version=...)
    hits = await rlm_client.search("cohort treatment response")
    resolved = await rlm_client.resolve(hits[0].experiment_id, current_source_version=...)
    piece = rlm_client.read_slice(resolved, columns=["cohort", "response"], where="cohort = 2")
"""

from cards.errors import ArtifactError, ToolFailed
from cards.results import RecordResult, ResolveResult, SearchHit
from rlm_client._client import record, resolve, search, use_bridge
from rlm_client._export import export_table, exports_dir
from rlm_client._slice import read_slice

ClientError = ArtifactError  # the one error root, under the name kernels have used

__all__ = [
    "ArtifactError",
    "ClientError",
    "RecordResult",
    "ResolveResult",
    "SearchHit",
    "ToolFailed",
    "export_table",
    "exports_dir",
    "read_slice",
    "record",
    "resolve",
    "search",
    "use_bridge",
]
