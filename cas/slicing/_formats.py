"""Opening a verified object as a table of its media type: footed (Parquet, Arrow) or text.

Footed formats have their trailer (magic bytes and footer length) checked against the bounds
before pyarrow parses anything; text formats are typed from a bounded first block (a CSV's
columns then over its whole file: `settle_types`). Either way
the column count is capped before a scan is planned.
"""

from __future__ import annotations

from collections.abc import Iterable

from cards.errors import InvalidInput
from cards.table_read import TableRead
from cas.slicing._json_lines import JsonLinesTable
from cas.slicing._limits import TableBounds
from cas.slicing._media import DELIMITERS, PARQUET, TEXT_MEDIA_TYPES, check_media_type
from cas.slicing._reader import VerifiedReader
from cas.slicing._tables import IpcTable, ParquetTable, TableFile, check_trailer, check_width
from cas.slicing._text_tables import CsvTable


def open_table(
    media_type: str, reader: VerifiedReader, bounds: TableBounds, read: TableRead | None = None
) -> TableFile:
    """Open a verified object as a table of `media_type`, checking its metadata bounds.

    `read` declares column types and null tokens of a CSV or TSV (`cards.table_read`).

    Raises:
        UnsupportedMediaType: `media_type` is not supported.
        InvalidInput: `read` is given for another format, or names a column the CSV lacks.
        TableUnreadable: the trailer, metadata or first block is malformed.
        TableTooLarge: the footer, the column count or a first-block row exceeds `bounds`.
        IntegrityError: a chunk read differs from its manifest digest.
    """
    check_media_type(media_type)
    table: TableFile
    if read is not None and media_type not in DELIMITERS:
        raise InvalidInput(
            "csv read options (types, null tokens, decimal mark, encoding) apply to CSV and TSV "
            f"tables; this one is {media_type}"
        )
    if media_type in DELIMITERS:
        table = CsvTable(reader, bounds, DELIMITERS[media_type], read)
    elif media_type in TEXT_MEDIA_TYPES:
        table = JsonLinesTable(reader, bounds)
    else:
        check_trailer(reader, media_type, bounds)
        table = (ParquetTable if media_type == PARQUET else IpcTable)(reader, bounds)
    check_width(len(table.schema.names), bounds)  # decoding every name raises UnicodeError early
    return table


def settle_types(table: TableFile, names: Iterable[str], *, always: bool = False) -> None:
    """Type the columns `names` of a CSV over its whole file, if it is small or `always`.

    A JSON Lines file finds the fields `names` its first block lacks, and types them over the
    whole file if `always` (a small one is typed so when opened). Other formats' types hold for
    the whole file already.

    Raises:
        TableUnreadable: the file cannot be read to its end.
        TableTooLarge: a row or value is longer than a block.
    """
    if isinstance(table, CsvTable) and (always or table.whole_file):
        table.settle(names)
    elif isinstance(table, JsonLinesTable):
        table.settle(names, always=always)


def type_notes(table: TableFile) -> list[str]:
    """What reading the table changed in its inferred types (a text table's widened columns)."""
    return list(table.notes) if isinstance(table, CsvTable | JsonLinesTable) else []
