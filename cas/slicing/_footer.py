"""What a recorded table tells its card: its column names, and its shape where the footer has it.

A record of a table whose caller gave no `columns` (or no `shape`) takes them from the table, so
a search for a column name finds the result. The store calls `measure` on the staged bytes
after hashing them and before taking the commit lock; `with_facts` then merges what was read
into the caller's metadata (pure: given values win, and a re-record fills only what its card
lacks, so `revised_card` keeps everything else).

Reading is `describe` on the staged file: every byte proven against the manifest just computed,
in the bounded child of `_isolated`. pyarrow is imported only in that child, before its memory
bound: the recording process never loads it and keeps its small footprint. A table that cannot
be read (hostile, truncated, too wide, too slow) never fails the record: it is recorded without
the derived fields, and the record says why in a warning; except when the caller declared how
a CSV is read (`CardMetadata.table_read`): the table is then read with those options, and a
record whose options the table refuses (a column it lacks, a value a declared type cannot hold
in a file typed over its whole length) fails, saying so, rather than keep options no read could
use.
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING

import msgspec

from cards import CardMetadata, ExperimentCardV1, Limits
from cards.card import Column
from cards.errors import ArtifactError, InvalidInput, TableUnreadable
from cards.table_read import TableRead
from cas.slicing._limits import DEFAULT_SLICE_LIMITS, SliceLimits
from cas.slicing._media import (
    ARROW_FILE,
    DELIMITERS,
    PARQUET,
    SEPARATED,
    SUPPORTED_MEDIA_TYPES,
)
from fsedge import parse_manifest

if TYPE_CHECKING:  # loaded by the first table read: a record of other bytes never needs them
    from cas.slicing._answer import Answer
    from cas.slicing._reader import VerifiedReader

# A record waits for this; a slice or `show` may take the operator's full budget.
FOOTER_LIMITS = DEFAULT_SLICE_LIMITS.lowered(max_seconds=10)
MAX_NAME_CHARS = 256  # longer than any card column may be: the store skips it, knowing why
MAX_NPY_HEADER = 64 << 10
MAX_NPY_DIMENSIONS = 8  # as many as a card's shape holds
NPY = "application/x-npy"
_ANSWER_BYTES = 8 << 20
_NOTE_CHARS = 400


class TableFacts(msgspec.Struct, frozen=True):
    """A table's top-level column names (each cut to `MAX_NAME_CHARS`), their count, its rows."""

    columns: tuple[str, ...]
    width: int
    rows: int | None
    shape: tuple[int, ...] | None = None
    """An array's whole shape (a `.npy` header's), which a card takes as it is."""
    widened: tuple[str, ...] = ()
    """A CSV's columns read wider than their first block said (`CsvTable.notes`), and its
    delimiter when it is not a comma (`CsvTable.delimiter_note`)."""


def wanted(metadata: CardMetadata, existing: ExperimentCardV1 | None) -> bool:
    """Whether reading the table could fill a field that is neither given nor on the card."""
    if metadata.media_type not in SUPPORTED_MEDIA_TYPES:
        return False
    given = metadata.given
    if "table_read" in given and metadata.table_read is not None:
        return True  # the declared options are checked against the table
    columns = "columns" not in given and (existing is None or not existing.columns)
    shape = "shape" not in given and (existing is None or existing.shape is None)
    return columns or (shape and metadata.media_type in (PARQUET, ARROW_FILE))  # rows counted


class Measured(msgspec.Struct, frozen=True):
    """What reading a staged table gave: its facts (None if unread) and warnings saying why not."""

    facts: TableFacts | None = None
    warnings: tuple[str, ...] = ()

    def complete(
        self, metadata: CardMetadata, existing: ExperimentCardV1 | None, limits: Limits
    ) -> tuple[CardMetadata, tuple[str, ...]]:
        """`metadata` completed by `with_facts`, and every warning for the record."""
        merged, filled = with_facts(metadata, self.facts, existing, limits)
        widened = () if self.facts is None else self.facts.widened
        hint = "; every read does the same (declare a type with --csv-type to choose another)"
        notes = (note + ("" if note.startswith(SEPARATED) else hint) for note in widened)
        return merged, (*self.warnings, *filled, *notes)


NOT_MEASURED = Measured()


def measure(
    fd: int,
    manifest: bytes,
    metadata: CardMetadata,
    existing: ExperimentCardV1 | None,
    limits: SliceLimits = FOOTER_LIMITS,
) -> Measured:
    """The facts of the table staged at `fd`, if they could fill a field (see `wanted`).

    A table that cannot be read gives no facts and a warning saying why.
    """
    declared = metadata.table_read if "table_read" in metadata.given else None
    if declared is not None and metadata.media_type not in DELIMITERS:
        raise InvalidInput(
            "the --csv-* options (type, null, decimal, encoding) apply to CSV and TSV files; this "
            f"one is {metadata.media_type} (give --media-type text/csv if it is a CSV)"
        )
    if metadata.media_type == NPY:
        return _npy_measured(fd, metadata, existing)
    if not wanted(metadata, existing):
        return NOT_MEASURED
    try:
        return Measured(read_facts(fd, manifest, metadata.media_type, limits, declared))
    except ArtifactError as exc:
        if declared is not None and isinstance(exc, InvalidInput | TableUnreadable):
            raise InvalidInput(
                f"the declared csv types or null tokens do not fit the file: {exc.message}"
            ) from exc
        return Measured(
            None,
            (
                f"columns and shape were not read from the table ({exc.code}: {exc.message}); "
                "recorded without them",
            ),
        )


