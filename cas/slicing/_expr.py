"""The filter language of slices: tokens, a recursive-descent parser, a typed conversion.

Grammar (keywords are case-insensitive; `not` binds looser than a comparison, as in SQL):

    filter    := conjunct ("or" conjunct)*
    conjunct  := negation ("and" negation)*
    negation  := "not" negation | primary
    primary   := "(" filter ")" | operand [cmp operand | "is" ["not"] "null"
                                          | ["not"] "in" "(" literal ("," literal)* ")"]
    operand   := name | literal        (a lone boolean column is a predicate)
    literal   := 'text' ('' escapes) | 12 | -1.5e3 | true | false
               | date 'YYYY-MM-DD' | timestamp 'YYYY-MM-DD[ HH:MM[:SS[.ffffff]]][Z|+HH:MM]'
    name      := [A-Za-z_][A-Za-z0-9_]* | "any name" ("" escapes)

Nothing is ever evaluated in Python: `_expr_check` checks the tree against a table's schema
and converts it to a `pyarrow.compute.Expression`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime

import msgspec

from cards import excerpt
from cards.errors import FilterSyntaxError

UNNAMED = (
    "a column with no name (a CSV or TSV header that ends with a delimiter, or holds two in a "
    "row, gives one) cannot be picked nor filtered: name it in the header and record the file "
    "again, or slice the other columns"
)
"""What a request that names a column "" is told (`columns`, or `""` in a filter)."""

MAX_FILTER_CHARS = 4_000
MAX_DEPTH = 32
MAX_IN_ITEMS = 1_000

LiteralValue = str | int | float | bool | date | datetime

_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+)
    | (?P<number>-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<quoted>"(?:[^"]|"")*")
    | (?P<string>'(?:[^']|'')*')
    | (?P<op><=|>=|<>|!=|=|<|>)
    | (?P<punct>[(),])""",
    re.VERBOSE,
)
_KEYWORDS = frozenset(
    {"and", "or", "not", "in", "is", "null", "true", "false", "date", "timestamp"}
)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?)?(?:Z|[+-][0-9]{2}:[0-9]{2})?"
)
_INT_RANGE = (-(2**63), 2**64 - 1)


class Token(msgspec.Struct, frozen=True):
    """A lexical token: `kind`, its source `text`, its `value`, and its character position."""

    kind: str
    text: str
    value: LiteralValue | None
    pos: int


class Column(msgspec.Struct, frozen=True):
    """A column reference."""

    name: str
    pos: int


class Literal(msgspec.Struct, frozen=True):
    """A literal: `kind` is string, int, float, bool, date or timestamp."""

    kind: str
    value: LiteralValue
    pos: int


Operand = Column | Literal


class Compare(msgspec.Struct, frozen=True):
    """`left op right`, with `op` one of = != < <= > >=."""

    op: str
    left: Operand
    right: Operand
    pos: int


class InList(msgspec.Struct, frozen=True):
    """`column [not] in (items)`."""

    column: Column
    items: tuple[Literal, ...]
    negated: bool
    pos: int


class IsNull(msgspec.Struct, frozen=True):
    """`column is [not] null`."""

    column: Column
    negated: bool


class Truth(msgspec.Struct, frozen=True):
    """A boolean column used as a predicate on its own."""

    column: Column


class Not(msgspec.Struct, frozen=True):
    """`not operand`."""

    operand: Node


class And(msgspec.Struct, frozen=True):
    """All parts hold."""

    parts: tuple[Node, ...]


class Or(msgspec.Struct, frozen=True):
    """Some part holds."""

    parts: tuple[Node, ...]


Node = Compare | InList | IsNull | Truth | Not | And | Or


