"""Scoring trials on a metric: per-trial statistics, scopes, modes, DataFrames."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fasttune._support.flatten import flatten_result
from fasttune._support.imports import import_optional
from fasttune.checkpoint import Checkpoint
from fasttune.results._trial_files import SOURCE_CSV, as_number, is_finite, lookup

if TYPE_CHECKING:
    import pandas as pd

MODES = ("min", "max")
SCOPES = ("all", "last", "avg", "last-5-avg", "last-10-avg")


def check_mode(mode: str | None, what: str = "mode") -> None:
    """Raise a ValueError unless ``mode`` is None, ``"min"`` or ``"max"``."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"`{what}` must be one of {list(MODES)} (or None), got {mode!r}.")


def check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise ValueError(
            f"`scope` must be one of {list(SCOPES)}, got {scope!r}. 'all' compares each "
            "trial's best value (min or max, following `mode`)."
        )


def metric_stats(values: Iterable[Any]) -> dict[str, float] | None:
    """``max``, ``min``, ``avg``, ``last``, ``last-5-avg``, ``last-10-avg`` of the numbers.

    Values that are not numbers are skipped; None when no number is left.

    >>> metric_stats([1, 2, "x", 6])["avg"]
    3.0
    """
    numbers = [n for n in map(as_number, values) if n is not None]
    if not numbers:
        return None
    last5, last10 = numbers[-5:], numbers[-10:]
    return {
        "max": max(numbers),
        "min": min(numbers),
        "avg": sum(numbers) / len(numbers),
        "last": numbers[-1],
        "last-5-avg": sum(last5) / len(last5),
        "last-10-avg": sum(last10) / len(last10),
    }


def score(stats: Mapping[str, float], scope: str, mode: str) -> float:
    """The value of ``stats`` that ``scope`` compares (``"all"``: the min or max)."""
    return stats[mode] if scope == "all" else stats[scope]


def is_better(candidate: float, best: float | None, mode: str) -> bool:
    """True if ``candidate`` strictly beats ``best``; NaN beats nothing, anything beats NaN."""
    if best is None or best != best:
        return candidate == candidate or best is None
    return candidate > best if mode == "max" else candidate < best


def best_row(rows: list[dict[str, Any]], metric: str | None, mode: str | None) -> dict[str, Any]:
    """The row with the min/max finite ``metric``; the last row without metric/mode or value."""
    if metric is None or mode is None:
        return rows[-1]
    chosen, best = None, None
    for row in rows:
        value = as_number(lookup(row, metric))
        if value is not None and is_finite(value) and is_better(value, best, mode):
            chosen, best = row, value
    return rows[-1] if chosen is None else chosen


def flat_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result flattened with ``/``, as it appears in data frames."""
    return flatten_result(result)  # flatten_dict(result, "/"), three times faster


def normalized_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result as a row of Ray's ``ExperimentAnalysis.dataframe`` (its result lines
    through ``pandas.json_normalize(..., sep="/")``): the plain values in their places,
    then each nested key's values, depth first; an empty dict leaves no column."""
    row: dict[str, Any] = {}
    nested = []
    for key, value in result.items():
        if isinstance(value, Mapping):
            if value:
                nested.append((str(key), value))
        else:
            row[str(key)] = value
    for key, value in nested:
        _depth_first(row, key + "/", value)
    return row


def _depth_first(row: dict[str, Any], prefix: str, mapping: Mapping[Any, Any]) -> None:
    for key, value in mapping.items():
        name = prefix + str(key)
        if isinstance(value, Mapping):
            if value:
                _depth_first(row, name + "/", value)
        else:
            row[name] = value


def pandas() -> Any:
    return import_optional("pandas", extra="pandas", feature="Result data frames")


def results_dataframe(results: list[dict[str, Any]], source: str | None) -> pd.DataFrame:
    """One row per result: nested keys flattened with ``/`` (``progress.csv`` already is)."""
    pd = pandas()
    if not results:
        return pd.DataFrame()
    if source == SOURCE_CSV:
        return pd.DataFrame.from_records(results)
    return pd.DataFrame.from_records([flat_row(r) for r in results])


def best_checkpoint(
    pairs: list[tuple[Checkpoint, dict[str, Any]]], metric: str, mode: str
) -> Checkpoint | None:
    """The checkpoint with the min/max ``metric``; None if no checkpoint has a number."""
    best, best_value = None, None
    for checkpoint, metrics in pairs:
        value = as_number(lookup(metrics, metric))
        if value is not None and value == value and is_better(value, best_value, mode):
            best, best_value = checkpoint, value
    return best
