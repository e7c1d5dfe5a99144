"""Reads that finish: whole positional reads, a small file read whole, a copy in the kernel.

`os.pread`, `os.read` and `copy_file_range` may each return less than asked; these loop until
the file ends or the count is met, and say so.
"""

from __future__ import annotations

import errno
import os

from cards.errors import StoreIOError


def pread_full(fd: int, length: int, offset: int) -> bytes:
    """`length` bytes of `fd` at `offset`, fewer only where the file ends (positional reads).

    Raises:
        OSError: the file could not be read.
    """
    parts: list[bytes] = []
    done = 0
    while done < length and (part := os.pread(fd, length - done, offset + done)):
        parts.append(part)
        done += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def pread_into(fd: int, buffer: bytearray | memoryview, offset: int) -> int:
    """Fill `buffer` from `offset` of `fd`; how many bytes, fewer only where the file ends.

    Raises:
        OSError: the file could not be read.
    """
    view = memoryview(buffer)
    filled = 0
    while filled < len(view) and (n := os.preadv(fd, [view[filled:]], offset + filled)):
        filled += n
    return filled


def copy_range(src_fd: int, dst_fd: int, count: int, offset: int) -> int:
    """Copy `count` bytes at `offset` of `src_fd` to the same offset of `dst_fd`, in the kernel.

    `copy_file_range(2)`: the bytes never pass through this process, and a filesystem that can
    share blocks may. Returns how many bytes were copied, fewer only where the source ends.

    Raises:
        OSError: the kernel cannot copy between these files (EXDEV, EINVAL, ENOSYS, ...: the
            caller copies itself), or the copy failed.
    """
    copy = getattr(os, "copy_file_range", None)
    if copy is None:
        raise OSError(errno.ENOSYS, "copy_file_range is not available")
    copied = 0
    while copied < count and (
        n := copy(src_fd, dst_fd, count - copied, offset + copied, offset + copied)
    ):
        copied += n
    return copied


def read_small(fd: int, max_bytes: int, size_hint: int = 65535) -> bytes:
    """Read a whole small file from `fd`, refusing anything larger than `max_bytes`.

    `size_hint` (e.g. from `fstat`) lets a file be read in one call; it is only a hint.

    Raises:
        StoreIOError: the file is larger than `max_bytes`.
    """
    chunks: list[bytes] = []
    total = 0
    step = min(max(size_hint, 0), max_bytes) + 1
    while chunk := os.read(fd, step):
        total += len(chunk)
        if total > max_bytes:
            raise StoreIOError(f"a store file is larger than {max_bytes} bytes")
        chunks.append(chunk)
        step = 65536
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
