"""What `artmem record` says about a result: its flags, their defaults, and the query text.

The record tool's contract (a kernel's call) requires a title, a summary and a query fingerprint
(Honcho spec §31.2); a person at the CLI may leave the descriptive ones out: the title
defaults to the file's name, the summary to the file's name and what reading the table finds
(`cas.slicing._footer.with_facts` completes it), and `--query TEXT` gives the fingerprint as
the SHA-256 of the text, kept on the card for `show` (never sent to Honcho).
"""

from __future__ import annotations

import argparse
import os

import msgspec

from cards import InvalidInput
from cards.card import QUERY_CHARS, query_fingerprint
from cards.table_read import TableRead, parse_type_specs, table_read

DEFAULT_SUMMARY = "Recorded from {name} without a summary."


def described(args: argparse.Namespace) -> tuple[dict[str, object], frozenset[str]]:
    """The descriptive and identity fields of a record, and which of them are defaults.

    Raises:
        InvalidInput: both or neither of `--query` and `--query-fingerprint` are given, or the
            query text is too long.
    """
    name = _printable_name(str(args.path))
    fields: dict[str, object] = {
        "query_fingerprint": _fingerprint(args),
        "source": args.source,
        "source_version": args.source_version,
    }
    if args.query is not None:
        fields["query"] = args.query
    defaults = set()
    for field, value, default in (
        ("title", args.title, name),
        ("summary", args.summary, DEFAULT_SUMMARY.format(name=name)),
    ):
        fields[field] = default if value is None else value
        if value is None:
            defaults.add(field)
    return fields, frozenset(defaults)


def _printable_name(path: str) -> str:
    """The file's name as one printable line (a name may hold any byte but '/' and NUL)."""
    name = os.path.basename(path.rstrip("/")) or path
    shown = "".join(c if c.isprintable() else "?" for c in name).strip()
    return shown[:200] if shown.strip("?") else "untitled result"


def _fingerprint(args: argparse.Namespace) -> str:
    if args.query is not None and args.query_fingerprint is not None:
        raise InvalidInput(
            "give --query TEXT or --query-fingerprint HEX, not both (the fingerprint of "
            "--query is the SHA-256 of its text)"
        )
    if args.query is None:
        if args.query_fingerprint is None:
            raise InvalidInput(
                "record needs --query TEXT (the query or computation that made the result; its "
                "SHA-256 is the fingerprint) or --query-fingerprint HEX"
            )
        return str(args.query_fingerprint)
    if len(args.query) > QUERY_CHARS:
        raise InvalidInput(
            f"--query is {len(args.query)} characters; at most {QUERY_CHARS}: for a longer "
            "text give --query-fingerprint with its SHA-256 (e.g. from `sha256sum`)"
        )
    return query_fingerprint(args.query)


def table_read_field(args: argparse.Namespace) -> tuple[bool, dict[str, object] | None]:
    """Whether a `--csv-*` flag was given, and the card's `table_read` from the flags.

    Any of the flags (`--csv-type`, `--csv-null`, `--csv-decimal`, `--csv-encoding`) replaces
    them all on a re-record; given only as '' they clear the card's (None).

    Raises:
        InvalidInput: a `COLUMN=TYPE` text, a type, a token, the decimal mark or the encoding
            is malformed or unknown (`cards.table_read`).
    """
    specs, nulls = getattr(args, "csv_types", None), getattr(args, "csv_nulls", None)
    decimal, encoding = getattr(args, "csv_decimal", None), getattr(args, "csv_encoding", None)
    if specs is None and nulls is None and decimal is None and encoding is None:
        return False, None
    read = call_read(specs, nulls, decimal, encoding)
    return True, None if read is None else msgspec.to_builtins(read)


def call_read(
    specs: list[str] | None,
    nulls: list[str] | None,
    decimal: str | None = None,
    encoding: str | None = None,
) -> TableRead | None:
    """Declared read options from the flags' texts ('' entries ignored), checked.

    Raises:
        InvalidInput: a `COLUMN=TYPE` text, a type, a token, the decimal mark or the encoding
            is malformed or unknown.
    """
    types = parse_type_specs(specs or [])
    tokens = [n for n in nulls or [] if n != ""]
    return table_read(types, tokens, decimal or None, encoding or None)
