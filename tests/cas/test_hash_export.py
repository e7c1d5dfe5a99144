"""A record hashes a kernel's export in place without reading on while it grows."""

from __future__ import annotations

import os

import pytest

from cards.errors import StoreIOError
from cas._chunks import CHUNK_BYTES
from cas._hashing import hash_export, hash_fd


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
