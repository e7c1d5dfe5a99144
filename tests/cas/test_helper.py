"""Table reads from a process with threads go through a pre-started helper, never a fork of it.

Real processes: the helper is a fresh interpreter, each read a child it forks; the bounds (memory,
time, answer size) and the typed errors are those of a child forked by a single-threaded caller.
The works below are module-level functions: they cross to the helper pickled.
"""

from __future__ import annotations

import functools
import io
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cards.errors import SliceTimeout, StoreIOError, TableTooLarge, TableUnreadable
from cas.slicing._answer import Answer, Bounds
from cas.slicing._helper import HELPER
from cas.slicing._isolated import run_bounded, start_helper, stop_helper
from cas.slicing._reader import load_manifest, verified_object
from cas.slicing._slice import SliceRequest, read_slice
from cas.slicing._tables import PARQUET
from cas.slicing._threads import Passed, threads

MIB = 1 << 20
TABLE = pa.table(
    {"k": pa.array(range(20_000), pa.int64()), "s": [f"v{i % 7}" for i in range(20_000)]}
)


def _parquet() -> bytes:
    sink = io.BytesIO()
    pq.write_table(TABLE, sink, row_group_size=4_000)
    return sink.getvalue()


@pytest.fixture
def source(ws):
    ws.export("t.parquet", _parquet())
    store = ws.store()
    card = ws.record(store, "t.parquet", media_type=PARQUET).card
    return store.locate(card.experiment_id).source


@pytest.fixture
def helper():
    stop_helper()
    start_helper()
    yield HELPER
    stop_helper()


@pytest.fixture
def reader(source):
    with verified_object(source, load_manifest(source), max_read_bytes=MIB) as opened:
        yield opened


# -- works, run in the child ------------------------------------------------------------------


def _parent() -> Answer:
    return Answer({"parent": os.getppid()})


def _hog() -> Answer:
    return Answer(len(bytearray(512 * MIB)))


def _pause() -> Answer:
    signal.pause()
    return Answer(None)


def _environment(name: str) -> Answer:
    return Answer(os.environ.get(name))


def _big_answer() -> Answer:
    return Answer(None, bytes(2 * MIB))


def _say_then_pause(fd: int) -> Answer:
    os.write(fd, b"reading")
    signal.pause()
    return Answer(None)


def _first_bytes(reader) -> Answer:
    reader.seek(0)
    return Answer(bytes(reader.read(4)).decode("ascii"))


# -- the helper -------------------------------------------------------------------------------


def test_a_pinned_helper_forks_every_child_and_stays_single_threaded(helper, reader):
    answer = run_bounded(_parent, reader, Bounds()).value
    assert answer["parent"] == helper.pid != os.getpid()
    assert len(os.listdir(f"/proc/{helper.pid}/task")) == 1  # pyarrow and numpy loaded, one thread


def test_a_process_with_threads_reads_through_the_helper_unasked(reader):
    stop_helper()
    release = threading.Event()
    extra = threading.Thread(target=release.wait)
    extra.start()
    try:
        assert threads() > 1
        answer = run_bounded(_parent, reader, Bounds()).value
        assert answer["parent"] == HELPER.pid != os.getpid()
    finally:
        release.set()
        extra.join()
        stop_helper()


