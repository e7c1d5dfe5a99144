"""How a CSV or TSV result is read: declared column types, null tokens, decimal mark, encoding.

A person who knows a column better than the first block of its file declares its type, the
tokens that mean "no value", the decimal mark of its numbers and the file's text encoding
(`artmem record --csv-type x=float64 --csv-null NA --csv-decimal , --csv-encoding cp1252`).
The card keeps them (`ExperimentCardV1.table_read`), and every later read of the artifact (a
slice or export from the CLI, the notebook or a kernel) reads with them; a read may override
them for itself.
Declared null tokens add to the tokens every read treats as null (blank cells, `NA`, `null`,
`NaN`, ...), as pandas' `na_values` does.

Every caller's options pass `table_read`, so the CLI, the notebook and a kernel refuse the same
input with the same words. Nothing here is sent to Honcho: the remote projection is built from
an allowlist (`cards.remote`) that names neither field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Literal, get_args

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from cards._text_rules import LINE
from cards.errors import InvalidInput, excerpt
from cards.policy import DEFAULT_LIMITS

CsvType = Literal[
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "bool",
    "string",
    "date32",
    "timestamp[s]",
    "timestamp[ms]",
    "timestamp[us]",
    "timestamp[ns]",
]
CSV_TYPES: tuple[str, ...] = get_args(CsvType)
"""The types a column may be declared as: each one pyarrow's CSV reader converts text to."""
ALIASES = {
    "int": "int64",
    "integer": "int64",
    "float": "float64",
    "double": "float64",
    "str": "string",
    "text": "string",
    "utf8": "string",
    "boolean": "bool",
    "date": "date32",
    "timestamp": "timestamp[us]",
    "datetime": "timestamp[us]",
}
"""Common names of the allowed types, stored as the type they name."""
CsvEncoding = Literal["utf-8", "cp1252", "latin-1", "iso-8859-15"]
CSV_ENCODINGS: tuple[str, ...] = get_args(CsvEncoding)
"""The encodings a CSV may be declared in: UTF-8, and single-byte ones that keep ASCII's bytes
(the delimiter, quote and line-end checks read bytes)."""
ENCODING_ALIASES = {
    "utf8": "utf-8",
    "windows-1252": "cp1252",
    "latin1": "latin-1",
    "iso-8859-1": "latin-1",
    "iso8859-1": "latin-1",
    "latin-9": "iso-8859-15",
}
MAX_TYPES = DEFAULT_LIMITS.columns
MAX_NULLS = 32
NULL_CHARS = 64

_Name = Annotated[str, Meta(min_length=1, max_length=DEFAULT_LIMITS.column_chars, pattern=LINE)]
_Null = Annotated[str, Meta(min_length=1, max_length=NULL_CHARS, pattern=LINE)]


