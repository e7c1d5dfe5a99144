"""The filter language: grammar, bounds, typed errors with positions, and SQL null semantics."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from filter_helpers import compile_filter
from hypothesis import given, settings
from hypothesis import strategies as st

from cards.errors import (
    ArtifactError,
    ErrorCode,
    FilterSyntaxError,
    FilterTypeError,
    InvalidFilter,
    InvalidInput,
    UnknownColumn,
)
from cas.slicing._expr import (
    MAX_DEPTH,
    MAX_FILTER_CHARS,
    MAX_IN_ITEMS,
    And,
    Column,
    Compare,
    InList,
    IsNull,
    Literal,
    Not,
    Or,
    Truth,
    filter_columns,
    parse_filter,
    tokenize,
)
from cas.slicing._expr_check import column_kind

UTC = dt.UTC
SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("small", pa.int8()),
        ("u", pa.uint16()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("ls", pa.large_string()),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("t", pa.timestamp("us")),
        ("tz", pa.timestamp("ms", tz="UTC")),
        ("cat", pa.dictionary(pa.int8(), pa.string())),
        ("odd name", pa.int32()),
        ("date", pa.int32()),
        ("lst", pa.list_(pa.int8())),
    ]
)


def rows_matching(table: pa.Table, text: str) -> list[int]:
    """The positions of the rows a filter keeps."""
    indexed = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    kept = indexed.filter(compile_filter(parse_filter(text), table.schema))
    return kept.column("_row").to_pylist()


# -- grammar ----------------------------------------------------------------------------------


def test_a_comparison_parses_to_a_tree_with_positions():
    assert parse_filter("i >= 5") == Compare(">=", Column("i", 0), Literal("int", 5, 5), 2)


def test_and_binds_tighter_than_or_and_not_looser_than_a_comparison():
    node = parse_filter("not i = 1 or s = 'a' and b")
    assert isinstance(node, Or)
    assert isinstance(node.parts[0], Not) and isinstance(node.parts[0].operand, Compare)
    assert isinstance(node.parts[1], And) and isinstance(node.parts[1].parts[1], Truth)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("s = 'it''s'", Literal("string", "it's", 4)),
        ("s = ''", Literal("string", "", 4)),
        ("i = -12", Literal("int", -12, 4)),
        ("f = 1.5e3", Literal("float", 1500.0, 4)),
        ("f = .5", Literal("float", 0.5, 4)),
        ("b = TRUE", Literal("bool", True, 4)),
        ("d = date '2026-01-31'", Literal("date", dt.date(2026, 1, 31), 4)),
        (
            "t = timestamp '2026-01-31 10:20:30.5'",
            Literal("timestamp", dt.datetime(2026, 1, 31, 10, 20, 30, 500000), 4),
        ),
        (
            "t = timestamp '2026-01-31T10:20Z'",
            Literal("timestamp", dt.datetime(2026, 1, 31, 10, 20, tzinfo=UTC), 4),
        ),
    ],
)
def test_literals(text, expected):
    node = parse_filter(text)
    assert isinstance(node, Compare) and node.right == expected


def test_quoted_names_hold_anything_and_double_quotes_escape():
    node = parse_filter('"odd ""name""" = 1')
    assert isinstance(node, Compare) and node.left == Column('odd "name"', 0)


def test_keywords_are_case_insensitive_and_names_are_not():
    node = parse_filter("I iS NoT NuLl AnD s NOT IN ('a', 'b') Or NOT B")
    assert isinstance(node, Or)
    first = node.parts[0]
    assert isinstance(first, And)
    assert first.parts[0] == IsNull(Column("I", 0), negated=True)
    assert first.parts[1] == InList(
        Column("s", 18), (Literal("string", "a", 28), Literal("string", "b", 33)), True, 20
    )


def test_not_equal_has_two_spellings():
    assert parse_filter("i <> 1") == parse_filter("i != 1")


def test_tokens_carry_their_positions():
    kinds = [(t.kind, t.pos) for t in tokenize("(i<=3)")]
    assert kinds == [("punct", 0), ("name", 1), ("op", 2), ("int", 4), ("punct", 5), ("end", 6)]


