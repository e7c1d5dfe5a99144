"""A stand-in kernel process: runs `rlm_client` against a `dsh_tools` that forwards each call to
the host over a pipe (one JSON line out on stdout, one reply line in on stdin), as the RLM bridge
does. The host (the test) attaches the caller itself; this process never names a scope.

Usage: python _kernel.py producer|consumer  (environment: RLM_SESSION_DIR and little else)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc

import rlm_client

ROWS = 1_500_000


class PipeBridge:
    """`dsh_tools` for this process: requests out on stdout, replies in on stdin."""

    async def call(self, name, arguments):
        sys.stdout.write(json.dumps({"call": {"name": name, "arguments": arguments}}) + "\n")
        sys.stdout.flush()
        return json.loads(sys.stdin.readline())


def finish(**report):
    sys.stdout.write(json.dumps({"done": report}) + "\n")
    sys.stdout.flush()


async def producer():
    n = ROWS
    table = pa.table(
        {
            "patient_id": pa.array(range(n), pa.int64()),
            "cohort": pc.cast(pc.multiply(pc.random(n, initializer=7), 4), pa.int64(), safe=False),
            "dose_mg": pc.multiply(pc.random(n, initializer=8), 100.0),
            "response": pc.random(n, initializer=9),
        }
    )
    path = rlm_client.export_table(table, "treatment-response")
    recorded = await rlm_client.record(
        path,
        title="Treatment response by cohort",
        summary="Per-patient dose and response for the preregistered cohort comparison.",
        query_fingerprint=hashlib.sha256(b"SELECT * FROM trial WHERE arm IN (1,2)").hexdigest(),
        source="trial-warehouse",
        source_version="snapshot-2026-11-01",
        tags=["cohort", "response"],
        columns=table.column_names,
    )
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    finish(
        experiment_id=recorded.experiment_id,
        sha256=recorded.sha256,
        file_sha256=digest,
        bytes=recorded.bytes,
        honcho_queued=recorded.honcho_queued,
        env=sorted(os.environ),
    )


async def consumer():
    hits = await rlm_client.search("cohort treatment response")
    resolved = await rlm_client.resolve(hits[0].experiment_id, "snapshot-2026-11-01")
    piece = rlm_client.read_slice(
        resolved, columns=["patient_id", "response"], where="patient_id < 1000", limit=50
    )
    with open(resolved.path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    finish(
        experiment_id=resolved.experiment_id,
        freshness=resolved.freshness,
        sha256=digest,
        rows=piece.rows,
        truncated=piece.truncated,
        first=piece.table.column("patient_id")[0].as_py(),
        hit_sources=[h.origin for h in hits],
        env=sorted(os.environ),
    )


if __name__ == "__main__":
    rlm_client.use_bridge(PipeBridge())
    try:
        asyncio.run({"producer": producer, "consumer": consumer}[sys.argv[1]]())
    except rlm_client.ClientError as exc:
        finish(error=exc.code)