class TableRead(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Declared column types (by column name) and extra null tokens of a CSV or TSV table."""

    types: Annotated[dict[_Name, CsvType], Meta(max_length=MAX_TYPES)] = msgspec.field(
        default_factory=dict
    )
    nulls: Annotated[list[_Null], Meta(max_length=MAX_NULLS)] = msgspec.field(default_factory=list)
    decimal: Literal[".", ","] | UnsetType = UNSET
    """The decimal mark of every number in the table (`,`: 1,5 is 1.5); unset, a point. Left
    out of the card when unset, so cards declaring only types and tokens keep their bytes."""

    encoding: CsvEncoding | UnsetType = UNSET
    """The file's text encoding where it is not UTF-8 (a spreadsheet's "CSV" on Windows is
    often cp1252); unset, UTF-8. Left out of the card when unset."""

    def __post_init__(self) -> None:
        if len(set(self.nulls)) != len(self.nulls):
            raise ValueError("nulls names a token twice")
        if not self.types and not self.nulls and self.decimal is UNSET and self.encoding is UNSET:
            raise ValueError("declares nothing (leave the field out)")

    @property
    def text_encoding(self) -> str:
        """The encoding a read decodes the file with: the declared one, else UTF-8."""
        return "utf-8" if self.encoding is UNSET else self.encoding

    @property
    def decimal_point(self) -> str:
        """The decimal mark a read uses: the declared one, else a point."""
        return "." if self.decimal is UNSET else self.decimal


def table_read(
    types: Mapping[str, str] | None = None,
    nulls: Iterable[str] | None = None,
    decimal: str | None = None,
    encoding: str | None = None,
) -> TableRead | None:
    """Declared read options, checked; None when they declare nothing.

    `types` maps a column name to a type of `CSV_TYPES` (or a name of `ALIASES`); `nulls` are
    extra tokens read as null. Repeated null tokens count once. `decimal` is the numbers'
    decimal mark, `.` or `,`; `encoding` one of `CSV_ENCODINGS` (or a name of
    `ENCODING_ALIASES`). None: not declared.

    Raises:
        InvalidInput: a name, type or token is malformed, unknown or out of bounds; the message
            names the bad part (never more than a bounded excerpt of it) and what to do.
    """
    types = {} if types is None else types
    if not isinstance(types, Mapping):
        raise InvalidInput("csv types must map column names to types, e.g. {'x': 'float64'}")
    if len(types) > MAX_TYPES:
        raise InvalidInput(
            f"{len(types)} column types declared; at most {MAX_TYPES}: declare only the "
            "columns whose inferred type is wrong"
        )
    checked: dict[str, str] = {}
    for name, kind in types.items():
        _check_text(name, "a declared column name", DEFAULT_LIMITS.column_chars)
        if not isinstance(kind, str):
            raise InvalidInput(f"the type of column {excerpt(name)} must be text, e.g. 'float64'")
        canonical = ALIASES.get(kind.strip().lower(), kind.strip().lower())
        if canonical not in CSV_TYPES:
            raise InvalidInput(
                f"unknown type {excerpt(kind)} for column {excerpt(name)}; one of: "
                f"{', '.join(CSV_TYPES)}"
            )
        checked[name] = canonical
    tokens = _tokens(nulls)
    if decimal is not None and decimal not in (".", ","):
        raise InvalidInput(
            f"the decimal mark must be '.' or ',', not {excerpt(decimal)}: "
            "',' reads 1,5 as 1.5 (a spreadsheet's CSV in many languages)"
        )
    code = None if encoding is None else _encoding(encoding)
    if not checked and not tokens and decimal is None and code is None:
        return None
    mark = {} if decimal is None else {"decimal": decimal}
    mark |= {} if code is None else {"encoding": code}
    try:
        return msgspec.convert({"types": checked, "nulls": tokens, **mark}, TableRead)
    except msgspec.ValidationError as exc:  # every rule was checked above; say so if one slipped
        raise InvalidInput(f"invalid csv read options: {exc}"[:300]) from None


def _encoding(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidInput("the csv encoding must be text, e.g. 'cp1252'")
    folded = name.strip().lower().replace("_", "-")
    code = ENCODING_ALIASES.get(folded, folded)
    if code not in CSV_ENCODINGS:
        raise InvalidInput(
            f"unknown csv encoding {excerpt(name)}; one of: {', '.join(CSV_ENCODINGS)} (a "
            "UTF-16 file: save it as UTF-8)"
        )
    return code


def _tokens(nulls: Iterable[str] | None) -> list[str]:
    if nulls is None:
        return []
    if isinstance(nulls, str):
        raise InvalidInput("csv null tokens must be a list of strings, e.g. ['NA', '-']")
    tokens: list[str] = []
    for token in nulls:
        _check_text(token, "a null token", NULL_CHARS)
        if token not in tokens:
            tokens.append(token)
        if len(tokens) > MAX_NULLS:
            raise InvalidInput(f"more than {MAX_NULLS} null tokens declared")
    return tokens


def _check_text(value: object, what: str, limit: int) -> None:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text")
    if not value or len(value) > limit:
        raise InvalidInput(f"{what} must be 1 to {limit} characters, not {len(value)}")
    try:
        msgspec.convert(value, _Name if limit != NULL_CHARS else _Null)
    except msgspec.ValidationError:
        raise InvalidInput(
            f"{what} must be one line of printable text with a non-space character: "
            f"{excerpt(value)}"
        ) from None


def parse_type_specs(specs: Iterable[str]) -> dict[str, str]:
    """`COLUMN=TYPE` texts (as `--csv-type` takes them) as a mapping; '' alone declares none.

    The type follows the last '=', so a column name may hold '='.

    Raises:
        InvalidInput: a text has no '=', or names a column twice.
    """
    types: dict[str, str] = {}
    for spec in specs:
        if spec == "":
            continue
        name, sep, kind = spec.rpartition("=")
        if not sep or not name:
            raise InvalidInput(
                f"--csv-type {excerpt(spec)} is not COLUMN=TYPE, e.g. --csv-type x=float64"
            )
        if name in types:
            raise InvalidInput(f"--csv-type names column {excerpt(name)} twice")
        types[name] = kind
    return types


def merged(card: TableRead | None, call: TableRead | None) -> TableRead | None:
    """The options one read uses: the card's, the call's over them.

    The call's types win column by column; its null tokens, when it gives any, replace the
    card's; its decimal mark and encoding, each when it gives one, replace the card's.
    """
    if call is None:
        return card
    if card is None:
        return call
    return TableRead(
        types=card.types | call.types,
        nulls=call.nulls or card.nulls,
        decimal=card.decimal if call.decimal is UNSET else call.decimal,
        encoding=card.encoding if call.encoding is UNSET else call.encoding,
    )


def read_lines(read: TableRead | None) -> list[str]:
    """How `show` prints declared read options (no line when there are none)."""
    if read is None:
        return []
    lines = []
    if read.types:
        lines.append("csv types   " + ", ".join(f"{excerpt(n)} {t}" for n, t in read.types.items()))
    if read.nulls:
        lines.append("csv nulls   " + ", ".join(excerpt(t) for t in read.nulls))
    if read.decimal is not UNSET:
        lines.append(f"csv decimal {read.decimal!r}")
    if read.encoding is not UNSET:
        lines.append(f"csv encoding {read.encoding}")
    return lines
