"""Hashing a kernel's export: in place (not reading on while it grows), or as it is copied."""

from __future__ import annotations

import hashlib
import os

import pytest

from cards.errors import ArtifactTooLarge, StoreIOError
from cas._chunks import CHUNK_BYTES
from cas._hashing import copy_and_hash, hash_export, hash_fd


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


@pytest.mark.parametrize("writeback", [True, False])
@pytest.mark.parametrize(
    "size", [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES + 3]
)
def test_a_copy_holds_every_byte_and_the_digests_of_a_pass_over_them(tmp_path, size, writeback):
    # One chunk is hashed in the copying thread, several through the hashing thread.
    data = os.urandom(size)
    (tmp_path / "src").write_bytes(data)
    src = os.open(tmp_path / "src", os.O_RDONLY)
    dst = os.open(tmp_path / "dst", os.O_RDWR | os.O_CREAT)
    try:
        digests = copy_and_hash(src, dst, limit=size, writeback=writeback)
        assert digests == hash_fd(dst)
        assert digests.sha256 == hashlib.sha256(data).digest()
    finally:
        os.close(src)
        os.close(dst)
    assert (tmp_path / "dst").read_bytes() == data


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
