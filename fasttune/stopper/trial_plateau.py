"""``TrialPlateauStopper``: stop a trial once its metric stops moving."""

from __future__ import annotations

import math
import numbers
from collections import deque
from collections.abc import Mapping
from typing import Any

from fasttune.stopper.stopper import Stopper


def metric_value(result: Mapping[str, Any], key: str) -> Any:
    """``result[key]``, following ``a/b`` into nested dicts; None if absent."""
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class TrialPlateauStopper(Stopper):
    """Stop a trial when the standard deviation of its last results falls below ``std``.

    Per trial, the last ``num_results`` values of ``metric`` are kept. After at least
    ``grace_period`` results, once ``num_results`` values are known, the trial stops
    if their (population) standard deviation is strictly below ``std`` and, with a
    ``metric_threshold``, the current value is at or better than it (``<=`` it for
    ``mode="min"``, ``>=`` for ``"max"``). A result without the metric, or with a
    non-numeric value, counts as a result but blocks stopping while it is among the
    last ``num_results``; NaN does the same.

    Args:
        metric: Result key to watch (``a/b`` reaches nested dicts).
        std: Standard deviation below which the trial has plateaued.
        num_results: How many of the last results the deviation is computed over.
        grace_period: Results a trial reports before it may be stopped.
        metric_threshold: If given, the value the metric must reach before stopping.
        mode: ``"min"`` or ``"max"``; required with ``metric_threshold``.

    Raises:
        ValueError: A parameter is out of range, or ``metric_threshold`` comes without
            a mode.

    Example:
        >>> stopper = TrialPlateauStopper("loss", std=0.01, num_results=3, grace_period=3)
        >>> [stopper("t1", {"loss": loss}) for loss in (1.0, 0.5, 0.502, 0.501, 0.5)]
        [False, False, False, True, True]
    """

    def __init__(
        self,
        metric: str,
        std: float = 0.01,
        num_results: int = 4,
        grace_period: int = 4,
        metric_threshold: float | None = None,
        mode: str | None = None,
    ):
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"TrialPlateauStopper: `metric` must be a result key, got {metric!r}.")
        if not _is_number(std) or std < 0:
            raise ValueError(f"TrialPlateauStopper: `std` must be a number >= 0, got {std!r}.")
        for name, value, low in (
            ("num_results", num_results, 1),
            ("grace_period", grace_period, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
                raise ValueError(
                    f"TrialPlateauStopper: `{name}` must be an int >= {low}, got {value!r}."
                )
        if mode is not None and mode not in ("min", "max"):
            raise ValueError(f"TrialPlateauStopper: `mode` must be 'min' or 'max', got {mode!r}.")
        if metric_threshold is not None:
            if not _is_number(metric_threshold):
                raise ValueError(
                    "TrialPlateauStopper: `metric_threshold` must be a number, got "
                    f"{metric_threshold!r}."
                )
            if mode is None:
                raise ValueError(
                    f"TrialPlateauStopper: with metric_threshold={metric_threshold!r}, `mode` "
                    "must be 'min' (stop only at or below it) or 'max' (at or above it)."
                )
        self._metric = metric
        self._std = std
        self._num_results = int(num_results)
        self._grace_period = int(grace_period)
        self._metric_threshold = metric_threshold
        self._mode = mode
        self._iter: dict[str, int] = {}
        self._trial_results: dict[str, deque[Any]] = {}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = metric_value(result, self._metric)
        window = self._trial_results.get(trial_id)
        if window is None:
            window = self._trial_results[trial_id] = deque(maxlen=self._num_results)
        window.append(value)
        self._iter[trial_id] = count = self._iter.get(trial_id, 0) + 1
        if count < self._grace_period or len(window) < self._num_results:
            return False
        if not all(_is_number(v) and not math.isnan(v) for v in window):
            return False
        threshold = self._metric_threshold
        if threshold is not None:
            if self._mode == "min" and value > threshold:
                return False
            if self._mode == "max" and value < threshold:
                return False
        import numpy as np  # here, not at import: make_stopper loads this module for every run

        return bool(np.std(np.asarray(window, dtype=float)) < self._std)

    def stop_all(self) -> bool:
        return False
