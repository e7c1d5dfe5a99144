"""Hints for a rejected `--where`: the usual slips of someone who knows SQL or Python."""

from __future__ import annotations

import re

OPERATORS = (
    "=, != (or <>), <, <=, >, >=, in (...), not in (...), is null, is not null, and, or, not"
)
_HINTS = (
    (re.compile(r"=="), "write = for equality, not =="),
    (
        re.compile(r"(?:!=|<>|=)\s*null\b", re.IGNORECASE),
        "compare with null as `is null` or `is not null`",
    ),
    (re.compile(r'"[^"]*"'), "text takes single quotes, 'like this' (double quotes name a column)"),
    (
        re.compile(r"(?<!date )(?<!timestamp )'[0-9]{4}-[0-9]{2}-[0-9]{2}[^']*'", re.IGNORECASE),
        "compare a date column with date 'YYYY-MM-DD' (a timestamp with timestamp '...')",
    ),
    (
        re.compile(r"\b(?:between|like|ilike|regexp|glob)\b", re.IGNORECASE),
        f"supported operators: {OPERATORS} (for a range write `x >= a and x <= b`)",
    ),
)


def filter_hints(where: str) -> list[str]:
    """The hints that fit `where` (the filter text the person typed), most specific first."""
    return [hint for pattern, hint in _HINTS if pattern.search(where)]