def tokenize(text: str) -> list[Token]:
    """Split filter text into tokens, ending with an `end` token.

    Raises:
        FilterSyntaxError: a character starts no token, or a literal is malformed.
    """
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise _bad_character(text, pos)
        kind = match.lastgroup
        if kind is not None and kind != "space":
            tokens.append(_token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(Token("end", "", None, len(text)))
    return tokens


def _bad_character(text: str, pos: int) -> FilterSyntaxError:
    char = text[pos]
    if char in "'\"":
        what = "string" if char == "'" else "quoted name"
        return FilterSyntaxError(f"unterminated {what}", position=pos)
    return FilterSyntaxError(f"unexpected character {char!r}", position=pos)


def _token(kind: str, text: str, pos: int) -> Token:
    if kind == "number":
        return _number(text, pos)
    if kind == "name":
        word = text.lower()
        return (
            Token("keyword", text, word, pos) if word in _KEYWORDS else Token(kind, text, text, pos)
        )
    if kind == "quoted":
        name = text[1:-1].replace('""', '"')
        if not name:
            raise FilterSyntaxError(f"a quoted name is empty: {UNNAMED}", position=pos)
        return Token("name", text, name, pos)
    if kind == "string":
        return Token(kind, text, text[1:-1].replace("''", "'"), pos)
    if kind == "op":
        return Token(kind, text, "!=" if text == "<>" else text, pos)
    return Token(kind, text, text, pos)


def _number(text: str, pos: int) -> Token:
    if any(c in text for c in ".eE"):
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise FilterSyntaxError("a number is out of range", position=pos)
        return Token("float", text, value, pos)
    if len(text) > 21 or not _INT_RANGE[0] <= int(text) <= _INT_RANGE[1]:
        raise FilterSyntaxError("an integer is out of range", position=pos)
    return Token("int", text, int(text), pos)


def parse_filter(text: str, *, max_chars: int = MAX_FILTER_CHARS) -> Node:
    """Parse filter text into a tree; nothing is checked against a schema yet.

    Raises:
        FilterSyntaxError: the text is too long, too deeply nested, has too long an `in` list,
            or is not in the language.
    """
    if len(text) > max_chars:
        raise FilterSyntaxError(f"the filter is longer than {max_chars} characters", position=0)
    parser = _Parser(tokenize(text))
    node = parser.disjunction()
    parser.expect("end")
    return node


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._index = 0
        self._depth = 0

    def peek(self) -> Token:
        return self._tokens[self._index]

    def take(self) -> Token:
        token = self._tokens[self._index]
        self._index = min(self._index + 1, len(self._tokens) - 1)
        return token

    def keyword(self, word: str) -> Token | None:
        token = self.peek()
        if token.kind == "keyword" and token.value == word:
            return self.take()
        return None

    def expect(self, kind: str, value: str | None = None) -> Token:
        token = self.peek()
        if token.kind != kind or (value is not None and token.value != value):
            wanted = "end of filter" if kind == "end" else repr(value or kind)
            raise FilterSyntaxError(f"expected {wanted}, found {_shown(token)}", position=token.pos)
        return self.take()

    @contextmanager
    def deeper(self, token: Token) -> Iterator[None]:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise FilterSyntaxError(f"nesting is deeper than {MAX_DEPTH}", position=token.pos)
        yield
        self._depth -= 1

    def disjunction(self) -> Node:
        parts = [self.conjunction()]
        while self.keyword("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def conjunction(self) -> Node:
        parts = [self.negation()]
        while self.keyword("and"):
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def negation(self) -> Node:
        token = self.keyword("not")
        if token is None:
            return self.primary()
        with self.deeper(token):
            return Not(self.negation())

    def primary(self) -> Node:
        token = self.peek()
        if token.kind == "punct" and token.text == "(":
            self.take()
            with self.deeper(token):
                node = self.disjunction()
            self.expect("punct", ")")
            return node
        return self.predicate(self.operand())

    def predicate(self, left: Operand) -> Node:
        token = self.peek()
        if token.kind == "op":
            self.take()
            return Compare(str(token.value), left, self.operand(), token.pos)
        if token.kind == "keyword" and token.value in ("is", "in", "not"):
            return self.membership(_need_column(left, token), token)
        if isinstance(left, Column):
            return Truth(left)
        raise FilterSyntaxError(
            f"expected a comparison after the literal, found {_shown(token)}", position=token.pos
        )

    def membership(self, column: Column, token: Token) -> Node:
        if self.keyword("is"):
            negated = self.keyword("not") is not None
            self.expect("keyword", "null")
            return IsNull(column, negated)
        negated = self.keyword("not") is not None
        if self.keyword("in") is None:
            raise FilterSyntaxError(
                f"expected 'in', found {_shown(self.peek())}", position=self.peek().pos
            )
        return InList(column, self.items(), negated, token.pos)

    def items(self) -> tuple[Literal, ...]:
        self.expect("punct", "(")
        items = [self.literal()]
        while self.peek().value == ",":
            comma = self.take()
            if len(items) == MAX_IN_ITEMS:
                raise FilterSyntaxError(
                    f"an 'in' list holds more than {MAX_IN_ITEMS} items", position=comma.pos
                )
            items.append(self.literal())
        self.expect("punct", ")")
        return tuple(items)

    def literal(self) -> Literal:
        operand = self.operand()
        if isinstance(operand, Column):
            raise FilterSyntaxError("expected a literal, found a column", position=operand.pos)
        return operand

    def operand(self) -> Operand:
        token = self.take()
        if token.kind == "name":
            return Column(str(token.value), token.pos)
        if token.kind in ("string", "int", "float") and token.value is not None:
            return Literal(token.kind, token.value, token.pos)
        if token.kind == "keyword" and token.value in ("true", "false"):
            return Literal("bool", token.value == "true", token.pos)
        if token.kind == "keyword" and token.value in ("date", "timestamp"):
            return _temporal(str(token.value), self.take(), token.pos)
        hint = ' (quote a column named like a keyword: "name")' if token.kind == "keyword" else ""
        raise FilterSyntaxError(
            f"expected a column or a literal, found {_shown(token)}{hint}", position=token.pos
        )


def _need_column(operand: Operand, token: Token) -> Column:
    if isinstance(operand, Literal):
        raise FilterSyntaxError(
            f"expected a column before {excerpt(token.text)}", position=operand.pos
        )
    return operand


def _temporal(kind: str, token: Token, pos: int) -> Literal:
    shape = _DATE if kind == "date" else _TIMESTAMP
    text = str(token.value)
    if token.kind != "string":
        raise FilterSyntaxError(
            f"expected a quoted {kind} after {kind!r} "
            f'(quote a column named like a keyword: "{kind}")',
            position=token.pos,
        )
    if shape.fullmatch(text) is None:
        raise FilterSyntaxError(f"expected a quoted {kind} after {kind!r}", position=token.pos)
    try:
        value = date.fromisoformat(text) if kind == "date" else datetime.fromisoformat(text)
    except ValueError as exc:
        raise FilterSyntaxError(f"invalid {kind} {excerpt(text)}", position=token.pos) from exc
    return Literal(kind, value, pos)


def _shown(token: Token) -> str:
    if token.kind == "end":
        return "end of filter"
    return repr(token.text[:40])


def filter_columns(node: Node) -> frozenset[str]:
    """The names of every column a filter reads."""
    if isinstance(node, And | Or):
        return frozenset().union(*(filter_columns(part) for part in node.parts))
    if isinstance(node, Not):
        return filter_columns(node.operand)
    if isinstance(node, Compare):
        return frozenset(o.name for o in (node.left, node.right) if isinstance(o, Column))
    return frozenset({node.column.name})
