"""Issue 28: `gc --apply` racing recording processes never loses an object a card names.

Four real processes record exports from a small pool, each record a new experiment, so most
records adopt an object already stored. Meanwhile this process runs 200 rounds of: remove
every card there is (so every object is unreferenced), then collect with no grace period at
all (the hardest case: only the lock, or on a bucket the trash-and-recheck protocol, protects
an object being adopted). Afterwards every card left names an object that is there and intact
(fsck: no dangling card), on the local store and on a bucket with a real service's quirks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bucket_helpers import Host, quirky_bucket, s3_endpoint
from conftest import PROJECT, SESSION, Workspace, metadata_fields

from cas import (
    BucketStore,
    Retention,
    collect_bucket_garbage,
    collect_garbage,
    fsck,
    remove_experiments,
)

__all__ = ["quirky_bucket", "s3_endpoint"]  # fixtures, imported for pytest

ROUNDS = 200
WORKERS = 4
POOL = 24  # more contents than records in flight: most objects are unreferenced at a sweep
NO_GRACE = Retention(grace_s=0, quarantine_s=0)
WORKER = Path(__file__).parent.parent / "_gc_race_worker.py"


def _pool(ws: Workspace) -> list[str]:
    names = []
    for n in range(POOL):
        name = f"pool-{n}.csv"
        ws.export(name, ("k,v\n" + "".join(f"{i},{n}\n" for i in range(200 + n))).encode())
        names.append(name)
    return names


def _spawn(ws: Workspace, job: dict[str, object], worker: int) -> subprocess.Popen[str]:
    path = ws.root / f"race-job-{worker}.json"
    path.write_text(json.dumps({**job, "worker": worker}))
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finished(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The rest of a worker's output (read through the same buffered files as its first line)."""
    assert proc.stdout is not None and proc.stderr is not None
    with proc.stdout, proc.stderr:
        out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=600)
    return out, err


def _race(ws: Workspace, store, job: dict[str, object]) -> dict[str, int]:  # type: ignore[no-untyped-def]
    stop = ws.root / "stop"
    job = {**job, "project": PROJECT, "rlm_root": str(ws.rlm_root), "session": SESSION,
           "pool": _pool(ws), "stop": str(stop), "metadata": metadata_fields()}  # fmt: skip
    procs = [_spawn(ws, job, worker) for worker in range(WORKERS)]
    counts = {"rounds": 0, "removed": 0, "reclaimed": 0, "restored": 0}
    first = [proc.stdout.readline() for proc in procs if proc.stdout]  # all are recording now
    try:
        for _ in range(ROUNDS):
            present = [card.experiment_id for card in store.scan_cards().cards]
            if present:
                counts["removed"] += len(remove_experiments(store, present, who="race"))
            collect = collect_bucket_garbage if isinstance(store, BucketStore) else collect_garbage
            report = collect(store, NO_GRACE, apply=True)
            counts["reclaimed"] += sum(1 for i in report.reclaimed if i.kind == "object")
            counts["restored"] += report.restored
            counts["rounds"] += 1
    finally:
        stop.touch()
        outputs = [_finished(proc) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    lines = [*first, *(line for out, _ in outputs for line in out.splitlines())]
    records = [json.loads(line) for line in lines if line.strip()]
    counts["records"] = len(records)
    counts["deduplicated"] = sum(1 for r in records if r["deduplicated"])
    report = fsck(store)
    assert report.dangling_cards == [] and report.invalid_objects == [], report
    kept = {card.experiment_id for card in store.scan_cards().cards}
    counts["cards_left"] = len(kept)
    for card in store.scan_cards().cards:  # every card left resolves to its intact bytes
        assert store.resolve(card.experiment_id).card.artifact == card.artifact
    assert counts["rounds"] == ROUNDS and counts["reclaimed"] > 0 and counts["records"] > 0
    print(f"gc race: {counts}")
    return counts


@pytest.mark.slow
def test_gc_racing_four_recorders_loses_nothing_locally(ws: Workspace) -> None:
    store = ws.store()
    _race(ws, store, {"artifact_root": str(ws.artifact_root), "max_records": 100_000})


@pytest.mark.slow
def test_gc_racing_four_recorders_loses_nothing_in_a_bucket(
    ws: Workspace, s3_endpoint: str, quirky_bucket: str
) -> None:
    host = Host(s3_endpoint, quirky_bucket, ws.root / "state")
    store = host.store(PROJECT)
    settings = host.settings()
    job_settings = {
        "bucket": settings.bucket, "cache_root": str(ws.root / "worker-cache"),
        "prefix": settings.prefix, "endpoint_url": settings.endpoint_url,
        "region": settings.region,
    }  # fmt: skip
    _race(ws, store, {"settings": job_settings, "max_records": 100_000})