def test_a_single_threaded_process_forks_its_own_child(tmp_path):
    """In a fresh interpreter with one thread, the child's parent is the caller itself."""
    probe = (
        "import os, sys\n"
        "from cas.slicing._helper import threads\n"
        "from cas.slicing._answer import Answer, Bounds\n"
        "from cas.slicing._isolated import run_bounded\n"
        "from cas.slicing._reader import VerifiedReader\n"
        "from fsedge import ChunkManifest\n"
        "def parent():\n"
        "    return Answer(os.getppid())\n"
        "assert threads() == 1, threads()\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "reader = VerifiedReader(fd, ChunkManifest(0, 4 << 20, ()), max_read_bytes=1)\n"
        "print(run_bounded(parent, reader, Bounds()).value == os.getpid())\n"
    )
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    done = subprocess.run(
        [sys.executable, "-c", probe, str(empty)], capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "True", done.stderr


def test_the_child_sees_the_callers_environment_at_the_read(helper, reader, monkeypatch):
    """Set after the helper started (credentials a bucket read needs): the child has it."""
    monkeypatch.setenv("ARTMEM_TEST_LATE", "late value")
    work = functools.partial(_environment, "ARTMEM_TEST_LATE")
    assert run_bounded(work, reader, Bounds()).value == "late value"
    monkeypatch.delenv("ARTMEM_TEST_LATE")
    assert run_bounded(work, reader, Bounds()).value is None


def test_the_helper_keeps_the_memory_bound(helper, reader):
    with pytest.raises(TableTooLarge) as caught:
        run_bounded(_hog, reader, Bounds(memory_bytes=64 * MIB))
    assert caught.value.limit == 64 * MIB
    assert run_bounded(_hog, reader, Bounds()).value == 512 * MIB  # unbounded, it grows


def test_the_helper_keeps_the_time_bound(helper, reader):
    with pytest.raises(SliceTimeout):
        run_bounded(_pause, reader, Bounds(seconds=0.3))
    assert run_bounded(_parent, reader, Bounds()).value["parent"] == helper.pid


def test_the_helper_keeps_the_answer_bound(helper, reader):
    with pytest.raises(TableUnreadable, match="more than it may"):
        run_bounded(_big_answer, reader, Bounds(answer_bytes=MIB))


def test_a_descriptor_crosses_and_the_reader_reads_verified_chunks(helper, reader):
    assert run_bounded(functools.partial(_first_bytes, reader), reader, Bounds()).value == "PAR1"
    assert reader.stats.chunks_verified == 1  # what the helper's child read, counted here


def test_a_helper_killed_mid_read_is_a_typed_error_and_the_next_read_works(helper, reader):
    said, say = os.pipe()
    try:
        work = functools.partial(_say_then_pause, Passed(say))
        with ThreadPoolExecutor(1) as pool:
            reading = pool.submit(run_bounded, work, reader, Bounds(seconds=120))
            assert os.read(said, 16) == b"reading"  # the child runs
            first = helper.pid
            os.kill(first, signal.SIGKILL)
            with pytest.raises(StoreIOError, match="helper"):
                reading.result()
    finally:
        os.close(said)
        os.close(say)
    answer = run_bounded(_parent, reader, Bounds()).value
    assert answer["parent"] == helper.pid != first


def test_reads_from_many_threads_at_once_all_agree(helper, source):
    request = SliceRequest(columns=("k", "s"), where="k >= 1000 and k < 9000 and s = 'v3'")
    expected = [k for k in range(1000, 9000) if k % 7 == 3]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: read_slice(source, request), range(16)))
    for result in results:
        assert result.table.column("k").to_pylist() == expected


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            children += [int(child) for child in listed.read().split()]
    return children


def test_the_worker_reads_tables_through_its_helper(tmp_path):
    """A real worker: its helper is its one child, and a Parquet record's footer is read there."""
    from conftest import fingerprint
    from host_helpers import caller, export, write_config
    from serve_helpers import ServeProcess

    config = write_config(tmp_path, "[tools]\nartifact_memory = true\n")[0]
    worker = ServeProcess(config)
    try:
        export(tmp_path, "t.parquet", _parquet())
        args = {
            "source_path": "t.parquet", "title": "Keys", "summary": "Keys and labels.",
            "query_fingerprint": fingerprint(), "source": "warehouse", "source_version": "v1",
        }  # fmt: skip
        call = {"v": 1, "id": "r", "op": "tools/call", "caller": caller(tmp_path),
                "params": {"name": "memory_artifact_record", "arguments": args}}  # fmt: skip
        recorded = worker.ask(call)
        assert recorded["ok"], recorded
        (helper,) = _children(worker.proc.pid)
        with open(f"/proc/{helper}/cmdline", "rb") as cmdline:
            assert b"cas.slicing._helper" in cmdline.read()
        shown = worker.ask({"v": 1, "id": 2, "op": "status", "caller": None})
        assert shown["ok"]
    finally:
        worker.ask({"v": 1, "id": 9, "op": "shutdown", "caller": None})
        code, _ = worker.close()
    assert code == 0
