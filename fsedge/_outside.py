"""Destinations an operator names (`export`, `slice --out`) must lie outside the store's roots.

An `--out` or `export --force` path inside the artifact root or the state root could replace an
object, a card or the project lock, or drop files that `fsck` then reports. A path string proves
nothing (symlinked parents, bind mounts, `..`, a rename meanwhile), so the check starts from the
directory descriptor the file will be published through and walks its parents with `..`,
comparing each by device and inode with the roots' directories.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cards.errors import PathRejected

MAX_DEPTH = 4096  # far deeper than any real tree; a loop cannot hold the walk


def refuse_inside(dir_fd: int, roots: Sequence[str]) -> None:
    """Refuse the directory open at `dir_fd` if it is one of `roots` or lies below one.

    A root that does not exist protects nothing yet and is skipped.

    Raises:
        PathRejected: the directory is, or is inside, one of `roots`.
    """
    guarded: dict[tuple[int, int], str] = {}
    for root in roots:
        try:
            st = os.stat(root)  # where the root really is, symlinked or not
        except OSError:
            continue
        guarded[(st.st_dev, st.st_ino)] = root
    if not guarded:
        return
    fd = os.dup(dir_fd)
    try:
        for _ in range(MAX_DEPTH):
            here = os.fstat(fd)
            managed = guarded.get((here.st_dev, here.st_ino))
            if managed is not None:
                raise PathRejected(
                    f"the destination lies inside {managed}, which artmem manages: writing there "
                    "could replace a stored object, card or lock; choose a path outside it"
                )
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = parent
            above = os.fstat(fd)
            if (above.st_dev, above.st_ino) == (here.st_dev, here.st_ino):
                return  # the filesystem root is its own parent
    finally:
        os.close(fd)
