"""A separate process that records or resolves once, for multi-process and crash tests.

Usage: python _record_worker.py JSON. With "wait", it blocks until a line arrives on stdin so
that a test can start many workers and release them together. With "die_at", it kills itself
with SIGKILL at an exact step (the n-th call of an OS function, before or after it runs), so
crash points are chosen deterministically rather than by timing.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from cards import DEFAULT_LIMITS, ArtifactError, dump_card, parse_metadata
from cas import IntegrityMode, ProjectStore, Provenance


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _install_kill(spec: dict) -> object:
    name, count, when = spec["func"], spec["count"], spec.get("when", "before")
    calls = {"n": 0}

    def hit() -> bool:
        calls["n"] += 1
        return calls["n"] == count

    if name == "advance":

        class Killer:
            def start(self, total: int) -> None:
                pass

            def advance(self, done: int) -> None:
                if hit():
                    _die()

        return Killer()
    real = getattr(os, name)

    def wrapper(*args, **kwargs):
        fire = hit()
        if fire and when == "before":
            _die()
        result = real(*args, **kwargs)
        if fire:
            _die()
        return result

    setattr(os, name, wrapper)
    return None


def main() -> None:
    job = json.loads(sys.argv[1])
    limits = DEFAULT_LIMITS.lowered(**job.get("limits", {}))
    integrity = IntegrityMode(job.get("integrity", "cached"))
    store = ProjectStore(job["artifact_root"], job["project"], limits=limits, integrity=integrity)
    if job.get("wait"):
        sys.stdin.readline()
    try:
        if job["op"] == "resolve":
            resolved = store.resolve(job["experiment_id"])
            with open(resolved.path, "rb") as handle:
                data = handle.read()
            out = {"ok": True, "hashed": resolved.hashed, "size": len(data)}
        else:
            progress = _install_kill(job["die_at"]) if job.get("die_at") else None
            metadata = parse_metadata(job["metadata"])
            recorded = store.record(
                job["rlm_root"],
                Provenance(session_id=job["session"]),
                metadata,
                job["path"],
                progress,  # type: ignore[arg-type]
            )
            out = {
                "ok": True,
                "experiment_id": recorded.card.experiment_id,
                "deduplicated": recorded.deduplicated,
                "card": dump_card(recorded.card).decode(),
            }
    except ArtifactError as exc:
        out = {"ok": False, "code": str(exc.code)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
