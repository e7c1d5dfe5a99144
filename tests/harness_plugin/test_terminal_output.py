"""What people see: rich bars and tables on a terminal only; plain text for pipes and files."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

from host_helpers import write_config

from harness_plugin._progress import progress_for, table_lines


def test_no_bar_for_a_pipe_or_for_json():
    assert progress_for(io.StringIO(), "x", enabled=True) is None
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as terminal:
            assert progress_for(terminal, "x", enabled=False) is None
    finally:
        os.close(master)
        os.close(slave)


def test_a_bar_is_drawn_on_a_terminal_and_cleared():
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as terminal:
            bar = progress_for(terminal, "recording", enabled=True)
            assert bar is not None
            bar.start(10 << 20)
            for _ in range(10):
                bar.advance(1 << 20)
            bar.close()
            terminal.flush()
        os.close(slave)
        slave = -1
        drawn = _read_all(master).decode(errors="replace")
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert "recording" in drawn and "MiB" in drawn


def _read_all(master: int) -> bytes:
    """Everything written to the terminal: a pty's master reads until its slave is closed."""
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the slave side is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_plain_tables_align_and_right_align_numbers():
    lines = table_lines(["name", "n"], [["alpha", "5"], ["b", "120"]], terminal=False)
    assert lines == ["name     n", "alpha    5", "b      120"]


def test_terminal_tables_come_from_rich():
    lines = table_lines(["name", "n"], [["alpha", "5"]], terminal=True)
    assert any("alpha" in line for line in lines) and "\x1b[" in lines[0]  # styled header


def test_status_shows_project_ids_beside_keys_as_a_table(tmp_path):
    config, root = write_config(tmp_path)
    artmem = str(Path(sys.executable).parent / "artmem")
    env = {**os.environ, "ARTMEM_CONFIG": str(config)}
    out = subprocess.run([artmem, "status"], env=env, cwd=root, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    header = next(line for line in out.splitlines() if line.startswith("project"))
    assert header.split()[:3] == ["project", "key", "cards"]
    assert "trial-analysis" in out and "prj_" in out and "{" not in out
    json_out = subprocess.run([artmem, "status", "--json"], env=env, cwd=root,
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "trial-analysis" not in json_out  # the JSON view (and memory_status) stays key-only
