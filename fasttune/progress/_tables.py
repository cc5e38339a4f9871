"""The parts of a progress report that describe trials: counts, table, errors, best trial."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fasttune.progress._format import Format, abbreviate, is_finite_number, is_number

Columns = Sequence[str] | Mapping[str, str]

TABLE_ORDER = ("RUNNING", "PAUSED", "PENDING", "TERMINATED", "ERROR")
"""The order of trials in the progress table, by status (as Ray Tune)."""

KEEP_ORDER = ("RUNNING", "ERROR", "PAUSED", "PENDING", "TERMINATED")
"""The order in which statuses get rows when the table is truncated."""

_MISSING = object()


def lookup(data: Mapping[str, Any] | None, key: str, default: Any = None) -> Any:
    """``data[key]``, else the nested value at the ``/``-separated path ``key``.

    Example:
        >>> lookup({"opt": {"lr": 0.1}}, "opt/lr")
        0.1
    """
    if not data:
        return default
    value = data.get(key, _MISSING)
    if value is not _MISSING:
        return value
    node: Any = data
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def status_of(trial: Any) -> str:
    return str(trial.status)


def by_status(trials: Sequence[Any]) -> dict[str, list[Any]]:
    """Trials grouped by status string, in their original order."""
    groups: dict[str, list[Any]] = {}
    for trial in trials:
        groups.setdefault(status_of(trial), []).append(trial)
    return groups


def trial_count_str(trials: Sequence[Any], total_samples: int | None) -> str:
    """``Number of trials: 5/10 (2 RUNNING, 3 TERMINATED)`` (statuses sorted by name)."""
    groups = by_status(trials)
    counts = ", ".join(f"{len(groups[s])} {s}" for s in sorted(groups))
    total = ""
    if total_samples:
        total = "/infinite" if total_samples >= sys.maxsize else f"/{total_samples}"
    return f"Number of trials: {len(trials)}{total} ({counts})"


def metric_value(result: Mapping[str, Any], metric: str) -> float | None:
    """``metric`` of ``result`` (``a/b`` for nested keys) as a float, if a finite number."""
    value = lookup(result, metric)
    return float(value) if is_finite_number(value) else None


def _metric_value(trial: Any, metric: str) -> float | None:
    return metric_value(trial.last_result, metric)


def best_trial(
    trials: Sequence[Any],
    metric: str | None,
    mode: str | None,
    start: tuple[Any, float] | None = None,
) -> Any | None:
    """The trial whose last result is best for ``metric`` and ``mode``, or None.

    ``start``: the best of the trials before ``trials`` and its score (higher is
    better), which a trial of ``trials`` must beat.
    """
    if not metric or mode not in ("min", "max"):
        return None
    sign = 1.0 if mode == "max" else -1.0
    best, best_score = start if start is not None else (None, -float("inf"))
    for trial in trials:
        value = _metric_value(trial, metric)
        if value is not None and value * sign > best_score:
            best, best_score = trial, value * sign
    return best


def best_trial_str(trial: Any, metric: str, parameter_columns: Columns | None) -> str:
    """``Current best trial: <id> with <metric>=<value> and parameters={...}``."""
    if parameter_columns:
        params = {key: lookup(trial.config, key) for key in parameter_columns}
    else:
        params = dict(trial.evaluated_params or trial.config)
    value = lookup(trial.last_result, metric)
    return f"Current best trial: {trial.trial_id} with {metric}={value} and parameters={params}"


def fair_filter(groups: Mapping[str, list[Any]], max_rows: int) -> dict[str, list[Any]]:
    """Share ``max_rows`` between statuses in turn, running and errored trials first."""
    order = [s for s in KEEP_ORDER if s in groups] + sorted(set(groups) - set(KEEP_ORDER))
    kept = dict.fromkeys(order, 0)
    left = max_rows
    while left > 0:
        changed = False
        for status in order:
            if left > 0 and kept[status] < len(groups[status]):
                kept[status] += 1
                left -= 1
                changed = True
        if not changed:
            break
    return {status: groups[status][: kept[status]] for status in order}


def _ordered_rows(
    trials: Sequence[Any],
    max_rows: int | None,
    sort_key: Any,
) -> tuple[list[Any], str]:
    groups = by_status(trials)
    if sort_key is not None and "TERMINATED" in groups:
        groups["TERMINATED"] = sorted(groups["TERMINATED"], key=sort_key)
    statuses = [s for s in TABLE_ORDER if s in groups] + sorted(set(groups) - set(TABLE_ORDER))
    if max_rows is None or len(trials) <= max_rows:
        return [t for s in statuses for t in groups[s]], ""
    kept = fair_filter(groups, max_rows)
    rows = [t for s in statuses for t in kept[s]]
    hidden = [
        f"{len(groups[s]) - len(kept[s])} {s}" for s in statuses if len(kept[s]) < len(groups[s])
    ]
    return rows, f"... {len(trials) - len(rows)} more trials not shown ({', '.join(hidden)})"


def _metric_sort_key(metric: str | None, mode: str | None) -> Callable[[Any], Any] | None:
    """Best first for ``metric`` and ``mode``; trials without the metric last."""
    if not metric or mode not in ("min", "max"):
        return None
    sign = -1.0 if mode == "max" else 1.0

    def key(trial: Any) -> tuple[bool, float]:
        value = _metric_value(trial, metric)
        return (value is None, 0.0 if value is None else sign * value)

    return key


def _labels(columns: Columns, keys: Sequence[str], max_len: int) -> list[str]:
    if isinstance(columns, Mapping):
        return [abbreviate(str(columns[k]), max_len) for k in keys]
    return [abbreviate(k, max_len) for k in keys]


def _cell(value: Any, max_len: int) -> Any:
    if value is None or is_number(value):
        return value
    return abbreviate(str(value), max_len)


def progress_table(
    trials: Sequence[Any],
    fmt: Format,
    metric_columns: Columns,
    parameter_columns: Columns | None,
    max_rows: int | None,
    max_column_length: int,
    metric: str | None = None,
    mode: str | None = None,
    sort_by_metric: bool = False,
) -> list[str]:
    """The trial table (one row per trial) and, when truncated, a line on what is hidden.

    Metric columns no shown trial has a value for are left out; parameter columns
    default to every key of the trials' ``evaluated_params``.
    """
    sort_key = _metric_sort_key(metric, mode) if sort_by_metric else None
    rows, overflow = _ordered_rows(trials, max_rows, sort_key)
    # Read once per row: a finished trial's last result is unpacked at each read.
    lasts = [t.last_result for t in rows]
    metric_keys = [k for k in metric_columns if any(lookup(r, k) is not None for r in lasts)]
    if parameter_columns:
        param_keys = list(parameter_columns)
    else:
        param_keys = sorted(set().union(*(t.evaluated_params or {} for t in rows)))
    headers = ["Trial name", "status"]
    headers += _labels(parameter_columns or param_keys, param_keys, max_column_length)
    headers += _labels(metric_columns, metric_keys, max_column_length)
    table = []
    for t, last in zip(rows, lasts):
        row: list[Any] = [str(t), status_of(t)]
        for key in param_keys:
            value = lookup(t.config, key, _MISSING)
            if value is _MISSING:
                value = (t.evaluated_params or {}).get(key)
            row.append(_cell(value, max_column_length))
        row += [_cell(lookup(last, k), max_column_length) for k in metric_keys]
        table.append(row)
    lines = [fmt.table(headers, table)]
    if overflow:
        lines.append(fmt.text(overflow))
    return lines


def error_table(trials: Sequence[Any], fmt: Format, max_rows: int | None) -> list[str]:
    """``Number of errored trials: N`` and a table of name, failures and error file."""
    failed = [t for t in trials if getattr(t, "error_file", None)]
    if not failed:
        return []
    lines = [fmt.text(f"Number of errored trials: {len(failed)}")]
    shown = failed if max_rows is None else failed[:max_rows]
    rows = [[str(t), t.num_failures, t.error_file] for t in shown]
    lines.append(fmt.table(["Trial name", "# failures", "error file"], rows))
    if len(shown) < len(failed):
        lines.append(fmt.text(f"... {len(failed) - len(shown)} more errored trials not shown"))
    return lines