def _npy_measured(fd: int, metadata: CardMetadata, existing: ExperimentCardV1 | None) -> Measured:
    """A NumPy array's shape, from its header: the card's `shape`, as a table's rows × columns."""
    if "shape" in metadata.given or (existing is not None and existing.shape is not None):
        return NOT_MEASURED
    try:
        _, shape = npy_header(fd)
    except TableUnreadable as exc:
        return Measured(None, (f"the shape was not read from the array ({exc.message})",))
    return Measured(TableFacts((), len(shape), None, shape=shape))


def npy_header(fd: int) -> tuple[str, tuple[int, ...]]:
    """The dtype and shape a `.npy` file's header declares (format versions 1 to 3).

    The header is a Python dict literal of at most `MAX_NPY_HEADER` bytes, parsed with
    `ast.literal_eval` (literals only, never code).

    Raises:
        TableUnreadable: the header is malformed, too long, or not an array's.
    """
    import ast

    head = os.pread(fd, 12, 0)
    if len(head) < 10 or head[:6] != b"\x93NUMPY" or head[6] not in (1, 2, 3):
        raise TableUnreadable("not a .npy file")
    size, start = (
        (int.from_bytes(head[8:10], "little"), 10)
        if head[6] == 1
        else (int.from_bytes(head[8:12], "little"), 12)
    )
    if size > MAX_NPY_HEADER:
        raise TableUnreadable(f"the .npy header is longer than {MAX_NPY_HEADER} bytes")
    raw = os.pread(fd, size, start)
    try:
        header = ast.literal_eval(raw.decode("latin-1" if head[6] < 3 else "utf-8"))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as exc:
        raise TableUnreadable("the .npy header is not a dict literal") from exc
    descr = header.get("descr") if isinstance(header, dict) else None
    shape = header.get("shape") if isinstance(header, dict) else None
    if (
        not isinstance(shape, tuple)
        or len(shape) > MAX_NPY_DIMENSIONS
        or not all(type(n) is int and 0 <= n < 2**63 for n in shape)
    ):
        raise TableUnreadable("the .npy header has no valid shape")
    return str(descr)[:MAX_NAME_CHARS], shape


def read_facts(
    fd: int,
    manifest: bytes,
    media_type: str,
    limits: SliceLimits = FOOTER_LIMITS,
    read: TableRead | None = None,
) -> TableFacts:
    """Read the column names and row count of the table open at `fd` (never closed here).

    Raises:
        UnsupportedMediaType: `media_type` is not a table format slicing reads.
        TableUnreadable: the bytes are not a readable table of `media_type`.
        TableTooLarge: its footer, width or first block exceeds `limits`.
        SliceTimeout: reading took longer than `limits.max_seconds`.
        IntegrityError: the staged bytes differ from `manifest`.
        StoreIOError: the bytes could not be read, or the reader could not be started.
    """
    from cas.slicing._answer import Bounds
    from cas.slicing._isolated import run_bounded
    from cas.slicing._reader import VerifiedReader

    reader = VerifiedReader(
        os.dup(fd), parse_manifest(manifest), max_read_bytes=limits.max_read_bytes
    )
    try:
        work = functools.partial(_facts_in_child, reader, media_type, limits, read)
        bounds = Bounds(limits.max_seconds, limits.max_memory_bytes, _ANSWER_BYTES)
        answer = run_bounded(work, reader, bounds, prepare=_load_readers)
    finally:
        reader.close()
    return _facts_from_answer(answer.value)


def _load_readers() -> None:
    from cas.slicing._threads import import_readers  # pyarrow, before the child's memory bound

    import_readers()


def _facts_in_child(
    reader: VerifiedReader, media_type: str, limits: SliceLimits, read: TableRead | None
) -> Answer:
    from cas.slicing._answer import Answer
    from cas.slicing._slice import describe_work

    info = describe_work(reader, media_type, limits, read).value
    assert isinstance(info, dict)
    names = [str(field["name"])[:MAX_NAME_CHARS] for field in info["fields"]]
    widened = [_without_value(str(note))[:_NOTE_CHARS] for note in info["notes"]]
    widened = [note for note in widened if note]
    return Answer(
        {"columns": names, "width": len(names), "rows": info["num_rows"], "widened": widened}
    )


_WIDENED = re.compile(
    r"(column .*) holds .* (in row \d+ \(the header is row 1\)|after the first block): read as (.*)"
)


