"""`artmem demo`: the whole local loop in a fresh temporary workspace, with no configuration.

Each step prints the `artmem` command that does the same. With `--keep`, the workspace stays
with a configuration file (`artmem.toml`) and the commands to go on exploring it.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import msgspec

from cards import Freshness, parse_metadata, parse_session_id
from cas import Catalog, Provenance, Store
from harness_plugin import _views
from harness_plugin._progress import progress_for
from harness_plugin._stores import build_store
from harness_plugin.config import Config, config_from_mapping

if TYPE_CHECKING:
    from cas.slicing import SliceResult

SESSION = "demo-session-1"
PROJECT = "trial-analysis"
ROWS = 1_200_000  # two random float64 columns alone make this well over 16 MiB
SNAPSHOT = "warehouse-snapshot-2026-11-01"

Say = Callable[[str], None]


def run_demo(
    *, keep: bool, say: Say, bar_stream: TextIO, show_progress: bool
) -> list[dict[str, object]]:
    """Write a synthetic result, record it twice, search, resolve; report each step.

    Returns the steps as JSON-ready views; `say` receives the lines for a person as they happen.
    """
    workspace = Path(tempfile.mkdtemp(prefix="artmem-demo-"))
    try:
        steps = _run(workspace, say, bar_stream, show_progress)
        if keep:
            steps.append(_keep(workspace, steps, say))
        return steps
    finally:
        if not keep:
            shutil.rmtree(workspace, ignore_errors=True)


def _run(
    workspace: Path, say: Say, bar_stream: TextIO, show_progress: bool
) -> list[dict[str, object]]:
    config = _config(workspace)
    store = build_store(config, PROJECT)
    steps: list[dict[str, object]] = []
    say(f"artmem demo: a fresh workspace with project {PROJECT!r} and session {SESSION!r}")

    exports = Path(config.rlm_root, "sessions", SESSION, "exports")
    source = _write_result(exports / "treatment-response.parquet")
    size = source.stat().st_size
    say(f"\n1. The kernel exported a Parquet result of {_views.human_size(size)} to its exports/")
    say("   (larger than the 16 MiB a kernel snapshot keeps per variable)")
    steps.append({"step": "export", "bytes": size})

    metadata = parse_metadata(
        {
            "title": "Treatment response by cohort",
            "summary": "Synthetic per-patient dose and response for the cohort comparison.",
            "query_fingerprint": hashlib.sha256(b"demo: response by cohort, v1").hexdigest(),
            "source": "trial-warehouse",
            "source_version": SNAPSHOT,
            "media_type": "application/vnd.apache.parquet",
            "tags": ["cohort", "response"],
            "columns": ["cohort", "patient_id", "dose_mg", "response"],
        }
    )
    provenance = Provenance(session_id=parse_session_id(SESSION))
    for attempt in (1, 2):
        bar = progress_for(bar_stream, "recording", enabled=show_progress)
        try:
            recorded = store.record(config.rlm_root, provenance, metadata, source.name, bar)
        finally:
            if bar is not None:
                bar.close()
        view = _views.record_result(recorded, honcho_queued=False)
        steps.append({"step": f"record-{attempt}", **msgspec.to_builtins(view)})
        say(
            "\n2. Recorded it: streamed, hashed, published read-only, card written"
            if attempt == 1
            else "\n3. Recorded the same file again: nothing copied, same card"
        )
        say(_command(
            f"artmem record --session {SESSION} {source.name} --title 'Treatment response by "
            f"cohort' --summary '…' --query-fingerprint {metadata.query_fingerprint[:12]}… "
            f"--source trial-warehouse --source-version {SNAPSHOT} --tag cohort --tag response"
        ))  # fmt: skip
        say("\n".join(_views.record_lines(view)))
    experiment = recorded.card.experiment_id

    scan = store.scan_cards()
    catalog = Catalog(scan.cards)
    found = catalog.search("cohort treatment response", limit=5)
    hits = [_views.local_hit(h) for h in found]
    steps.append({"step": "search", "hits": hits})
    say("\n4. A later session searches the local cards for 'cohort treatment response'")
    say(_command("artmem search 'cohort treatment response'"))
    say("\n".join(_views.search_lines(hits, len(scan.problems))))

    for label, current in (("5", SNAPSHOT), ("6", "warehouse-snapshot-2026-12-01")):
        resolved = store.resolve(experiment, current)
        resolve_view = _views.resolve_result(resolved)
        steps.append(
            {"step": "resolve", "hashed": resolved.hashed, **msgspec.to_builtins(resolve_view)}
        )
        how = "hashed all bytes" if resolved.hashed else "verification cache hit"
        fresh = resolved.freshness is Freshness.FRESH
        say(f"\n{label}. Resolved it against source version {current!r} ({how}):")
        say(_command(f"artmem resolve {experiment[:12]} --current-source-version {current}"))
        say("\n".join(_views.resolve_lines(resolve_view)))
        if not fresh:
            say("   a stale result still resolves, for historical comparison, with a warning")

    piece = _slice(store, experiment)
    steps.append({"step": "slice", "rows": piece.rows, "chunks_verified": piece.chunks_verified})
    say("\n7. It slices 2 columns where patient_id < 5, proving only the chunks it reads:")
    say(
        _command(
            f"artmem slice {experiment[:12]} --columns patient_id,response --where 'patient_id < 5'"
        )
    )
    from harness_plugin.cli._table_commands import render_table  # what `artmem slice` prints

    for line in render_table(piece).splitlines():
        say(f"   {line}")
    size = resolved.card.artifact.bytes
    say(f"   it read and verified {piece.chunks_verified} of {-(-size // (4 << 20))} chunks")
    say("\nEverything above ran locally; Honcho was not needed.")
    return steps


def _command(line: str) -> str:
    return f"   $ {line}"


def _keep(workspace: Path, steps: list[dict[str, object]], say: Say) -> dict[str, object]:
    """Write the workspace's configuration file and say how to go on exploring it."""
    config = workspace / "artmem.toml"
    config.write_text(
        f'artifact_root = "{workspace / "artifacts"}"\n'
        f'rlm_root = "{workspace / "rlm"}"\n'
        f'state_root = "{workspace / "state"}"\n\n'
        f'[[projects]]\nid = "{PROJECT}"\nroot = "{workspace / "work" / PROJECT}"\n',
        encoding="utf-8",
    )
    experiment = str(next(s["experiment_id"] for s in steps if "experiment_id" in s))
    commands = [
        f"export ARTMEM_CONFIG={config}",
        f"cd {workspace / 'work' / PROJECT}",
        "artmem list",
        f"artmem show {experiment[:12]}",
        f"artmem slice {experiment[:12]} --columns cohort,response --where \"cohort = 'B'\" "
        "--limit 10",
        f"artmem export {experiment[:12]} response.parquet",
    ]
    say(f"\nThe workspace is kept at {workspace}, with its configuration. Go on with:")
    for line in commands:
        say(f"   {line}")
    say(f"(remove it with: rm -rf {workspace})")
    return {"step": "keep", "workspace": str(workspace), "config": str(config),
            "commands": commands}  # fmt: skip


