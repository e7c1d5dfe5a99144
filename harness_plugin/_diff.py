"""`artmem diff A B`: what differs between two experiments of the project.

Card fields always; the files' sizes and digests always; for two tables, their schemas, row
counts and per-column footer statistics side by side (the footers only: `cas.slicing.describe`
reads no data page); with `--rows --key COL`, their rows matched by key, read through the
slicing bounds (every chunk verified), refused rather than guessed when a table does not fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec

from cards import ExperimentCardV1, InvalidInput, UnknownColumn, UnsupportedMediaType, excerpt
from cards.errors import TableTooLarge
from cas import Store
from cas.slicing import SliceLimits, SliceRequest, TableInfo, describe, read_slice
from harness_plugin._views import iso, printable

MAX_LISTED = 100  # rows listed per kind of change; the counts are always complete
_SHOWN_ROWS = 20  # of each kind, in the text a person reads
_CARD_FIELDS = ("title", "summary", "source", "source_version", "tags", "columns", "shape")


def card_differences(a: ExperimentCardV1, b: ExperimentCardV1) -> list[dict[str, object]]:
    """The card fields whose values differ, each with both values."""
    pairs = [(name, getattr(a, name), getattr(b, name)) for name in _CARD_FIELDS]
    pairs += [
        ("derived_from", list(a.derived_from), list(b.derived_from)),
        ("query", a.query, b.query),
        ("table_read", msgspec.to_builtins(a.table_read), msgspec.to_builtins(b.table_read)),
        ("media_type", a.artifact.media_type, b.artifact.media_type),
        ("created_at", iso(a.created_at), iso(b.created_at)),
    ]
    return [{"field": n, "a": x, "b": y} for n, x, y in pairs if x != y]


def file_view(a: ExperimentCardV1, b: ExperimentCardV1) -> dict[str, object]:
    """Both files' sizes and digests, and whether they are the same bytes."""
    return {
        "a": {"bytes": a.artifact.bytes, "sha256": a.artifact.sha256},
        "b": {"bytes": b.artifact.bytes, "sha256": b.artifact.sha256},
        "same_bytes": a.artifact.sha256 == b.artifact.sha256,
    }


def schema_changes(a: TableInfo, b: TableInfo) -> dict[str, object]:
    """Columns added in B, removed from A, and those whose type changed."""
    types_a = {f.name: f.type for f in a.fields}
    types_b = {f.name: f.type for f in b.fields}
    return {
        "added": [{"name": n, "type": t} for n, t in types_b.items() if n not in types_a],
        "removed": [{"name": n, "type": t} for n, t in types_a.items() if n not in types_b],
        "retyped": [
            {"name": n, "a": types_a[n], "b": t}
            for n, t in types_b.items()
            if n in types_a and types_a[n] != t
        ],
    }


def statistics_side_by_side(a: TableInfo, b: TableInfo) -> list[dict[str, object]]:
    """Each column's footer statistics in A and in B (None where one table lacks it)."""
    stats_a = {c.path: c for c in a.columns}
    stats_b = {c.path: c for c in b.columns}
    paths = [*stats_a, *(p for p in stats_b if p not in stats_a)]
    return [{"path": p, "a": _stats(stats_a.get(p)), "b": _stats(stats_b.get(p))} for p in paths]


def _stats(column: object) -> dict[str, object] | None:
    if column is None:
        return None
    names = ("null_count", "min", "max", "compressed_bytes", "uncompressed_bytes")
    return {name: getattr(column, name) for name in names}


def diff_view(
    store: Store,
    first: str,
    second: str,
    limits: SliceLimits,
    *,
    rows: bool = False,
    key: str | None = None,
) -> dict[str, object]:
    """Everything `artmem diff` reports about experiments `first` (A) and `second` (B).

    Raises:
        InvalidInput: `--rows` without `--key`, or a key column repeats a value.
        UnknownColumn: the key is not a column of both tables.
        TableTooLarge: a table has more rows than a bounded row diff may read.
        UnsupportedMediaType: `--rows` on a result that is not a table.
    """
    if rows and key is None:
        raise InvalidInput("--rows needs --key COL: the column that identifies a row")
    located = [store.locate(first), store.locate(second)]
    a, b = located[0].card, located[1].card
    view: dict[str, object] = {
        "a": a.experiment_id,
        "b": b.experiment_id,
        "card": card_differences(a, b),
        "files": file_view(a, b),
        "table": None,
    }
    infos = [_describe(loc.source, limits) for loc in located]
    if infos[0] is not None and infos[1] is not None:
        view["table"] = {
            "num_rows": {"a": infos[0].num_rows, "b": infos[1].num_rows},
            "schema": schema_changes(infos[0], infos[1]),
            "columns": statistics_side_by_side(infos[0], infos[1]),
        }
    if rows:
        assert key is not None
        for info in infos:  # before any row is read
            if info is not None and key not in {f.name for f in info.fields}:
                raise UnknownColumn(key, [f.name for f in info.fields])
        tables = [
            _all_rows(loc.source, limits, name) for loc, name in zip(located, "AB", strict=True)
        ]
        view["rows"] = row_differences(tables[0], tables[1], key)
    return view


def _describe(source: object, limits: SliceLimits) -> TableInfo | None:
    try:
        return describe(source, limits=limits)  # type: ignore[arg-type]
    except UnsupportedMediaType:
        return None


