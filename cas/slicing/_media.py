"""The media types slicing reads, by name only, so the store can ask without loading pyarrow.

Parquet and Arrow IPC files carry a footer with their schema. CSV, TSV and JSON Lines carry none:
their readers (`_text_tables`) infer the schema from a bounded first block. The store records
JSON Lines as `application/jsonl` (see `cas._sniff`); `application/x-ndjson` is the older name
a caller may give, and is read the same way.
"""

from __future__ import annotations

from cards.errors import UnsupportedMediaType

PARQUET = "application/vnd.apache.parquet"
ARROW_FILE = "application/vnd.apache.arrow.file"
CSV = "text/csv"
TSV = "text/tab-separated-values"
JSONL = "application/jsonl"
NDJSON = "application/x-ndjson"
FOOTED_MEDIA_TYPES = (PARQUET, ARROW_FILE)
TEXT_MEDIA_TYPES = (CSV, TSV, JSONL, NDJSON)
SUPPORTED_MEDIA_TYPES = (*FOOTED_MEDIA_TYPES, *TEXT_MEDIA_TYPES)
DELIMITERS = {CSV: ",", TSV: "\t"}
SEPARATED = "values are separated by "
"""How the note of a CSV read with another delimiter than a comma begins (`sniff_delimiter`)."""


def check_media_type(media_type: str) -> str:
    """Accept a media type slicing can read.

    Raises:
        UnsupportedMediaType: any other media type.
    """
    if media_type not in SUPPORTED_MEDIA_TYPES:
        raise UnsupportedMediaType(media_type, SUPPORTED_MEDIA_TYPES)
    return media_type