def test_filter_columns_names_every_column_read():
    node = parse_filter("i < f and (s in ('a') or not b) and \"odd name\" is null and 1 < u")
    assert filter_columns(node) == {"i", "f", "s", "b", "odd name", "u"}


# -- syntax errors, with the position of the problem ------------------------------------------


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", 0),
        ("i =", 3),
        ("i = 'open", 4),
        ('"open = 1', 0),
        ('"" = 1', 0),
        ("i = 1 j", 6),
        ("i % 2 = 0", 2),
        ("(i = 1", 6),
        ("i = 1)", 5),
        ("i in ()", 6),
        ("i in (1,)", 8),
        ("i in (j)", 6),
        ("i not = 1", 6),
        ("i is nul", 5),
        ("i is not", 8),
        ("1 in (1)", 0),
        ("'a' is null", 0),
        ("1 and i", 2),
        ("i = 99999999999999999999999", 4),
        ("f = 1e999", 4),
        ("d = date '2026-13-01'", 9),
        ("d = date '2026-1-1'", 9),
        ("d = date 5", 9),
        ("t = timestamp '2026-01-01 25:00'", 14),
        ("date = 1", 5),
        ("i = ６", 4),
        ("i = 1 and", 9),
        ("and", 0),
    ],
)
def test_syntax_errors_say_where(text, position):
    with pytest.raises(FilterSyntaxError) as caught:
        parse_filter(text)
    assert caught.value.position == position
    assert f"position {position}" in caught.value.message
    assert caught.value.code == ErrorCode.FILTER_SYNTAX


@pytest.mark.parametrize("text", ["null = 1", "date = 1", "timestamp < 3"])
def test_a_keyword_where_a_column_belongs_suggests_quoting(text):
    with pytest.raises(FilterSyntaxError, match="quote a column named like a keyword"):
        parse_filter(text)


def test_filter_errors_are_invalid_input_for_generic_callers():
    with pytest.raises(InvalidInput):
        parse_filter("i = ")
    assert issubclass(FilterTypeError, InvalidFilter) and issubclass(InvalidFilter, ValueError)


# -- bounds -----------------------------------------------------------------------------------


def test_the_text_is_bounded():
    text = "i = 1" + " " * (MAX_FILTER_CHARS - 5)
    parse_filter(text)
    with pytest.raises(FilterSyntaxError, match="longer than"):
        parse_filter(text + " ")


def test_nesting_is_bounded():
    parse_filter("(" * MAX_DEPTH + "i = 1" + ")" * MAX_DEPTH)
    with pytest.raises(FilterSyntaxError, match="deeper") as caught:
        parse_filter("(" * (MAX_DEPTH + 1) + "i = 1" + ")" * (MAX_DEPTH + 1))
    assert caught.value.position == MAX_DEPTH
    with pytest.raises(FilterSyntaxError, match="deeper"):
        parse_filter("not " * (MAX_DEPTH + 1) + "b")


def test_in_lists_are_bounded():
    items = ", ".join(["1"] * MAX_IN_ITEMS)
    parse_filter(f"i in ({items})")
    text = f"i in ({items}, 2)"
    with pytest.raises(FilterSyntaxError, match="more than") as caught:
        parse_filter(text)
    assert caught.value.position == text.rindex(",")


# -- types against the schema -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "i = 1",
        "f > 1",
        "f > -1.5",
        "small = -128",
        "u = 65535",
        "s = 'x'",
        "ls >= 'x'",
        "cat = 'x'",
        "cat in ('x', 'y')",
        "b",
        "not b",
        "b = true",
        "b != false",
        "d < date '2026-01-01'",
        "t < date '2026-01-01'",
        "t < timestamp '2026-01-01 12:00'",
        "tz < timestamp '2026-01-01 12:00'",
        "tz < timestamp '2026-01-01 12:00+02:00'",
        "i < f",
        "f = i",
        "lst is null",
        '"odd name" in (1, 2)',
        '"date" = 3',
        "3 < i",
    ],
)
def test_well_typed_filters_compile(text):
    compile_filter(parse_filter(text), SCHEMA)


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("i = 1.5", 4, "float literal"),
        ("i = 'x'", 4, "string literal"),
        ("s = 1", 4, "int literal"),
        ("b = 1", 4, "int literal"),
        ("d = 1", 4, "int literal"),
        ("d = timestamp '2026-01-01'", 4, "timestamp literal"),
        ("t = timestamp '2026-01-01 10:00Z'", 4, "time zone"),
        ("small = 128", 8, "out of range"),
        ("u = -1", 4, "out of range"),
        ("u in (1, 70000)", 9, "out of range"),
        ("b < true", 2, "booleans"),
        ("i < s", 2, "cannot compare"),
        ("d < t", 2, "cannot compare"),
        ("1 = 1", 2, "needs a column"),
        ("i", 0, "not a condition"),
        ("lst = 1", 0, "cannot be compared"),
        ("lst in (1)", 0, "cannot be compared"),
        ("s in ('a', 2)", 11, "int literal"),
    ],
)
def test_type_errors_say_where(text, position, fragment):
    with pytest.raises(FilterTypeError) as caught:
        compile_filter(parse_filter(text), SCHEMA)
    assert caught.value.position == position
    assert fragment in caught.value.message
    assert caught.value.code == ErrorCode.FILTER_TYPE


