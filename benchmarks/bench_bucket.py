"""The bucket store against a local S3 server (moto), beside the local store and a plain upload.

The target: a record into a bucket at least 0.8 as fast as a plain upload of the same bytes by
the same client (boto3's `upload_file`, default transfer settings and checksums: a CRC32 per
part, and over plain HTTP the signer's SHA-256 of every part too; a record whose first pass
took every part's SHA-256 sends that as the part's checksum instead, the signer's hash its proof).
`--record-only` measures just those pairs, and prints every pair's ratio. Every repeat measures,
in alternating order, the plain upload, a bucket record (a fresh project each time, so nothing
deduplicates), a local record, a first resolve on a host with an empty cache (download, hash,
verify), a local resolve that rehashes (`integrity = "always"`), and two slices (2 columns,
~1% of rows of a Parquet file: `scan`, a filter no row group statistics can prune, and `pruned`,
a range of the sorted key) through `locate`: locally, on a fresh bucket host (ranged GETs of only
the chunks read, paired with the local slice in alternating order), and on that host again once
a resolve left it a verified copy. For the ranged slices it prints the bytes fetched over the
object's size (the reader's count of what it received) and the time over the local slice's.
The server runs in its own process, so it does not share this process's GIL. Medians of the
paired runs, with their spread; ratios are per pair, then their median.

    .venv/bin/python benchmarks/bench_bucket.py [--size-mib 256] [--repeat 5] [--record-only]
"""

from __future__ import annotations

import argparse
import functools
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cards import parse_metadata  # noqa: E402
from cas import (  # noqa: E402
    BucketSettings,
    BucketStore,
    IntegrityMode,
    ProjectStore,
    Provenance,
    VerificationCache,
)

