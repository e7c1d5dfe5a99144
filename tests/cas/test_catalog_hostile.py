"""Whatever is under the catalog directory that is not what we wrote: a rebuild, never a crash.

Damaged, truncated or swapped files, and a FIFO, a symlink, a directory or a 1 GB file in place
of any of them: the next open rebuilds from the card files (or, where it cannot write, answers
from memory), finds what the cards say, never raises, never hangs, and stays within 64 MiB of its
baseline. A forged index (damaged, then given checksums that match) never raises either, and
every hit it gives is true; it may hide cards until `fsck` finds them and `--repair` rebuilds.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from catalog_helpers import hit_ids, record_numbered

from cas import LocalCatalog
from cas import _catalog_files as files
from cas._catalog_files import Head
from cas._catalog_table import Row

REPO = Path(__file__).parents[2]
MIB = 1 << 20

_PROBE = """
import json, resource, sys
from cas import LocalCatalog, ProjectStore
store = ProjectStore(sys.argv[1], "trial-analysis")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
catalog = LocalCatalog.open(store, sys.argv[2])
hits = [hit.card.experiment_id for hit in catalog.search("gene", 20)]
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(json.dumps({"hits": hits, "grown_kib": grown, "how": catalog.last_refresh}))
"""


@pytest.fixture
def saved(ws, tmp_path):
    """A project of 12 cards saying "Genes", its saved catalog, and a pristine copy of it."""
    store = ws.store()
    cards = [record_numbered(ws, store, n, title=f"Genes of run {n}") for n in range(12)]
    state = tmp_path / "state"
    catalog = LocalCatalog.open(store, str(state))
    path = Path(catalog.path or "")
    pristine = tmp_path / "pristine"
    shutil.copytree(path, pristine)
    expected = sorted(card.experiment_id for card in cards)
    return store, state, path, pristine, expected


def _restore(path: Path, pristine: Path) -> Head:
    shutil.rmtree(path)
    shutil.copytree(pristine, path)
    head = files.decode((path / files.HEAD).read_bytes(), Head)
    assert head is not None
    return head


def _targets(path: Path, head: Head) -> list[Path]:
    generation = path / head.generation
    inner = [generation / name for name in sorted(head.manifest)]
    return [path / files.HEAD, path / files.TABLE, path / files.LOCK, generation, *inner, path]


def _swap(target: Path, kind: str, elsewhere: Path) -> None:
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":  # to bytes that are exactly right, still not ours to follow
        target.symlink_to(elsewhere)
    elif kind == "directory":
        target.mkdir()
        (target / "meta.json").write_bytes(b"{}")
    else:  # 1 GB, sparse
        with open(target, "wb") as file:
            file.truncate(1 << 30)


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "gigabyte"])
def test_a_special_or_huge_file_in_place_of_any_catalog_file_means_a_rebuild(saved, kind):
    store, state, path, pristine, expected = saved
    head = _restore(path, pristine)
    for number, target in enumerate(_targets(path, head)):
        head = _restore(path, pristine)
        elsewhere = pristine / target.relative_to(path) if target != path else pristine
        _swap(target, kind, elsewhere)
        argv = [sys.executable, "-c", _PROBE, str(store.artifact_root), str(state)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
        assert done.returncode == 0 and not done.stderr, (target.name, done.stderr[-2000:])
        result = json.loads(done.stdout)
        assert sorted(result["hits"]) == expected, target.name
        assert result["grown_kib"] * 1024 <= 64 * MIB, (target.name, result)
        assert result["how"] in {"build", "log", "scan"}, (target.name, result)
        if number < 3:  # our own small files: the rest of the index was still used
            continue
        again = LocalCatalog.open(store, str(state))  # rebuilt and saved: current now
        assert sorted(hit_ids(again.search("gene", 20))) == expected


def _mutated(data: bytes, rng: random.Random) -> bytes:
    how = rng.randrange(6)
    if how == 0 and data:  # a few flipped bits
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        return bytes(flipped)
    if how == 1:
        return data[: rng.randrange(len(data) + 1)]
    if how == 2:
        return rng.randbytes(rng.randint(0, 4096))
    if how == 3:
        return bytes(len(data))
    if how == 4:
        return data + rng.randbytes(rng.randint(1, 1 << 16))
    return b""


def _forged_head(head: Head, rng: random.Random) -> Head:
    """A head with a valid checksum and a field that is not what we wrote."""
    fields = {name: getattr(head, name) for name in head.__struct_fields__}
    name = next(iter(head.manifest))
    choices = [
        {"generation": "../" + head.generation},
        {"generation": "g-" + "0" * 16},
        {"manifest": {**head.manifest, "../../head": (10, "0" * 16)}},
        {"manifest": {**head.manifest, name: (-5, head.manifest[name][1])}},
        {"manifest": {**head.manifest, name: (1 << 40, head.manifest[name][1])}},
        {"manifest": {}},
        {"table": "0" * 16},
        {"cards": -3, "skipped": 1 << 62, "states": {"\x1b]52;": 1}},
        {"mark": (1, 2, b"x", 1 << 62, b"y")},
    ]
    return Head(**{**fields, **rng.choice(choices)})


def _forged_table(rng: random.Random) -> dict[str, Row]:
    """A table with a valid checksum whose rows name what is not a card file."""
    bad = rng.choice(["../../etc/passwd", "exp_x.json", "\x00", "exp_" + "a" * 52 + ".json/.."])
    return {bad: Row((1, 2, 3), None, "disabled", 0, 0, True)}


def _fuzz(saved, count: int, *, forge: bool) -> None:
    store, state, path, pristine, expected = saved
    rng = random.Random(20261202 + forge)
    for _ in range(count):
        head = _restore(path, pristine)
        if forge and rng.random() < 0.3:
            if rng.random() < 0.5:
                (path / files.HEAD).write_bytes(files.encode(_forged_head(head, rng)))
            else:
                raw = files.encode(_forged_table(rng))
                (path / files.TABLE).write_bytes(raw)
                head.table = files.digest_of(raw)
                (path / files.HEAD).write_bytes(files.encode(head))
        else:
            target = rng.choice(
                [path / files.HEAD, path / files.TABLE, *_targets(path, head)[4:-1]]
            )
            target.write_bytes(_mutated(target.read_bytes(), rng))
            if forge:  # and the manifest signed again: tantivy itself reads the damage
                generation = str(path / head.generation)
                head.manifest = files.manifest(generation, {})
                (path / files.HEAD).write_bytes(files.encode(head))
        catalog = LocalCatalog.open(store, str(state))
        found = sorted(hit_ids(catalog.search("gene", 20)))
        if forge:  # consistent with its checksums: hits are true, but may be missing ...
            assert set(found) <= set(expected)
            if found != expected:  # ... until `fsck --repair` rebuilds it
                assert catalog.check(repair=True).repaired
                found = sorted(hit_ids(catalog.search("gene", 20)))
        assert found == expected
        assert catalog.cards == len(expected) and catalog.skipped == 0


def _fuzzed_within_bounds(saved, count: int) -> None:
    _fuzz(saved, 3, forge=False)  # the rebuild's own first use, before the baseline
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _fuzz(saved, count, forge=False)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024 <= 64 * MIB


def test_damaged_catalog_files_are_rebuilt_within_bounds(saved):
    _fuzzed_within_bounds(saved, 60)


def test_forged_catalog_files_with_valid_checksums_are_rebuilt(saved):
    _fuzz(saved, 60, forge=True)


@pytest.mark.slow
def test_six_hundred_damaged_catalog_files_are_rebuilt_within_bounds(saved):
    _fuzzed_within_bounds(saved, 600)


@pytest.mark.slow
def test_six_hundred_forged_catalog_files_are_rebuilt(saved):
    _fuzz(saved, 600, forge=True)