def _all_rows(source: object, limits: SliceLimits, name: str) -> list[dict[str, object]]:
    result = read_slice(source, SliceRequest(), limits=limits)  # type: ignore[arg-type]
    if result.truncated:
        raise TableTooLarge(
            f"{name} has more rows than a row diff reads ({result.truncated_reason}); "
            "compare slices of both instead (`artmem slice --where ... --out`)",
            limit=limits.max_rows,
        )
    rows: list[dict[str, object]] = result.table.to_pylist()
    return rows


def row_differences(
    a: Sequence[dict[str, object]], b: Sequence[dict[str, object]], key: str
) -> dict[str, object]:
    """Rows of B not in A (added), of A not in B (removed), and changed values by key.

    Only columns both tables have are compared; two NaNs are equal.

    Raises:
        UnknownColumn: `key` is not a column of both.
        InvalidInput: a key value repeats in one table.
    """
    by_a, by_b = _keyed(a, key, "A"), _keyed(b, key, "B")
    shared = [c for c in (a[0] if a else {}) if b and c in b[0] and c != key]
    added = [k for k in by_b if k not in by_a]
    removed = [k for k in by_a if k not in by_b]
    changed = []
    for k, row in by_a.items():
        other = by_b.get(k)
        if other is None:
            continue
        cells = {c: [row[c], other[c]] for c in shared if not _same(row[c], other[c])}
        if cells:
            changed.append({"key": k, "columns": cells})
    return {
        "key": key,
        "counts": {"added": len(added), "removed": len(removed), "changed": len(changed)},
        "added": [by_b[k] for k in added[:MAX_LISTED]],
        "removed": [by_a[k] for k in removed[:MAX_LISTED]],
        "changed": changed[:MAX_LISTED],
        "compared_columns": shared,
    }


def _keyed(
    rows: Sequence[dict[str, object]], key: str, name: str
) -> dict[object, dict[str, object]]:
    if rows and key not in rows[0]:
        raise UnknownColumn(key, list(rows[0]))
    keyed: dict[object, dict[str, object]] = {}
    for row in rows:
        value = row[key]
        if isinstance(value, list | dict):  # a nested value is no key
            raise InvalidInput(f"the key {excerpt(key)} must be a column of plain values")
        if value in keyed:
            raise InvalidInput(f"the key {excerpt(key)} repeats a value in {name}: not a key")
        keyed[value] = row
    return keyed


def _same(x: object, y: object) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return x == y


def diff_lines(view: dict[str, object]) -> list[str]:
    """`artmem diff` for people."""
    lines = [f"A {view['a']}", f"B {view['b']}"]
    card = view["card"]
    assert isinstance(card, list)
    lines.append("card: the same" if not card else "card:")
    lines += [f"  {d['field']}: {_shown(d['a'])} -> {_shown(d['b'])}" for d in card]
    files = view["files"]
    assert isinstance(files, dict)
    same = "the same bytes" if files["same_bytes"] else "different bytes"
    lines.append(f"files: {same} ({files['a']['bytes']} vs {files['b']['bytes']} bytes)")
    table = view.get("table")
    if isinstance(table, dict):
        lines += _table_lines(table)
    diff = view.get("rows")
    if isinstance(diff, dict):
        counts = diff["counts"]
        lines.append(
            f"rows by {printable(str(diff['key']))}: {counts['added']} added, "
            f"{counts['removed']} removed, {counts['changed']} changed"
        )
        key = diff["key"]
        for sign, kind in (("+", "added"), ("-", "removed")):
            for row in diff[kind][:_SHOWN_ROWS]:
                cells = ", ".join(f"{printable(c)} {_shown(v)}" for c, v in row.items() if c != key)
                lines.append(f"  {sign} {_shown(row.get(key))}: {cells}")
        for change in diff["changed"][:_SHOWN_ROWS]:
            cells = ", ".join(
                f"{printable(c)} {_shown(v[0])} -> {_shown(v[1])}"
                for c, v in change["columns"].items()
            )
            lines.append(f"  ~ {_shown(change['key'])}: {cells}")
        if any(n > _SHOWN_ROWS for n in counts.values()):
            lines.append(f"  (at most {_SHOWN_ROWS} of each here; --json lists {MAX_LISTED})")
    return lines


def _table_lines(table: dict[str, Any]) -> list[str]:
    rows = {side: "unknown" if n is None else f"{n:,}" for side, n in table["num_rows"].items()}
    lines = [f"rows: {rows['a']} -> {rows['b']}"]
    schema = table["schema"]
    lines += [f"  + {printable(c['name'])} {c['type']}" for c in schema["added"]]
    lines += [f"  - {printable(c['name'])} {c['type']}" for c in schema["removed"]]
    lines += [f"  ~ {printable(c['name'])} {c['a']} -> {c['b']}" for c in schema["retyped"]]
    for column in table["columns"]:
        a, b = column["a"] or {}, column["b"] or {}
        if a != b:
            lines.append(
                f"  {printable(column['path'])}: min {_shown(a.get('min'))} -> "
                f"{_shown(b.get('min'))}, max {_shown(a.get('max'))} -> {_shown(b.get('max'))}, "
                f"nulls {a.get('null_count')} -> {b.get('null_count')}"
            )
    return lines


def _shown(value: object) -> str:
    text = printable(str(value))
    return text if len(text) <= 60 else text[:59] + "…"
