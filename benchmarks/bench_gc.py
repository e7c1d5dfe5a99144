"""`artmem gc` on a local store of 10,000 objects, as whole processes, against plain tools.

A project is laid out directly (no record per object, so it builds in seconds): `--objects`
objects of 1 KiB with their chunk manifests, and a card for every other one, so half the
objects are unreferenced (as after `artmem rm`). Each run works on a fresh copy of that tree
(copied untimed). Rows, each paired with its baseline in alternating order (median and spread
of `--runs`):

- `artmem gc` (the dry run: list the objects, read every card, decide) against `find` listing
  the same objects tree;
- `artmem gc --apply` (the same, under the commit lock, then unlinking the unreferenced objects
  with their manifests and fsyncing their directories) against `xargs rm` of exactly those
  files followed by `sync -f`.

    .venv/bin/python benchmarks/bench_gc.py [--objects 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from _common import machine_line, print_table, remove_tree, spread
from _common import median as median_of

from cards import CardMetadata, dump_card, parse_metadata, parse_project_id, project_key
from cards.testing import card_for_bytes
from cas import ProjectStore

PROJECT = "bench-gc"
ROOT = Path(__file__).resolve().parent.parent
ARTMEM = str(Path(sys.executable).parent / "artmem")


def build(work: Path, count: int) -> tuple[Path, list[str]]:
    """The project tree and config; the paths of the unreferenced objects and manifests."""
    project = work / "artifacts" / "projects" / project_key(parse_project_id(PROJECT))
    for name in ("rlm", "state", "work"):
        (work / name).mkdir(parents=True, exist_ok=True)
    store = ProjectStore(str(work / "artifacts"), PROJECT)
    (project / "cards").mkdir(parents=True)
    (project / "tmp").mkdir()
    unreferenced: list[str] = []
    now = datetime.now(UTC)
    for n in range(count):
        content = n.to_bytes(8, "big") * 128
        digest = hashlib.sha256(content).digest()  # a stand-in manifest: gc never reads it
        card = card_for_bytes(
            content, _metadata(n), project_id=store.project_id, session_id="s1", now=now
        )
        aid = card.artifact.artifact_id
        shard = project / "objects" / aid[4:6]
        shard.mkdir(parents=True, exist_ok=True)
        (shard / aid).write_bytes(content)
        (shard / aid).chmod(0o400)
        (shard / f"{aid}.chunks").write_bytes(digest)
        if n % 2:
            unreferenced += [str(shard / aid), str(shard / f"{aid}.chunks")]
        else:
            (project / "cards" / f"{card.experiment_id}.json").write_bytes(dump_card(card))
    config = work / "artmem.toml"
    config.write_text(
        f'artifact_root = "{work / "artifacts"}"\nrlm_root = "{work / "rlm"}"\n'
        f'state_root = "{work / "state"}"\n[[projects]]\nid = "{PROJECT}"\n'
        f'root = "{work / "work"}"\n[retention]\ngrace_hours = 0\nunattended = true\n'
    )
    return config, unreferenced


def _metadata(n: int) -> CardMetadata:
    return parse_metadata(
        {
            "title": f"Result {n}",
            "summary": "A synthetic result for the gc benchmark.",
            "query_fingerprint": hashlib.sha256(str(n).encode()).hexdigest(),
            "source": "bench",
            "source_version": "v1",
        }
    )


def _timed(argv: list[str], cwd: Path) -> float:
    import time

    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stdout.decode()[-500:] + done.stderr.decode()[-2000:])
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gc-") as scratch:
        pristine = Path(scratch) / "pristine"
        config, unreferenced = build(pristine, args.objects)
        listing = Path(scratch) / "unreferenced.txt"
        live = Path(scratch) / "live"

        def fresh() -> Path:
            if live.exists():
                remove_tree(str(live))
            shutil.copytree(pristine, live, symlinks=True)
            return live

        relative = [os.path.relpath(p, pristine) for p in unreferenced]
        listing.write_text("\n".join(relative) + "\n")
        objects = live / os.path.relpath(config.parent / "artifacts", pristine)
        samples: dict[str, list[float]] = {k: [] for k in ("dry", "find", "apply", "rm")}
        for run in range(args.runs):
            order = ["ours", "theirs"] if run % 2 == 0 else ["theirs", "ours"]
            for side in order:
                fresh()
                cfg = ["--config", str(live / "artmem.toml"), "--project", PROJECT]
                if side == "ours":
                    samples["dry"].append(_timed([ARTMEM, *cfg, "gc", "--json"], live))
                    samples["apply"].append(_timed([ARTMEM, *cfg, "gc", "--apply", "--json"], live))
                else:
                    samples["find"].append(_timed(["find", str(objects), "-type", "f"], live))
                    rm = f"xargs rm -f < {listing} && sync -f {objects}"
                    samples["rm"].append(_timed(["sh", "-c", rm], live))
        remove_tree(str(live))
    half = args.objects // 2
    rows = [
        [f"artmem gc (dry run), {args.objects} objects", spread(samples["dry"]),
         "find objects -type f", spread(samples["find"]),
         f"{median_of(samples['dry']) / median_of(samples['find']):.1f}×"],
        [f"artmem gc --apply, reclaims {half}", spread(samples["apply"]),
         f"xargs rm ({2 * half} files) + sync", spread(samples["rm"]),
         f"{median_of(samples['apply']) / median_of(samples['rm']):.1f}×"],
    ]  # fmt: skip
    print(machine_line())
    print_table(["artmem", "seconds", "baseline", "seconds", "ratio"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
