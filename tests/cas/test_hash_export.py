"""Hashing a kernel's export: in place (not reading on while it grows), or as it is copied."""

from __future__ import annotations

import errno
import hashlib
import os
import threading

import pytest
import xxhash

import fsedge as fs_module
from cards.errors import ArtifactTooLarge, StoreIOError
from cas import _hashing as hashing_module
from cas._hashing import Digests, copy_and_hash, hash_export, hash_fd
from fsedge import CHUNK_BYTES


def test_an_export_larger_than_its_size_is_read_at_most_one_chunk_past_it(tmp_path):
    path = tmp_path / "growing.bin"
    path.write_bytes(os.urandom(5 * CHUNK_BYTES))  # as if it grew after its size was taken
    fd = os.open(path, os.O_RDONLY)
    try:
        size = CHUNK_BYTES + 1
        digests = hash_export(fd, size)
        assert size < digests.size <= size + CHUNK_BYTES  # larger: the caller refuses it
        assert hash_export(fd, 5 * CHUNK_BYTES) == hash_fd(fd)  # unchanged: the whole file
    finally:
        os.close(fd)


def test_an_export_that_cannot_be_read_is_a_typed_error(tmp_path):
    read_end, write_end = os.pipe()  # no positional reads on a pipe
    try:
        with pytest.raises(StoreIOError, match="cannot read the export"):
            hash_export(read_end, 10)
    finally:
        os.close(read_end)
        os.close(write_end)


def _no_kernel_copy(*args: object) -> int:
    raise OSError(errno.EXDEV, "Invalid cross-device link")


@pytest.mark.parametrize("kernel", [True, False], ids=["copy_file_range", "read-write"])
@pytest.mark.parametrize(
    "size", [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES + 3]
)
def test_a_copy_holds_every_byte_and_the_digests_of_a_pass_over_them(
    tmp_path, monkeypatch, size, kernel
):
    # One chunk is hashed in the copying thread, several through the hashing thread; the
    # buffers are reused, so a buffer read into too early would change earlier digests.
    if not kernel:
        monkeypatch.setattr(os, "copy_file_range", _no_kernel_copy)
    data = os.urandom(size)
    (tmp_path / "src").write_bytes(data)
    src = os.open(tmp_path / "src", os.O_RDONLY)
    dst = os.open(tmp_path / "dst", os.O_RDWR | os.O_CREAT)
    try:
        os.lseek(src, size // 2, os.SEEK_SET)  # copied from its start whatever its position
        assert copy_and_hash(src, dst, limit=size) == _digests_of(data)
        assert hash_fd(dst) == hash_fd(src) == _digests_of(data)
    finally:
        os.close(src)
        os.close(dst)
    assert (tmp_path / "dst").read_bytes() == data


def test_the_digests_are_those_of_the_copy_even_if_the_source_changes_meanwhile(
    tmp_path, monkeypatch
):
    (tmp_path / "src").write_bytes(os.urandom(3 * CHUNK_BYTES))
    src = os.open(tmp_path / "src", os.O_RDWR)
    dst = os.open(tmp_path / "dst", os.O_RDWR | os.O_CREAT)
    real = fs_module.copy_range

    def copy_then_rewrite(src_fd: int, dst_fd: int, count: int, offset: int) -> int:
        copied = real(src_fd, dst_fd, count, offset)
        os.pwrite(src_fd, os.urandom(copied), offset)  # a racing kernel, between copy and hash
        return copied

    monkeypatch.setattr(fs_module, "copy_range", copy_then_rewrite)
    try:
        digests = copy_and_hash(src, dst, limit=1 << 30)
    finally:
        os.close(src)
        os.close(dst)
    assert digests == _digests_of((tmp_path / "dst").read_bytes())
    assert digests != _digests_of((tmp_path / "src").read_bytes())


def test_a_kernel_copy_that_fails_after_the_first_chunk_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "src").write_bytes(os.urandom(2 * CHUNK_BYTES))
    calls = []

    def refuses_later(src: int, dst: int, count: int, *offsets: int) -> int:
        calls.append(offsets)
        if len(calls) > 1:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst, count, *offsets)

    real = os.copy_file_range
    monkeypatch.setattr(os, "copy_file_range", refuses_later)
    src = os.open(tmp_path / "src", os.O_RDONLY)
    dst = os.open(tmp_path / "dst", os.O_RDWR | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="cross-device"):  # never half one way, half the other
            copy_and_hash(src, dst, limit=1 << 30)
    finally:
        os.close(src)
        os.close(dst)


def _digests_of(data: bytes) -> Digests:
    """What one serial pass over `data` measures."""
    chunks = [data[at : at + CHUNK_BYTES] for at in range(0, len(data), CHUNK_BYTES)]
    digests = tuple(xxhash.xxh3_128_digest(chunk) for chunk in chunks)
    return Digests(len(data), hashlib.sha256(data).digest(), digests)


def test_a_failed_sha256_update_in_the_hashing_thread_reaches_the_caller(tmp_path, monkeypatch):
    (tmp_path / "src").write_bytes(os.urandom(3 * CHUNK_BYTES))

    class Failing:
        def __init__(self) -> None:
            self.updates = 0

        def update(self, data: object) -> None:
            self.updates += 1
            if self.updates == 2:
                raise MemoryError("no room")

        def digest(self) -> bytes:
            return b""

    monkeypatch.setattr(hashing_module.hashlib, "sha256", Failing)
    fd = os.open(tmp_path / "src", os.O_RDONLY)
    try:
        with pytest.raises(MemoryError, match="no room"):
            hash_fd(fd)
    finally:
        os.close(fd)
    assert [thread.name for thread in threading.enumerate()].count("artmem-sha256") == 0


@pytest.mark.parametrize("size", [10, CHUNK_BYTES + 10])
def test_a_copy_past_its_limit_stops_with_a_typed_error(tmp_path, size):
    (tmp_path / "src").write_bytes(os.urandom(size))
    src = os.open(tmp_path / "src", os.O_RDONLY)
    dst = os.open(tmp_path / "dst", os.O_RDWR | os.O_CREAT)
    try:
        with pytest.raises(ArtifactTooLarge):
            copy_and_hash(src, dst, limit=size - 1)
    finally:
        os.close(src)
        os.close(dst)