MIB = 1 << 20
SESSION = "bench"
ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def _metadata(fingerprint: str = "0" * 64) -> object:
    return parse_metadata(
        {
            "title": "Benchmark table",
            "summary": "Bytes for the bucket benchmark.",
            "query_fingerprint": fingerprint,
            "source": "bench",
            "source_version": "v1",
        }
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **ENV},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the moto server did not start")


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _parquet(path: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = range(rows)
    table = pa.table(
        {
            "k": pa.array(rng, pa.int64()),
            "a": pa.array([i * 7 % 1000 for i in rng], pa.int64()),
            "b": pa.array([float(i) / 3 for i in rng], pa.float64()),
            "c": pa.array([secrets.token_hex(8) for _ in rng]),
        }
    )
    pq.write_table(table, path, row_group_size=64_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument(
        "--record-only", action="store_true", help="measure only the record / plain upload pairs"
    )
    parser.add_argument(
        "--in-flight", type=int, default=None, help="parts sent at once (the store's default)"
    )
    args = parser.parse_args(argv)
    os.environ.update(ENV)
    import boto3

    server, endpoint = _start_server()
    work = Path(tempfile.mkdtemp(prefix="artmem-bench-bucket-"))
    try:
        return _run(args, endpoint, work, boto3.client("s3", endpoint_url=endpoint))
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, endpoint: str, work: Path, s3: object) -> int:
    bucket = "artmem-bench"
    s3.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
    rlm = work / "rlm"
    exports = rlm / "sessions" / SESSION / "exports"
    exports.mkdir(parents=True, mode=0o700)
    data = exports / "data.bin"
    with open(data, "wb") as out:
        for _ in range(args.size_mib):
            out.write(os.urandom(MIB))
    table_mib = 0.0
    if not args.record_only:
        _parquet(exports / "table.parquet", args.rows)
        table_mib = (exports / "table.parquet").stat().st_size / MIB

    def settings(host: str) -> BucketSettings:
        return BucketSettings(
            bucket=bucket, cache_root=str(work / host / "bucket-cache"), endpoint_url=endpoint,
            **({} if args.in_flight is None else {"max_in_flight": args.in_flight}),
        )  # fmt: skip

    prov = Provenance(session_id=SESSION)  # type: ignore[arg-type]
    times: dict[str, list[float]] = {}
    fetched: dict[str, list[float]] = {}
    ratios: list[float] = []
    for run in range(args.repeat):
        project = f"bench-{run}"
        bucket_store = BucketStore(settings(f"rec{run}"), project, cache=VerificationCache())
        local_store = ProjectStore(str(work / f"local{run}"), project, cache=VerificationCache())

        def plain(run: int = run) -> object:
            return s3.upload_file(str(data), bucket, f"plain/{run}")  # type: ignore[attr-defined]

        def bucket_record(store: BucketStore = bucket_store) -> object:
            return store.record(str(rlm), prov, _metadata(), "data.bin")  # type: ignore[arg-type]

        def local_record(store: ProjectStore = local_store) -> object:
            return store.record(str(rlm), prov, _metadata(), "data.bin")  # type: ignore[arg-type]

        pair: list[tuple[str, Callable[[], object]]] = [
            ("plain upload", plain),
            ("bucket record", bucket_record),
        ]
        for name, action in pair if run % 2 == 0 else reversed(pair):
            times.setdefault(name, []).append(_timed(action))
        ratios.append(times["plain upload"][-1] / times["bucket record"][-1])
        if args.record_only:
            continue
        times.setdefault("local record", []).append(_timed(local_record))
        exp = bucket_record().card.experiment_id  # type: ignore[attr-defined]
        reader = BucketStore(settings(f"res{run}"), project, cache=VerificationCache())
        always = ProjectStore(str(work / f"local{run}"), project, integrity=IntegrityMode.ALWAYS)
        for name, store in (
            ("bucket resolve (empty cache)", reader),
            ("bucket resolve (cached)", reader),
            ("local resolve (rehash)", always),
        ):
            times.setdefault(name, []).append(_timed(functools.partial(store.resolve, exp)))
        _slices(
            run, rlm, prov, settings, local_store, bucket_store, project, times, fetched,
            args.rows,
        )  # fmt: skip
        shutil.rmtree(work / f"local{run}", ignore_errors=True)
        shutil.rmtree(work / f"res{run}", ignore_errors=True)
    _report(args, times, ratios, table_mib)
    _report_slices(times, fetched)
    return 0


def _slices(
    run: int,
    rlm: Path,
    prov: Provenance,
    settings: Callable[[str], BucketSettings],
    local_store: ProjectStore,
    bucket_store: BucketStore,
    project: str,
    times: dict[str, list[float]],
    fetched: dict[str, list[float]],
    rows: int,
) -> None:
    from cas.slicing import SliceRequest

    requests = {
        "scan": SliceRequest(columns=("k", "b"), where="a < 10", limit=100_000),
        "pruned": SliceRequest(columns=("k", "b"), where=f"k < {rows // 100}", limit=100_000),
    }
    meta = _metadata("1" * 64)
    local_exp = local_store.record(str(rlm), prov, meta, "table.parquet").card.experiment_id  # type: ignore[arg-type]
    bucket_exp = bucket_store.record(str(rlm), prov, meta, "table.parquet").card.experiment_id  # type: ignore[arg-type]
    size = local_store.load_card(local_exp).artifact.bytes
    for label, request in requests.items():
        fresh = BucketStore(settings(f"slice{run}-{label}"), project, cache=VerificationCache())
        local_cut = functools.partial(_cut, local_store, local_exp, request)
        ranged_cut = functools.partial(_cut, fresh, bucket_exp, request)
        pair: list[tuple[str, Callable[[], object]]] = [
            (f"local slice ({label})", local_cut),
            (f"bucket slice, ranged ({label})", ranged_cut),
        ]
        for name, action in pair if run % 2 == 0 else reversed(pair):
            start = time.perf_counter()
            result = action()
            times.setdefault(name, []).append(time.perf_counter() - start)
            if action is ranged_cut:
                fetched.setdefault(label, []).append(result.bytes_read / size)  # type: ignore[attr-defined]
        fresh.resolve(bucket_exp)  # a verified local copy: later slices read it from disk
        name = f"bucket slice, local copy ({label})"
        times.setdefault(name, []).append(_timed(ranged_cut))


def _cut(store: BucketStore | ProjectStore, exp: str, request: object) -> object:
    from cas.slicing import read_slice

    return read_slice(store.locate(exp).source, request)  # type: ignore[arg-type]


def _report(
    args: argparse.Namespace, times: dict[str, list[float]], ratios: list[float], table_mib: float
) -> None:
    print(f"{args.size_mib} MiB object, {table_mib:.0f} MiB Parquet table, {args.repeat} runs")
    print(f"{'operation':34} {'median s':>9} {'MiB/s':>8}  spread (min-max s)")
    for name, values in times.items():
        size = table_mib if "slice" in name else args.size_mib
        med = statistics.median(values)
        print(f"{name:34} {med:9.3f} {size / med:8.1f}  {min(values):.3f}-{max(values):.3f}")
    med = statistics.median(ratios)
    print(
        f"record / plain upload throughput: median {med:.2f} "
        f"(spread {min(ratios):.2f}-{max(ratios):.2f}); target >= 0.80: "
        f"{'met' if med >= 0.8 else 'NOT met'}"
    )
    print("record / plain upload, each pair in run order:", " ".join(f"{r:.3f}" for r in ratios))


def _report_slices(times: dict[str, list[float]], fetched: dict[str, list[float]]) -> None:
    for label, fractions in fetched.items():
        local = times[f"local slice ({label})"]
        ranged = times[f"bucket slice, ranged ({label})"]
        ratios = [r / loc for r, loc in zip(ranged, local, strict=True)]
        share = statistics.median(fractions)
        print(
            f"bucket slice ({label}): fetched / object size median {share:.3f}"
            f" (spread {min(fractions):.3f}-{max(fractions):.3f}); time / local slice median "
            f"{statistics.median(ratios):.2f} (spread {min(ratios):.2f}-{max(ratios):.2f})"
        )


if __name__ == "__main__":
    raise SystemExit(main())
