"""Rows of a table (one per trial or experiment): Ray Tune's `tune ls` filtering and sorting,
printing and saving; shared by the command line and the dashboard."""

from __future__ import annotations

import csv
import json
import math
import operator
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

_FILTER = re.compile(r"^\s*(?P<col>[^<>=!\s]+)\s*(?P<op><=|>=|==|!=|<|>)\s*(?P<value>.+?)\s*$")
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


class UsageError(ValueError):
    """Bad command-line input; the message says what to pass instead."""


def columns_of(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every column some row has, in order of first appearance."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _check_column(option: str, column: str, available: Sequence[str]) -> None:
    if column not in available:
        raise UsageError(
            f"{option}: no column {column!r}. Available columns: {', '.join(available)}."
        )


def _parse_value(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return float(text)
    except ValueError:
        return text


def apply_filter(rows: list[dict[str, Any]], expression: str) -> list[dict[str, Any]]:
    """The rows where ``expression`` (``"column op value"``, op one of < > <= >= == !=) holds.

    Rows without a value in the column are left out.

    >>> apply_filter([{"a": 1}, {"a": 3}, {}], "a > 2")
    [{'a': 3}]
    """
    match = _FILTER.match(expression)
    if match is None:
        raise UsageError(
            f"--filter {expression!r}: expected 'COLUMN OP VALUE' with OP one of "
            "<, >, <=, >=, ==, != (for example --filter 'loss < 0.5')."
        )
    column, op, raw = match["col"], _OPS[match["op"]], match["value"]
    _check_column("--filter", column, columns_of(rows))
    value = _parse_value(raw)
    kept = []
    for row in rows:
        cell = row.get(column)
        if cell is None:
            continue
        if (
            isinstance(value, float)
            and isinstance(cell, (int, float))
            and not isinstance(cell, bool)
        ):
            if op(cell, value):
                kept.append(row)
        elif op(str(cell), raw.strip("'\"")):
            kept.append(row)
    return kept


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return (2, 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


def apply_sort(rows: list[dict[str, Any]], keys: Sequence[str], desc: bool) -> list[dict[str, Any]]:
    """``rows`` sorted by ``keys`` (missing values last, whatever the direction)."""
    available = columns_of(rows)
    for key in keys:
        _check_column("--sort", key, available)
    out = list(rows)
    for key in reversed(keys):
        present = [r for r in out if _sort_key(r.get(key))[0] < 2]
        missing = [r for r in out if _sort_key(r.get(key))[0] == 2]
        present.sort(key=lambda r, k=key: _sort_key(r.get(k)), reverse=desc)  # type: ignore[misc]
        out = present + missing
    return out


def select_columns(
    rows: list[dict[str, Any]], wanted: Sequence[str], available: Sequence[str]
) -> list[str]:
    """``wanted`` checked against ``available`` (rows' columns too)."""
    known = list(dict.fromkeys([*available, *columns_of(rows)]))
    for column in wanted:
        _check_column("--columns", column, known)
    return list(wanted)


def format_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def render(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table of ``rows`` restricted to ``columns``."""
    cells = [[format_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    lines = [rule, "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |", rule]
    lines += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in cells]
    lines.append(rule)
    return "\n".join(lines)


def save(rows: Sequence[dict[str, Any]], columns: Sequence[str], path: str) -> None:
    """Write ``rows`` to ``path``: ``.csv`` or ``.json`` (a list of objects)."""
    extension = os.path.splitext(path)[1].lower()
    if extension not in (".csv", ".json"):
        raise UsageError(f"--output {path!r}: the file name must end in .csv or .json.")
    selected = [{c: row.get(c) for c in columns} for row in rows]
    with open(path, "w", encoding="utf-8", newline="") as f:
        if extension == ".json":
            json.dump(selected, f, indent=1, default=str)
            f.write("\n")
        else:
            writer = csv.DictWriter(f, fieldnames=list(columns))
            writer.writeheader()
            writer.writerows(selected)
