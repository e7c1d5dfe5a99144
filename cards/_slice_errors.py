"""The slicing errors of `cards.errors` (re-exported there; the class tree is in its docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from cards._error_root import ArtifactError, ErrorCode, InvalidInput, LimitExceeded, excerpt

_LISTED_COLUMNS = 20


class InvalidFilter(InvalidInput):
    """A filter expression is rejected; `position` is the 0-based offset of the problem."""

    code = ErrorCode.INVALID_FILTER

    def __init__(self, message: str, *, position: int) -> None:
        super().__init__(f"{message} (at position {position})")
        self.position = position


class FilterSyntaxError(InvalidFilter):
    """The filter text is not in the expression language, or exceeds its bounds."""

    code = ErrorCode.FILTER_SYNTAX


class FilterTypeError(InvalidFilter):
    """A literal or comparison does not fit the type of the column it is compared with."""

    code = ErrorCode.FILTER_TYPE


class UnknownColumn(InvalidInput):
    """A projected or filtered column is not in the table (or its name is ambiguous)."""

    code = ErrorCode.UNKNOWN_COLUMN

    def __init__(
        self, column: str, available: Sequence[str], *, position: int | None = None
    ) -> None:
        shown = ", ".join(excerpt(name) for name in available[:_LISTED_COLUMNS])
        more = len(available) - _LISTED_COLUMNS
        if more > 0:
            shown += f", and {more} more"
        where = "" if position is None else f" (at position {position})"
        repeats = list(available).count(column)
        if repeats > 1:  # a header that repeats a name: the other columns can still be sliced
            message = (
                f"the table has {repeats} columns named {excerpt(column)}{where}, which a slice "
                f"cannot tell apart; name only other columns; available: {shown}"
            )
            if column == "":  # a spreadsheet's title line above the header reads so
                message += (
                    "; if the file's first line is a title above the header, remove it and "
                    "record the file again"
                )
        else:
            message = f"no single column named {excerpt(column)}{where}; available: {shown}"
        super().__init__(message)
        self.column = column
        self.available = tuple(available)
        self.position = position


class UnsupportedMediaType(InvalidInput):
    """The artifact's media type is not one slicing can read."""

    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE

    def __init__(self, media_type: str, supported: Sequence[str]) -> None:
        names = ", ".join(supported)
        super().__init__(f"cannot slice media type {excerpt(media_type)}; supported: {names}")
        self.media_type = media_type
        self.supported = tuple(supported)


class TableTooLarge(LimitExceeded):
    """The table's metadata, width or a single read exceeds a slicing bound."""

    code = ErrorCode.TABLE_TOO_LARGE


class TableUnreadable(ArtifactError, ValueError):
    """The bytes are intact but are not a readable table of the declared media type."""

    code = ErrorCode.TABLE_UNREADABLE


class SliceTimeout(LimitExceeded):
    """A slice or table description did not finish within its wall-clock budget (seconds)."""

    code = ErrorCode.SLICE_TIMEOUT
