"""The objective value a library-backed searcher learns from (ZOOpt, HEBO, Ax).

These libraries minimise one number per trial; :func:`loss_of` reads it from a trial's
last result, negated for ``mode="max"``, and says None (with one warning per
searcher) when the result has no usable value.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fasttune.result import DEFAULT_METRIC

logger = logging.getLogger(__name__)


def metric_value(
    result: dict[str, Any] | None, metric: str, warned: set[str], searcher: str, trial_id: str
) -> float | None:
    """``result[metric]`` as a finite float, or None (warning once) when there is none.

    Example:
        >>> metric_value({"acc": 0.5}, "acc", set(), "MySearch", "t1")
        0.5
        >>> metric_value({"acc": float("nan")}, "acc", set(), "MySearch", "t1") is None
        True
    """
    value = (result or {}).get(metric)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        if "no-metric" not in warned:
            warned.add("no-metric")
            logger.warning(
                "Trial %s ended without a numeric %r in its last result (keys: %s); "
                "%s counts it as failed. Check the metric name.",
                trial_id,
                metric,
                sorted(result or {}),
                searcher,
            )
        return None
    return None if math.isnan(number) or math.isinf(number) else number


def loss_of(
    result: dict[str, Any] | None,
    metric: str,
    mode: str,
    warned: set[str],
    searcher: str,
    trial_id: str,
) -> float | None:
    """The value to minimise: the metric, negated for ``mode="max"`` (None if unusable)."""
    value = metric_value(result, metric, warned, searcher, trial_id)
    if value is None:
        return None
    return -value if mode == "max" else value


def resolved_metric_mode(metric: Any, mode: Any, searcher: str) -> tuple[str, str]:
    """The metric and mode to optimise (``DEFAULT_METRIC`` when only a mode is known).

    Raises:
        RuntimeError: If the mode (or both) is still unknown.
    """
    if metric is None and mode:
        metric = DEFAULT_METRIC
    if not metric or not mode:
        raise RuntimeError(
            f"{searcher} needs a metric and a mode, got metric={metric!r} and mode={mode!r}. "
            f"Pass them to {searcher}(metric=..., mode=...) or to "
            "TuneConfig(metric=..., mode=...)."
        )
    return metric, mode
