"""A recorded project and a running `artmem ui` process, for the page's tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import fingerprint
from host_helpers import write_config

HOSTILE = "<img src=x onerror=alert(1)>"
ARTMEM = str(Path(sys.executable).parent / "artmem")


@dataclass
class Catalog:
    ids: dict[str, str]
    env: dict[str, str]
    cwd: Path


def recorded_project(tmp: Path) -> Catalog:
    """Three tables (one derived from two) and a card with a hostile title, via the CLI."""
    config, project_root = write_config(tmp)
    env = {**os.environ, "ARTMEM_CONFIG": str(config)}
    exports = tmp / "rlm" / "sessions" / "s1" / "exports"
    exports.mkdir(parents=True)
    n = 400
    base = pa.table({
        "patient": pa.array(range(n), pa.int64()),
        "cohort": pa.array([f"c{i % 4}" for i in range(n)]),
        "dose": pa.array([(i * 37 % 101) / 7 for i in range(n)]),
    })  # fmt: skip
    pq.write_table(base, exports / "dose.parquet", row_group_size=100)
    pq.write_table(base.slice(0, 300), exports / "visits.parquet")
    summary = pa.table({"cohort": ["c0", "c1", "c2", "c3"], "mean_dose": [1.5, 2.0, 2.5, 3.0]})
    pq.write_table(summary, exports / "summary.parquet")
    (exports / "hostile.txt").write_text("hostile\n")
    ids: dict[str, str] = {}

    def record(name: str, title: str, *extra: str, media: str = "application/vnd.apache.parquet"):
        argv = [ARTMEM, "record", "--session", "s1", name,
                "--title", title, "--summary", f"Synthetic {title.lower()}", "--query-fingerprint",
                fingerprint(name), "--source", "trial-warehouse", "--source-version", "v1",
                "--media-type", media, "--tag", "cohort", "--json", *extra]  # fmt: skip
        done = subprocess.run(argv, cwd=project_root, env=env, capture_output=True, check=True)
        ids[name] = json.loads(done.stdout)["experiment_id"]

    record("dose.parquet", "Dose by patient")
    record("visits.parquet", "Visits by patient")
    record("summary.parquet", "Mean dose by cohort", "--derived-from", ids["dose.parquet"],
           "--derived-from", ids["visits.parquet"])  # fmt: skip
    record("hostile.txt", HOSTILE, media="text/plain")
    return Catalog(ids=ids, env=env, cwd=project_root)


class UiProcess:
    """`artmem ui` in its own process; `url` is the address it printed (with the token)."""

    def __init__(self, catalog: Catalog) -> None:
        argv = [ARTMEM, "ui"]
        self.process = subprocess.Popen(
            argv, cwd=catalog.cwd, env=catalog.env, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        assert first.startswith("artmem ui: serving"), first
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), self.url
        self.base, _, query = self.url.partition("/?")
        self.token = query.removeprefix("token=")

    def page(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def stop(self) -> None:
        self.process.terminate()  # SIGTERM: the default action ends the process
        self.process.wait(timeout=30)
        assert self.process.stdout is not None
        self.process.stdout.close()


def running_ui(tmp_path_factory):
    """A recorded project and its running page (a module fixture's body)."""
    catalog = recorded_project(tmp_path_factory.mktemp("ui"))
    process = UiProcess(catalog)
    yield process, catalog
    process.stop()
