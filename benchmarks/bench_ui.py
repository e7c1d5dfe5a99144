"""`artmem ui`: start-up (process start to the printed URL) and page loads, against a baseline.

    python benchmarks/bench_ui.py [--runs 7] [--rows 200000]

Each run starts `artmem ui` as a new process, times it to its printed address, then loads the
list, an experiment page (footer, a bounded sample for the charts, the lineage) and a
comparison, and stops it; `artmem status` in the same project, run in turn, is the baseline
for the start-up. Figures are medians with the spread (min to max) of the paired runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ARTMEM = str(Path(sys.executable).parent / "artmem")


def _project(root: Path, rows: int) -> tuple[dict[str, str], Path, list[str]]:
    work = root / "work"
    work.mkdir()
    config = root / "artmem.toml"
    config.write_text(
        f'artifact_root = "{root / "artifacts"}"\nrlm_root = "{root / "rlm"}"\n'
        f'state_root = "{root / "state"}"\n[[projects]]\nid = "bench-ui"\nroot = "{work}"\n'
    )
    env = {**os.environ, "ARTMEM_CONFIG": str(config)}
    exports = root / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    ids: list[str] = []
    for n, name in ((rows, "a.parquet"), (rows // 2, "b.parquet")):
        table = pa.table({
            "id": pa.array(range(n), pa.int64()),
            "group": pa.array([f"g{i % 7}" for i in range(n)]),
            "value": pa.array([(i * 7919 % 1000) / 10 for i in range(n)]),
        })  # fmt: skip
        pq.write_table(table, exports / name, row_group_size=50_000)
        parents = [x for i in ids for x in ("--derived-from", i)]
        argv = [ARTMEM, "record", "--session", "s1", name, "--title", name, "--summary", "s",
                "--query-fingerprint", hashlib.sha256(name.encode()).hexdigest(),
                "--source", "w", "--source-version", "v1", "--json", *parents]  # fmt: skip
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, check=True)
        ids.append(json.loads(done.stdout)["experiment_id"])
    return env, work, ids


def _one_run(env: dict[str, str], work: Path, ids: list[str]) -> dict[str, float]:
    started = time.perf_counter()
    process = subprocess.Popen([ARTMEM, "ui"], cwd=work, env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    process.stdout.readline()
    url = process.stdout.readline().strip()
    figures = {"start-up": time.perf_counter() - started}
    base, _, token = url.partition("/?token=")
    pages = {
        "list page": "/",
        "experiment page": f"/e/{ids[1]}",
        "comparison page": f"/compare?a={ids[0]}&b={ids[1]}",
    }
    try:
        for name, path in pages.items():
            sep = "&" if "?" in path else "?"
            begun = time.perf_counter()
            with urllib.request.urlopen(f"{base}{path}{sep}token={token}", timeout=120) as r:
                r.read()
            figures[name] = time.perf_counter() - begun
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()
    begun = time.perf_counter()
    subprocess.run([ARTMEM, "status"], cwd=work, env=env, capture_output=True, check=True)
    figures["artmem status (baseline)"] = time.perf_counter() - begun
    return figures


def main() -> None:
    """Run the benchmark and print medians with their spread."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        env, work, ids = _project(Path(tmp), args.rows)
        runs = [_one_run(env, work, ids) for _ in range(args.runs)]
    for name in runs[0]:
        samples = sorted(run[name] * 1000 for run in runs)
        middle = samples[len(samples) // 2]
        print(f"{name:26} median {middle:7.1f} ms  (spread {samples[0]:.1f} to {samples[-1]:.1f})")
    ratios = sorted(run["start-up"] / run["artmem status (baseline)"] for run in runs)
    print(f"start-up / status: median ratio {ratios[len(ratios) // 2]:.2f} (pair by pair)")


if __name__ == "__main__":
    main()
