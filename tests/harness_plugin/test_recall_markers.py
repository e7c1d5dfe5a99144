"""Recall's turn markers: pruned when idle, counted by a dry run, and never an error in a race."""

from __future__ import annotations

import os
from pathlib import Path

from harness_plugin.memory._recall_search import _old_markers, count_markers, prune_markers

OLD = 1_000_000_000  # 2001


def _markers(root: Path) -> int:
    for name in ("a.turn", "b.turn", "c.tmp", "keep.json"):
        path = root / name
        path.write_bytes(b"{}")
        os.utime(path, (OLD, OLD))
    (root / "fresh.turn").write_bytes(b"{}")
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY)


def test_idle_markers_are_counted_then_pruned_and_nothing_else(tmp_path: Path):
    fd = _markers(tmp_path)
    try:
        assert count_markers(fd, OLD + 1) == 3
        assert sorted(os.listdir(tmp_path)) == [
            "a.turn",
            "b.turn",
            "c.tmp",
            "fresh.turn",
            "keep.json",
        ]
        assert prune_markers(fd, OLD + 1) == 3
        assert sorted(os.listdir(tmp_path)) == ["fresh.turn", "keep.json"]
    finally:
        os.close(fd)


def test_a_marker_another_worker_prunes_during_the_scan_is_skipped(tmp_path: Path):
    fd = _markers(tmp_path)
    try:
        names = _old_markers(fd, OLD + 1)
        first = next(names)
        others = {"a.turn", "b.turn", "c.tmp"} - {first}
        for name in others:  # the other worker was faster
            os.unlink(tmp_path / name)
        assert list(names) == []
        assert count_markers(fd, OLD + 1) == 1
    finally:
        os.close(fd)
