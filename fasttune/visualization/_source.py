"""What a plot reads: any way of naming an experiment, turned into an ExperimentView."""

from __future__ import annotations

import math
import os
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.results.experiment_view import ExperimentView, TrialSummary


def plotly_go() -> Any:
    """``plotly.graph_objects``, or an error naming the extra to install."""
    return import_optional("plotly.graph_objects", extra="plot", feature="fasttune.visualization")


def as_view(source: Any, metric: str | None = None, mode: str | None = None) -> ExperimentView:
    """An :class:`ExperimentView` of ``source``.

    Args:
        source: A ``ResultGrid``, an ``ExperimentAnalysis``, an experiment folder
            (path or URL) or an ``ExperimentView``.
        metric: Overrides the experiment's metric.
        mode: Overrides the experiment's mode.

    Raises:
        TypeError: ``source`` is none of these.
    """
    if isinstance(source, ExperimentView):
        if metric:
            source.metric = metric
        if mode:
            source.mode = mode
        return source
    if isinstance(source, (str, os.PathLike)):
        return ExperimentView(os.path.expanduser(os.fspath(source)), metric=metric, mode=mode)
    path = getattr(source, "experiment_path", None)
    if isinstance(path, str):  # ResultGrid, ExperimentAnalysis
        metric = metric or getattr(source, "default_metric", None)
        mode = mode or getattr(source, "default_mode", None)
        return ExperimentView(path, metric=metric, mode=mode)
    raise TypeError(
        "Pass a ResultGrid, an ExperimentAnalysis or an experiment folder path, "
        f"got {type(source).__name__}: {source!r}."
    )


def require_metric(view: ExperimentView, metric: str | None) -> str:
    metric = metric or view.metric
    if not metric:
        raise ValueError(
            f"metric: the experiment {view.path!r} names no metric; pass metric=... "
            f"(reported: {', '.join(view.metrics()) or 'nothing yet'})."
        )
    return metric


def number(value: Any) -> float | None:
    """``value`` as a finite float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def scored(view: ExperimentView, metric: str) -> list[tuple[TrialSummary, float]]:
    """Trials with a finite last ``metric``, in creation order, with that value."""
    pairs = []
    for trial in view.trials:
        value = number(trial.last_result.get(metric))
        if value is not None:
            pairs.append((trial, value))
    return pairs


def param_names(trials: list[TrialSummary]) -> list[str]:
    """Config keys that vary across ``trials`` and hold numbers, strings or bools."""
    names: dict[str, set[str]] = {}
    for trial in trials:
        for key, value in trial.config.items():
            if isinstance(value, (int, float, str, bool)) or value is None:
                names.setdefault(key, set()).add(repr(value))
    return [k for k, values in names.items() if len(values) > 1]


def encode_param(trials: list[TrialSummary], key: str) -> tuple[list[float], list[str] | None]:
    """One column of a parameter: numbers as they are, other values as category codes."""
    values = [t.config.get(key) for t in trials]
    if all(number(v) is not None for v in values):
        return [float(v) for v in values], None  # type: ignore[arg-type]
    categories = sorted({repr(v) for v in values})
    codes = {c: i for i, c in enumerate(categories)}
    return [float(codes[repr(v)]) for v in values], categories
