"""Hyperparameter importance: scikit-learn's permutation importance on a random forest."""

from __future__ import annotations

from typing import Any

from fasttune._support.imports import import_optional
from fasttune.visualization._source import (
    as_view,
    encode_param,
    param_names,
    plotly_go,
    require_metric,
    scored,
)


def param_importances(source: Any, metric: str | None = None, *, seed: int = 0) -> dict[str, float]:
    """Each varying config parameter's importance for ``metric``, largest first.

    A ``RandomForestRegressor`` is fit on the trials' configs (categories as codes)
    and their last ``metric`` values; the importance of a parameter is the drop of
    its R^2 when that column is shuffled (``sklearn.inspection.permutation_importance``),
    clipped at 0 and normalised to sum to 1.

    Raises:
        ValueError: Fewer than 2 trials reported ``metric``, or no parameter varies.
    """
    view = as_view(source, metric)
    metric = require_metric(view, metric)
    pairs = scored(view, metric)
    trials = [t for t, _ in pairs]
    names = param_names(trials)
    if len(pairs) < 2 or not names:
        raise ValueError(
            f"param importances of {metric!r} need 2 or more trials that reported it and "
            f"a config parameter that varies; {view.path!r} has {len(pairs)} such trials "
            f"and varying parameters {names}."
        )
    np = import_optional("numpy", extra="plot")
    ensemble = import_optional("sklearn.ensemble", extra="plot", feature="param importances")
    inspection = import_optional("sklearn.inspection", extra="plot")
    x = np.array([encode_param(trials, name)[0] for name in names]).T
    y = np.array([value for _, value in pairs])
    forest = ensemble.RandomForestRegressor(n_estimators=64, max_depth=64, random_state=seed)
    forest.fit(x, y)
    found = inspection.permutation_importance(forest, x, y, n_repeats=5, random_state=seed)
    raw = np.clip(found.importances_mean, 0, None)
    total = float(raw.sum())
    shares = raw / total if total > 0 else np.full(len(names), 1.0 / len(names))
    ranked = sorted(zip(names, shares.tolist()), key=lambda p: -p[1])
    return dict(ranked)


def plot_param_importances(
    source: Any, metric: str | None = None, mode: str | None = None, *, seed: int = 0
) -> Any:
    """A horizontal bar chart of :func:`param_importances` (``mode`` is not needed)."""
    view = as_view(source, metric, mode)
    importances = param_importances(view, metric, seed=seed)
    go = plotly_go()
    names = list(importances)[::-1]
    figure = go.Figure(
        go.Bar(
            x=[importances[n] for n in names],
            y=names,
            orientation="h",
            text=[f"{importances[n]:.2f}" for n in names],
            textposition="auto",
        )
    )
    figure.update_layout(
        title=f"Hyperparameter importance for {view.metric}",
        xaxis_title="importance (permutation, random forest)",
        yaxis_title="parameter",
    )
    return figure
