"""Writing a result where the host will accept it: `$RLM_SESSION_DIR/exports/`, atomically."""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from cards.errors import InvalidInput, NotInKernel

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def exports_dir() -> Path:
    """The current session's exports directory (created 0700 if missing).

    Raises:
        NotInKernel: `RLM_SESSION_DIR` is not set.
    """
    session = os.environ.get("RLM_SESSION_DIR")
    if not session:
        raise NotInKernel("RLM_SESSION_DIR is not set: not inside a kernel")
    exports = Path(session) / "exports"
    exports.mkdir(mode=0o700, exist_ok=True)
    return exports


def export_table(table: object, name: str) -> Path:
    """Write a pyarrow Table (or a pandas DataFrame) as Parquet into exports/, atomically.

    The file appears under its final name only complete and fsynced; a crash leaves at most a
    hidden partial file. Returns the path to pass to `record`.

    Raises:
        InvalidInput: the name is not a plain file name, or the object is not a table.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not name.endswith(".parquet"):
        name += ".parquet"
    if _NAME.fullmatch(name) is None:
        raise InvalidInput("the name must be a plain file name")
    if not isinstance(table, pa.Table):
        try:
            table = pa.Table.from_pandas(table, preserve_index=False)
        except (TypeError, ValueError, AttributeError, ImportError) as exc:
            raise InvalidInput("expected a pyarrow Table or a DataFrame") from exc
    exports = exports_dir()
    final = exports / name
    partial = exports / f".{name}.{secrets.token_hex(6)}.partial"
    try:
        pq.write_table(table, partial, compression="zstd")
        fd = os.open(partial, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(partial, final)
        dir_fd = os.open(exports, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    finally:
        partial.unlink(missing_ok=True)
    return final
