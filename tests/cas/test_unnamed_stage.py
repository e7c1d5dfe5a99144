"""Files written beside an operator's path are unnamed until published: a kill leaves nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import fsedge._output as fs

CHILD = r"""
import sys
from fsedge._output import staged_beside
from fsedge._fs import write_all
with staged_beside(sys.argv[1]) as out:
    write_all(out.stage.fd, b"x" * (1 << 20))
    print(type(out.stage).__name__, flush=True)
    sys.stdin.read()  # killed here, before publishing
"""


def test_a_killed_writer_leaves_no_file(tmp_path):
    target = tmp_path / "out" / "result.csv"
    target.parent.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        kind = child.stdout.readline().strip()
        assert kind == "Unnamed"  # this system has O_TMPFILE and /proc
        assert list(target.parent.iterdir()) == []  # 1 MiB written, no name anywhere
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        child.stdin.close()
    assert list(target.parent.iterdir()) == []


@pytest.mark.parametrize("fallback", [False, True])
def test_write_new_publishes_whole_and_never_replaces(tmp_path, monkeypatch, fallback):
    if fallback:  # no /proc: the named, locked stage of old
        monkeypatch.setattr(fs, "_proc_fd", lambda fd: "/nonexistent/proc/fd")
    path = tmp_path / "a.bin"
    fs.write_new(str(path), [b"one", b"two"])
    assert path.read_bytes() == b"onetwo"
    with pytest.raises(FileExistsError):
        fs.write_new(str(path), [b"three"])
    fs.write_new(str(path), [b"four"], replace=True)
    assert path.read_bytes() == b"four"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_a_failing_writer_leaves_no_file(tmp_path):
    def chunks():
        yield b"partial"
        raise OSError(5, "input failed")

    with pytest.raises(fs.StoreIOError):
        fs.write_new(str(tmp_path / "a.bin"), chunks())
    assert list(tmp_path.iterdir()) == []


def test_a_file_appearing_meanwhile_is_not_replaced(tmp_path):
    path = tmp_path / "a.bin"
    with fs.staged_beside(str(path)) as out:
        fs.write_all(out.stage.fd, b"mine")
        path.write_bytes(b"theirs")  # another writer wins the name
        with pytest.raises(FileExistsError):
            out.publish()
    assert path.read_bytes() == b"theirs"
    assert os.listdir(tmp_path) == ["a.bin"]