def _without_value(note: str) -> str:
    """A widening note without the cell value it quotes (a record's warning may reach a model).

    The note of a CSV's delimiter other than a comma quotes nothing, and is kept as it is.
    """
    if note.startswith(SEPARATED):
        return note
    found = _WIDENED.fullmatch(note)
    if found is None:
        return ""
    column, where, types = found.groups()
    return f"{column} is read as {types}: a value {where} does not fit"


def _facts_from_answer(value: object) -> TableFacts:
    """Check the child's answer: a child that read a hostile table is not trusted blindly."""
    if isinstance(value, dict):
        names, width, rows = value.get("columns"), value.get("width"), value.get("rows")
        widened = value.get("widened", [])
        if (
            isinstance(names, list)
            and all(isinstance(name, str) for name in names)
            and isinstance(width, int)
            and width == len(names)
            and (rows is None or (isinstance(rows, int) and rows >= 0))
            and isinstance(widened, list)
            and len(widened) <= width
            and all(isinstance(n, str) and len(n) <= _NOTE_CHARS for n in widened)
        ):
            return TableFacts(tuple(names), width, rows, widened=tuple(widened))
    raise TableUnreadable("the table's reader answered nonsense")


def with_facts(
    metadata: CardMetadata,
    facts: TableFacts | None,
    existing: ExperimentCardV1 | None,
    limits: Limits,
) -> tuple[CardMetadata, tuple[str, ...]]:
    """`metadata` with `columns` and `shape` from `facts` where neither it nor `existing` has them.

    The filled fields count as given, so a re-record writes them onto a card that lacked them;
    a field the caller gave (even empty: that clears it) or the card already has is left alone.
    Columns are the table's names in schema order that fit a card column (one line of text,
    within `limits.column_chars`, not repeated), the first `limits.columns` of them.
    """
    if facts is None:
        return metadata, ()
    given = metadata.given
    updates: dict[str, object] = {}
    warnings: tuple[str, ...] = ()
    if "columns" not in given and (existing is None or not existing.columns):
        names, warnings = card_columns(facts, limits)
        if names:
            updates["columns"] = names
    if "shape" not in given and (existing is None or existing.shape is None):
        if facts.shape is not None:
            updates["shape"] = list(facts.shape)
        elif facts.rows is not None:
            updates["shape"] = [facts.rows, facts.width]
    if "summary" in metadata.defaults and existing is None:
        updates["summary"] = f"{metadata.summary} {shape_sentence(metadata.media_type, facts)}"
    if not updates:
        return metadata, warnings
    return metadata.with_values(updates, given=True), warnings  # checked by the card's rules


_KINDS = {
    PARQUET: "A Parquet table",
    ARROW_FILE: "An Arrow IPC table",
    "text/csv": "A CSV table",
    "text/tab-separated-values": "A TSV table",
    "application/jsonl": "A JSON Lines table",
    "application/x-ndjson": "A JSON Lines table",
}
_NAMED = 8  # column names a default summary lists


def shape_sentence(media_type: str, facts: TableFacts) -> str:
    """What a table is, in a sentence, for a summary a person left to its default."""
    if facts.shape is not None:
        return f"A NumPy array of shape {' × '.join(f'{n:,}' for n in facts.shape)}."
    kind = _KINDS.get(media_type, "A table")
    rows = "" if facts.rows is None else f", {facts.rows:,} row{'s' * (facts.rows != 1)}"
    fit = [name for name in facts.columns[: 4 * _NAMED] if _fits(name)][:_NAMED]
    names = [name if len(name) <= 40 else name[:39] + "…" for name in fit]
    listed = ", ".join(names) + (", …" if facts.width > len(names) else "")
    columns = f"{facts.width:,} column{'s' * (facts.width != 1)}"
    return f"{kind}{rows}, {columns}" + (f": {listed}." if listed else ".")


def card_columns(facts: TableFacts, limits: Limits) -> tuple[list[str], tuple[str, ...]]:
    """The names a card lists, and warnings for names left out."""
    kept: list[str] = []
    seen: set[str] = set()
    skipped = 0
    for name in facts.columns:
        if len(kept) == limits.columns:
            break
        if len(name) > limits.column_chars or name in seen or not _fits(name):
            skipped += 1
        else:
            kept.append(name)
            seen.add(name)
    warnings = []
    if len(kept) == limits.columns and facts.width > len(kept) + skipped:
        warnings.append(
            f"the table has {facts.width} columns; the card lists the first {len(kept)} "
            f"(the bound of {limits.columns})"
        )
    if skipped:
        warnings.append(
            f"{skipped} column name(s) not listed on the card: longer than "
            f"{limits.column_chars} characters, not one line of text, or repeated"
        )
    return kept, tuple(warnings)


def _fits(name: str) -> bool:
    try:
        msgspec.convert(name, Column)
    except msgspec.ValidationError:
        return False
    return True
