"""A recording process for the gc race (`tests/cas/test_gc_race.py`).

Usage: python _gc_race_worker.py JOB.json. It records exports from a small pool, each time as
a new experiment (its own query fingerprint), so that most records adopt an object already
stored (deduplication) that a concurrent `gc` may be about to reclaim. It stops when the stop
file exists (or after `max_records`) and prints one JSON line per record: experiment and
artifact id.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path


def main(job_path: str) -> int:
    sys.path.insert(0, str(Path(__file__).parent.parent))
    from cards import parse_metadata
    from cas import BucketSettings, BucketStore, ProjectStore, Provenance, VerificationCache

    job = json.loads(Path(job_path).read_text())
    if "settings" in job:
        store = BucketStore(BucketSettings(**job["settings"]), job["project"])
    else:
        store = ProjectStore(job["artifact_root"], job["project"], cache=VerificationCache())
    pool, worker = job["pool"], job["worker"]
    for i in range(job["max_records"]):
        if os.path.exists(job["stop"]):
            break
        name = pool[(i * 7 + worker) % len(pool)]
        fields = dict(job["metadata"])
        fields["query_fingerprint"] = hashlib.sha256(f"{worker}-{i}".encode()).hexdigest()
        recorded = store.record(
            job["rlm_root"], Provenance(session_id=job["session"]), parse_metadata(fields), name
        )
        line = {"experiment_id": recorded.card.experiment_id,
                "artifact_id": recorded.card.artifact.artifact_id,
                "deduplicated": recorded.deduplicated}  # fmt: skip
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