def _config(workspace: Path) -> Config:
    project_root = workspace / "work" / PROJECT
    project_root.mkdir(parents=True, mode=0o700)
    return config_from_mapping(
        {
            "artifact_root": str(workspace / "artifacts"),
            "rlm_root": str(workspace / "rlm"),
            "state_root": str(workspace / "state"),
            "projects": [{"id": PROJECT, "root": str(project_root)}],
        }
    )


def _write_result(path: Path) -> Path:
    """A synthetic, incompressible Parquet table, written atomically as a kernel would."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, mode=0o700)
    cohorts = pa.array(["A", "B", "C", "D"])
    table = pa.table(
        {
            "cohort": pc.take(
                cohorts,
                pc.cast(pc.multiply(pc.random(ROWS, initializer=1), 4), pa.int64(), safe=False),
            ),
            "patient_id": pa.array(range(ROWS), pa.int64()),
            "dose_mg": pc.multiply(pc.random(ROWS, initializer=2), 100.0),
            "response": pc.random(ROWS, initializer=3),
        }
    )
    # The demo's own fresh workspace: nothing reads the file before it is complete.
    pq.write_table(table, path, compression="zstd", row_group_size=250_000)
    return path


def _slice(store: Store, experiment: str) -> SliceResult:
    from cas.slicing import SliceRequest, read_slice

    request = SliceRequest(columns=("patient_id", "response"), where="patient_id < 5")
    return read_slice(store.locate(experiment).source, request)