def test_unknown_columns_are_named_with_the_available_ones():
    with pytest.raises(UnknownColumn) as caught:
        compile_filter(parse_filter("b and nope = 1"), SCHEMA)
    error = caught.value
    assert error.column == "nope" and error.position == 6
    assert error.available == tuple(SCHEMA.names)
    assert "'odd name'" in error.message and error.code == ErrorCode.UNKNOWN_COLUMN


def test_a_long_list_of_available_columns_is_abbreviated():
    wide = pa.schema([(f"c{i}", pa.int8()) for i in range(50)])
    with pytest.raises(UnknownColumn, match="and 30 more") as caught:
        compile_filter(parse_filter("x = 1"), wide)
    assert len(caught.value.available) == 50


def test_a_duplicated_column_name_is_ambiguous():
    doubled = pa.schema([("a", pa.int8()), ("a", pa.int8())])
    with pytest.raises(UnknownColumn):
        compile_filter(parse_filter("a = 1"), doubled)


def test_column_kinds():
    assert [column_kind(f.type) for f in SCHEMA] == [
        "int", "int", "int", "float", "string", "string", "bool", "date", "timestamp",
        "timestamp", "string", "int", "int", None,
    ]  # fmt: skip


# -- semantics ----------------------------------------------------------------------------------

TABLE = pa.table(
    {
        "i": pa.array([1, 2, None, 4, 5], pa.int64()),
        "f": pa.array([0.5, None, 2.5, 4.0, -1.0]),
        "s": pa.array(["a", "b", None, "it's", "a"]),
        "b": pa.array([True, False, None, True, None]),
        "d": pa.array([dt.date(2026, 1, d) for d in (1, 2, 3, 4, 5)]),
        "tz": pa.array(
            [dt.datetime(2026, 1, 1, h, tzinfo=UTC) for h in (0, 6, 12, 18, 23)],
            pa.timestamp("ms", tz="UTC"),
        ),
        "cat": pa.array(["x", "y", None, "x", "z"]).dictionary_encode(),
    }
)


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("i > 2", [3, 4]),
        ("not i > 2", [0, 1]),
        ("i in (1, 4)", [0, 3]),
        ("i not in (1, 4)", [1, 4]),
        ("not i in (1, 4)", [1, 4]),
        ("not i not in (1, 4)", [0, 3]),
        ("not (i in (1, 4) and true = b)", [1, 4]),
        ("i is null", [2]),
        ("not i is null", [0, 1, 3, 4]),
        ("i is not null and f is null", [1]),
        ("b", [0, 3]),
        ("not b", [1]),
        ("b or i = 5", [0, 3, 4]),
        ("not (b or i = 5)", [1]),
        ("s = 'it''s'", [3]),
        ("s >= 'b'", [1, 3]),
        ("i <= f", [3]),
        ("i < f", []),
        ("d >= date '2026-01-04'", [3, 4]),
        ("tz >= timestamp '2026-01-01 12:00'", [2, 3, 4]),
        ("tz < timestamp '2026-01-01 12:00+06:00'", [0]),
        ("tz >= date '2026-01-01'", [0, 1, 2, 3, 4]),
        ("cat = 'x'", [0, 3]),
        ("cat not in ('x')", [1, 4]),
        ("2 < i", [3, 4]),
        ("f = 4", [3]),
    ],
)
def test_filters_keep_the_rows_sql_would(text, rows):
    assert rows_matching(TABLE, text) == rows


