"""Learning curves, parallel coordinates, slices and the optimisation history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fasttune import result as R
from fasttune._support.imports import import_optional
from fasttune.results.experiment_view import ExperimentView, TrialSummary
from fasttune.visualization._source import (
    as_view,
    encode_param,
    number,
    param_names,
    plotly_go,
    require_metric,
    scored,
)

X_AXES = (R.TRAINING_ITERATION, R.TIME_TOTAL_S)


def plot_learning_curves(
    source: Any,
    metric: str | None = None,
    mode: str | None = None,
    *,
    trial_ids: Sequence[str] | None = None,
    x: str = R.TRAINING_ITERATION,
    max_trials: int = 50,
    log_y: bool = False,
    smoothing: float = 0.0,
) -> Any:
    """One line per trial: ``metric`` against ``x`` over all its results.

    Args:
        source: ResultGrid, ExperimentAnalysis, experiment path or ExperimentView.
        metric: The result key to draw (default: the experiment's metric).
        mode: ``"min"``/``"max"``: with more than ``max_trials`` trials, the best ones
            are drawn (default: the experiment's mode; else the first ones).
        trial_ids: Draw these trials only.
        x: ``"training_iteration"`` or ``"time_total_s"`` (any result key works).
        max_trials: At most this many lines.
        log_y: Logarithmic y axis.
        smoothing: Exponential moving average weight in [0, 1) (0: raw values).

    Raises:
        ValueError: ``smoothing`` is outside [0, 1), an unknown trial id, or no metric.
    """
    if not 0 <= smoothing < 1:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing!r}.")
    view = as_view(source, metric, mode)
    metric = require_metric(view, metric)
    if trial_ids is not None:
        trials = [view.trial(t) for t in trial_ids]
    else:
        ranked = scored(view, metric)
        if view.mode and len(ranked) > max_trials:
            ranked.sort(key=lambda p: p[1], reverse=view.mode == "max")
        trials = [t for t, _ in ranked[:max_trials]]
    go = plotly_go()
    figure = go.Figure()
    for trial in trials:
        xs, ys = [], []
        average = None
        for result in view.history(trial.trial_id):
            xv, yv = number(result.get(x)), number(result.get(metric))
            if xv is None or yv is None:
                continue
            average = yv if average is None else smoothing * average + (1 - smoothing) * yv
            xs.append(xv)
            ys.append(average)
        figure.add_trace(
            go.Scatter(x=xs, y=ys, mode="lines+markers", name=trial.trial_id, marker={"size": 4})
        )
    figure.update_layout(
        title=f"Learning curves: {metric}", xaxis_title=x, yaxis_title=metric, legend_title="trial"
    )
    if log_y:
        figure.update_yaxes(type="log")
    return figure


def plot_parallel_coordinate(
    source: Any,
    metric: str | None = None,
    mode: str | None = None,
    *,
    params: Sequence[str] | None = None,
) -> Any:
    """One line per trial across its config parameters and its last ``metric``.

    Categorical parameters get one tick per category. Lines are coloured by the
    metric (brighter is better when ``mode`` is known).

    Raises:
        ValueError: No trial reported ``metric``, or an unknown parameter in ``params``.
    """
    view = as_view(source, metric, mode)
    metric = require_metric(view, metric)
    pairs = scored(view, metric)
    if not pairs:
        raise ValueError(f"No trial of {view.path!r} reported a number for {metric!r} yet.")
    trials = [t for t, _ in pairs]
    names = list(params) if params is not None else param_names(trials)
    known = {k for t in trials for k in t.config}
    for name in names:
        if name not in known:
            raise ValueError(f"params: no config parameter {name!r}; known: {sorted(known)}.")
    dimensions = []
    for name in names:
        values, categories = encode_param(trials, name)
        dimension: dict[str, Any] = {"label": name, "values": values}
        if categories is not None:
            dimension["tickvals"] = list(range(len(categories)))
            dimension["ticktext"] = categories
        dimensions.append(dimension)
    scores = [v for _, v in pairs]
    dimensions.append({"label": metric, "values": scores})
    go = plotly_go()
    line = {
        "color": scores,
        "colorscale": "Viridis",
        "showscale": True,
        "reversescale": view.mode == "min",
    }
    figure = go.Figure(go.Parcoords(line=line, dimensions=dimensions))
    figure.update_layout(title=f"Parallel coordinates: {metric}")
    return figure


def plot_optimization_history(
    source: Any, metric: str | None = None, mode: str | None = None
) -> Any:
    """Each trial's last ``metric`` in creation order, with the best so far.

    Raises:
        ValueError: No mode is known (pass ``mode``), or no trial reported ``metric``.
    """
    view = as_view(source, metric, mode)
    metric = require_metric(view, metric)
    if view.mode not in ("min", "max"):
        raise ValueError(
            f"mode: the experiment {view.path!r} names no mode; pass mode='min' or 'max'."
        )
    pairs = scored(view, metric)
    if not pairs:
        raise ValueError(f"No trial of {view.path!r} reported a number for {metric!r} yet.")
    best: list[float] = []
    for _, value in pairs:
        better = min if view.mode == "min" else max
        best.append(value if not best else better(best[-1], value))
    go = plotly_go()
    order = list(range(len(pairs)))
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=order,
            y=[v for _, v in pairs],
            mode="markers",
            name=metric,
            text=[t.trial_id for t, _ in pairs],
        )
    )
    figure.add_trace(go.Scatter(x=order, y=best, mode="lines", name=f"best so far ({view.mode})"))
    figure.update_layout(
        title=f"Optimization history: {metric}", xaxis_title="trial (in order)", yaxis_title=metric
    )
    return figure


def plot_experiments_comparison(
    sources: Sequence[Any], metric: str | None = None, mode: str | None = None
) -> Any:
    """The best-so-far ``metric`` of two or more experiments on one chart.

    Args:
        sources: Experiments (ResultGrid, ExperimentAnalysis, path or ExperimentView).
        metric: The metric to compare (default: each experiment's own, which must agree).
        mode: ``"min"``/``"max"`` (default: each experiment's own).

    Raises:
        ValueError: Fewer than 2 experiments, or their metrics/modes differ or are unknown.
    """
    views = [as_view(source, metric, mode) for source in sources]
    if len(views) < 2:
        raise ValueError(f"sources: pass 2 or more experiments to compare, got {len(views)}.")
    metrics = {v.metric for v in views}
    modes = {v.mode for v in views}
    if len(metrics) != 1 or None in metrics or len(modes) != 1 or None in modes:
        raise ValueError(
            "metric/mode: the experiments name different or no metrics and modes "
            f"({sorted(map(str, metrics))}, {sorted(map(str, modes))}); pass metric= and mode=."
        )
    go = plotly_go()
    figure = go.Figure()
    for view in views:
        best: list[float] = []
        for _, value in scored(view, view.metric or ""):
            better = min if view.mode == "min" else max
            best.append(value if not best else better(best[-1], value))
        figure.add_trace(go.Scatter(x=list(range(len(best))), y=best, mode="lines", name=view.name))
    figure.update_layout(
        title=f"Best {views[0].metric} so far ({views[0].mode})",
        xaxis_title="trial (in order)",
        yaxis_title=views[0].metric,
    )
    return figure


def best_values(view: ExperimentView, metric: str) -> list[tuple[TrialSummary, float]]:
    """Each trial's best ``metric`` over all its results by the view's mode (its last
    value when no mode is known), in creation order; trials without one left out."""
    if view.mode not in ("min", "max"):
        return scored(view, metric)
    better = min if view.mode == "min" else max
    pairs = []
    for trial in view.trials:
        values = [
            v for r in view.history(trial.trial_id) if (v := number(r.get(metric))) is not None
        ]
        if not values:  # no result file yet: the state's last result, if any
            last = number(trial.last_result.get(metric))
            values = [] if last is None else [last]
        if values:
            pairs.append((trial, better(values)))
    return pairs


def plot_slice(
    source: Any,
    metric: str | None = None,
    mode: str | None = None,
    *,
    params: Sequence[str] | None = None,
) -> Any:
    """A scatter of ``metric`` against each config parameter, one point per trial.

    Each trial's point is its best ``metric`` (by ``mode``; its last value when no mode
    is known). With several parameters, one panel per parameter side by side, sharing
    the metric axis (as ``optuna.visualization.plot_slice``). Categorical parameters
    get one x tick per category.

    Args:
        source: ResultGrid, ExperimentAnalysis, experiment path or ExperimentView.
        metric: The result key to draw (default: the experiment's metric).
        mode: ``"min"``/``"max"`` (default: the experiment's mode).
        params: The parameters to draw (default: every config parameter that varies).

    Raises:
        ValueError: No trial reported ``metric``, an unknown parameter in ``params``,
            or no parameter varies.
    """
    view = as_view(source, metric, mode)
    metric = require_metric(view, metric)
    pairs = best_values(view, metric)
    if not pairs:
        raise ValueError(f"No trial of {view.path!r} reported a number for {metric!r} yet.")
    trials = [t for t, _ in pairs]
    known = {k for t in trials for k in t.config}
    names = list(params) if params is not None else param_names(trials)
    for name in names:
        if name not in known:
            raise ValueError(f"params: no config parameter {name!r}; known: {sorted(known)}.")
    if not names:
        raise ValueError(
            f"params: no config parameter of {view.path!r} varies; known: {sorted(known)}."
        )
    subplots = import_optional("plotly.subplots", extra="plot", feature="fasttune.visualization")
    go = plotly_go()
    figure = subplots.make_subplots(
        rows=1, cols=len(names), shared_yaxes=True, subplot_titles=names
    )
    scores = [v for _, v in pairs]
    ids = [t.trial_id for t in trials]
    for column, name in enumerate(names, start=1):
        values = [t.config.get(name) for t in trials]
        numeric = all(number(v) is not None for v in values)
        xs = [float(v) if numeric else repr(v) for v in values]  # type: ignore[arg-type]
        figure.add_trace(
            go.Scatter(
                x=xs,
                y=scores,
                mode="markers",
                name=name,
                text=ids,
                hovertemplate="%{text}<br>" + name + "=%{x}<br>" + metric + "=%{y}<extra></extra>",
                marker={"color": list(range(len(ids))), "colorscale": "Blues", "size": 8},
                showlegend=False,
            ),
            row=1,
            col=column,
        )
        figure.update_xaxes(title_text=name, row=1, col=column)
        if not numeric:
            figure.update_xaxes(
                type="category", categoryorder="category ascending", row=1, col=column
            )
    how = f"best per trial, {view.mode}" if view.mode in ("min", "max") else "last per trial"
    figure.update_yaxes(title_text=metric, row=1, col=1)
    figure.update_layout(title=f"Slice: {metric} ({how})")
    return figure
