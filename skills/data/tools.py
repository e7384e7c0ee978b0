"""Tools of the `data` skill: summarize and query CSV, TSV, JSON and JSON Lines files.

A file is read as a table: a CSV's rows, or a JSON list of objects (found at the top, under
the dotted `records` path, or as the first list of objects in the document). Column types
are inferred (integer, number, boolean, date, string); numbers compare and add up as numbers.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import BaseModel

from orchestrator import ToolContext, ToolError, tool
from orchestrator.security import open_resolved, resolve_inside

Row = dict[str, Any]
MAX_ROWS_SHOWN = 200
MAX_CELL = 80
TOP_VALUES = 5
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$")
_BOOL = {"true": True, "false": False}
METRICS = ("count", "count_distinct", "sum", "mean", "median", "min", "max")


class Condition(BaseModel):
    """A row filter: `column op value`."""

    column: str
    op: Literal["=", "!=", ">", ">=", "<", "<=", "contains", "in"] = "="
    value: Any = None


class Table:
    """Columns in order, their inferred types, and rows with typed values."""

    def __init__(self, columns: list[str], rows: list[Row]) -> None:
        self.columns = columns
        self.types = {c: _infer([r.get(c) for r in rows]) for c in columns}
        self.rows = [{c: _convert(r.get(c), self.types[c]) for c in columns} for r in rows]

    def require(self, column: str) -> str:
        if column not in self.types:
            raise ToolError(f"no column {column!r}; the columns are: {', '.join(self.columns)}")
        return column


def _infer(values: Iterable[Any]) -> str:
    present = [v for v in values if v not in (None, "")]
    if not present:
        return "empty"
    kinds = {_kind(v) for v in present}
    if kinds <= {"integer"}:
        return "integer"
    if kinds <= {"integer", "number"}:
        return "number"
    return kinds.pop() if len(kinds) == 1 else "string"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, dict | list):
        return "json"
    text = str(value).strip()
    for kind, parse in (("integer", int), ("number", float)):
        try:
            parse(text)
            return kind
        except ValueError:
            pass
    if text.lower() in _BOOL:
        return "boolean"
    return "date" if _DATE.match(text) else "string"


def _convert(value: Any, kind: str) -> Any:
    if value in (None, ""):
        return None
    if kind in ("integer", "number") and not isinstance(value, int | float):
        number = float(str(value).strip())
        return int(number) if kind == "integer" else number
    if kind == "boolean" and isinstance(value, str):
        return _BOOL[value.strip().lower()]
    return value


def load_table(ctx: ToolContext, path: str, records: str | None = None) -> Table:
    """Read a data file of the workspace as a table."""
    permissions = ctx.permissions
    root = permissions.workspace_root()
    target = resolve_inside(root, path)
    permissions.require_readable(target, repr(path))
    try:
        with open_resolved(root, target, shown=repr(path)) as handle:
            text = handle.read().decode("utf-8-sig", errors="replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise ToolError(f"There is no file {path!r} in the workspace.") from None
    suffix = target.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _records_table([json.loads(line) for line in text.splitlines() if line.strip()])
    if suffix == ".json" or (suffix not in (".csv", ".tsv") and text.lstrip()[:1] in "[{"):
        return _records_table(_find_records(_parse_json(text, path), records))
    return _csv_table(text, tab=suffix == ".tsv")


def _parse_json(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"{path!r} is not valid JSON: {exc}") from None


def _find_records(data: Any, records: str | None) -> list[Any]:
    for key in (records or "").split(".") if records else ():
        if not isinstance(data, dict) or key not in data:
            raise ToolError(f"the JSON has no {records!r} (no key {key!r} there)")
        data = data[key]
    if isinstance(data, dict) and not records:
        data = next((v for v in data.values() if _is_records(v)), [data])
    if not isinstance(data, list):
        raise ToolError("the JSON holds no list of records; give `records`, a dotted path to one")
    return data


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _records_table(items: list[Any]) -> Table:
    rows = [item if isinstance(item, dict) else {"value": item} for item in items]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return Table(columns, rows)


def _csv_table(text: str, *, tab: bool) -> Table:
    if tab:
        dialect: Any = csv.excel_tab
    else:
        try:
            dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
    reader = csv.DictReader(io.StringIO(text), dialect=dialect)
    rows = [dict(row) for row in reader]
    return Table([c for c in reader.fieldnames or [] if c is not None], rows)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 3] + "..."


def render_rows(columns: list[str], rows: list[Row]) -> str:
    """Rows as a pipe-separated table with a header line."""
    lines = [" | ".join(columns)]
    lines += [" | ".join(_cell(row.get(c)) for c in columns) for row in rows]
    return "\n".join(lines)


def _column_summary(table: Table, column: str) -> str:
    values = [row[column] for row in table.rows if row[column] is not None]
    kind = table.types[column]
    missing = len(table.rows) - len(values)
    distinct = len({_cell(v) for v in values})
    text = f"- {column} ({kind}): {len(values)} values, {missing} missing, {distinct} distinct"
    if kind in ("integer", "number") and values:
        text += (
            f"; min {min(values)}, max {max(values)}, mean {statistics.fmean(values):.4g}, "
            f"median {statistics.median(values):.4g}, sum {sum(values):.6g}"
        )
    elif kind in ("date", "string") and values:
        text += (
            f"; range {min(map(str, values))} .. {max(map(str, values))}" if kind == "date" else ""
        )
        top = Counter(_cell(v) for v in values).most_common(TOP_VALUES)
        text += "; top: " + ", ".join(f"{v!r} ({n})" for v, n in top)
    return text


@tool
def summarize(path: str, ctx: ToolContext, records: str | None = None) -> str:
    """Summarize a CSV, TSV, JSON or JSON Lines file: rows, columns, types and statistics.

    Numeric columns get min, max, mean, median and sum; other columns their most common
    values. A few rows are shown as a sample.

    Args:
        path: The data file, relative to the workspace root.
        records: For JSON, a dotted path to the list of records, e.g. "data.items".
    """
    table = load_table(ctx, path, records)
    lines = [f"{path}: {len(table.rows)} rows, {len(table.columns)} columns"]
    lines += [_column_summary(table, column) for column in table.columns]
    if table.rows:
        lines += ["", "First rows:", render_rows(table.columns, table.rows[:5])]
    return "\n".join(lines)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "contains": lambda a, b: str(b).lower() in str(a).lower(),
    "in": lambda a, b: a in b,
}


def _matches(table: Table, row: Row, condition: Condition) -> bool:
    value = row[condition.column]
    wanted = condition.value
    kind = table.types[condition.column]
    if condition.op == "in":
        wanted = [_convert(v, kind) for v in (wanted if isinstance(wanted, list) else [wanted])]
    elif condition.op != "contains" and wanted is not None:
        try:
            wanted = _convert(wanted, kind)
        except (ValueError, KeyError):
            raise ToolError(
                f"{condition.value!r} is not a {kind} like column {condition.column!r}"
            ) from None
    if value is None and condition.op not in ("=", "!="):
        return False
    try:
        return _COMPARE[condition.op](value, wanted)
    except TypeError:
        return False


def _filtered(table: Table, where: list[Condition] | None) -> list[Row]:
    conditions = where or []
    for condition in conditions:
        table.require(condition.column)
    return [row for row in table.rows if all(_matches(table, row, c) for c in conditions)]


def _sorted(rows: list[Row], key: str | None, descending: bool) -> list[Row]:
    if key is None:
        return rows
    present = [r for r in rows if r.get(key) is not None]
    missing = [r for r in rows if r.get(key) is None]
    try:
        present.sort(key=lambda r: r[key], reverse=descending)
    except TypeError:
        present.sort(key=lambda r: str(r[key]), reverse=descending)
    return present + missing


@tool
def query(
    path: str,
    ctx: ToolContext,
    columns: list[str] | None = None,
    where: list[Condition] | None = None,
    sort_by: str | None = None,
    descending: bool = False,
    limit: int = 20,
    records: str | None = None,
) -> str:
    """Select rows of a data file: filter them, sort them, pick columns.

    Args:
        path: The data file, relative to the workspace root.
        columns: Columns to show (all if left out).
        where: Conditions that must all hold, e.g. [{"column": "age", "op": ">", "value": 30}].
        sort_by: Column to sort by.
        descending: Sort from largest to smallest.
        limit: Most rows to show (at most 200).
        records: For JSON, a dotted path to the list of records.
    """
    table = load_table(ctx, path, records)
    shown = [table.require(c) for c in columns] if columns else table.columns
    rows = _sorted(_filtered(table, where), sort_by and table.require(sort_by), descending)
    picked = rows[: max(0, min(limit, MAX_ROWS_SHOWN))]
    header = f"{len(rows)} of {len(table.rows)} rows match; showing {len(picked)}"
    return header + "\n" + render_rows(shown, picked)


def _metric(table: Table, spec: str) -> tuple[str, str | None]:
    name, _, after = spec.partition(":")
    name, column = name.strip(), after.strip() or None
    if name not in METRICS:
        raise ToolError(f"unknown metric {name!r}; use one of {', '.join(METRICS)}")
    if name != "count" and column is None:
        raise ToolError(f"metric {name!r} needs a column: {name}:COLUMN")
    if column is not None:
        table.require(column)
    if name in ("sum", "mean", "median") and table.types[column or ""] not in ("integer", "number"):
        raise ToolError(f"{name} needs a numeric column; {column!r} is {table.types[column or '']}")
    return name, column


def _compute(name: str, column: str | None, rows: list[Row]) -> Any:
    if column is None:
        return len(rows)
    values = [r[column] for r in rows if r[column] is not None]
    if name == "count":
        return len(values)
    if name == "count_distinct":
        return len({_cell(v) for v in values})
    if not values:
        return None
    functions: dict[str, Callable[[list[Any]], Any]] = {
        "sum": sum,
        "mean": lambda v: round(statistics.fmean(v), 6),
        "median": statistics.median,
        "min": min,
        "max": max,
    }
    return functions[name](values)


@tool
def aggregate(
    path: str,
    ctx: ToolContext,
    metrics: list[str] | None = None,
    group_by: list[str] | None = None,
    where: list[Condition] | None = None,
    sort_by: str | None = None,
    descending: bool = True,
    limit: int = 50,
    records: str | None = None,
) -> str:
    """Aggregate a data file: counts, sums, means, medians, minimums and maximums, by group.

    Args:
        path: The data file, relative to the workspace root.
        metrics: Metrics as "count" or "NAME:COLUMN", NAME one of count, count_distinct, sum,
            mean, median, min, max; e.g. ["count", "sum:amount"]. Default: ["count"].
        group_by: Columns to group rows by (no grouping if left out).
        where: Conditions rows must meet first, as in query.
        sort_by: An output column to sort groups by, e.g. "sum(amount)".
        descending: Sort from largest to smallest.
        limit: Most groups to show (at most 200).
        records: For JSON, a dotted path to the list of records.
    """
    table = load_table(ctx, path, records)
    specs = [_metric(table, m) for m in (metrics or ["count"])]
    keys = [table.require(c) for c in group_by or []]
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in _filtered(table, where):
        groups.setdefault(tuple(_cell(row[k]) for k in keys), []).append(row)
    names = [n if c is None else f"{n}({c})" for n, c in specs]
    results = [
        {
            **dict(zip(keys, group, strict=True)),
            **{label: _compute(n, c, rows) for label, (n, c) in zip(names, specs, strict=True)},
        }
        for group, rows in groups.items()
    ]
    if sort_by is not None and sort_by not in [*keys, *names]:
        raise ToolError(f"sort_by must be one of {', '.join([*keys, *names])}")
    results = _sorted(results, sort_by, descending)
    shown = results[: max(0, min(limit, MAX_ROWS_SHOWN))]
    header = f"{len(results)} groups" if keys else "all matching rows"
    return header + "\n" + render_rows([*keys, *names], shown)