# -- a reference evaluator, in Python, with SQL's three-valued logic --------------------------

VALUES = {
    "i": st.one_of(st.none(), st.integers(-3, 3)),
    "f": st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 0.5, 2.0, 3.25])),
    "s": st.one_of(st.none(), st.sampled_from(["", "a", "b", "it's", "é"])),
    "b": st.one_of(st.none(), st.booleans()),
}
LITERALS = {
    "i": st.integers(-3, 3),
    "f": st.one_of(st.integers(-2, 3), st.sampled_from([-1.5, 0.5, 2.0, 3.25])),
    "s": st.sampled_from(["", "a", "b", "it's", "é"]),
    "b": st.booleans(),
}
OPS = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def kleene_and(values):
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def kleene_or(values):
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


@st.composite
def comparisons(draw):
    column = draw(st.sampled_from(sorted(LITERALS)))
    ops = ["=", "!="] if column == "b" else sorted(OPS)
    op = draw(st.sampled_from(ops))
    literal = draw(LITERALS[column])
    flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    if draw(st.booleans()):
        text = f"{render(literal)} {flipped} {column}"
    else:
        text = f"{column} {op} {render(literal)}"

    def evaluate(row):
        value = row[column]
        return None if value is None else OPS[op](value, literal)

    return text, evaluate


@st.composite
def memberships(draw):
    column = draw(st.sampled_from(sorted(LITERALS)))
    items = draw(st.lists(LITERALS[column], min_size=1, max_size=4))
    negated = draw(st.booleans())
    text = f"{column} {'not in' if negated else 'in'} ({', '.join(map(render, items))})"

    def evaluate(row):
        value = row[column]
        if value is None:
            return None
        return (value in items) != negated

    return text, evaluate


@st.composite
def null_checks(draw):
    column = draw(st.sampled_from(sorted(VALUES)))
    negated = draw(st.booleans())
    text = f"{column} is {'not ' if negated else ''}null"
    return text, lambda row: (row[column] is not None) == negated


def combine(children):
    def negate(child):
        text, evaluate = child
        return f"not ({text})", lambda row: None if evaluate(row) is None else not evaluate(row)

    def join(word, logic):
        def build(parts):
            text = f" {word} ".join(f"({t})" for t, _ in parts)
            return text, lambda row: logic([e(row) for _, e in parts])

        return st.lists(children, min_size=2, max_size=3).map(build)

    return children.map(negate) | join("and", kleene_and) | join("or", kleene_or)


predicates = st.recursive(
    comparisons() | memberships() | null_checks() | st.just(("b", lambda row: row["b"])),
    combine,
    max_leaves=8,
)
tables = st.lists(st.fixed_dictionaries(VALUES), max_size=12)


@settings(max_examples=150)
@given(rows=tables, predicate=predicates)
def test_filters_agree_with_a_three_valued_reference(rows, predicate):
    text, evaluate = predicate
    table = pa.Table.from_pylist(
        rows,
        schema=pa.schema([("i", pa.int64()), ("f", pa.float64()), ("s", pa.string()),
                          ("b", pa.bool_())]),
    )  # fmt: skip
    expected = [n for n, row in enumerate(rows) if evaluate(row) is True]
    assert rows_matching(table, text) == expected


@settings(max_examples=300)
@given(st.text(alphabet="ifsb ()=<>!,'\"-.0123456789eandortuinslx", max_size=40))
def test_arbitrary_text_parses_or_fails_with_a_filter_error(text):
    try:
        node = parse_filter(text)
    except InvalidFilter as exc:
        assert 0 <= exc.position <= len(text)
        return
    try:
        compile_filter(node, TABLE.select(["i", "f", "s", "b"]).schema)
    except (InvalidFilter, UnknownColumn):
        pass


@settings(max_examples=200)
@given(st.text(max_size=60))
def test_any_text_at_all_fails_only_with_our_errors(text):
    try:
        parse_filter(text)
    except ArtifactError as exc:
        assert isinstance(exc, InvalidFilter)
