"""The ``metric``/``mode`` pair that searchers, search algorithms and schedulers share."""

from __future__ import annotations

import os
from typing import Any

_MODES = ("min", "max")


def strict_metric_checking() -> bool:
    """False when ``TUNE_DISABLE_STRICT_METRIC_CHECKING=1``, Ray Tune's switch (its error
    for a missing metric names it): results may then lack the metric that the
    TuneConfig, the scheduler or the search algorithm names, and schedulers that can
    skip such results do."""
    return os.environ.get("TUNE_DISABLE_STRICT_METRIC_CHECKING", "0").strip() != "1"


def validate_metric_mode(metric: Any, mode: Any) -> None:
    """Check a ``metric``/``mode`` pair as Ray Tune accepts it.

    ``mode`` is ``"min"`` or ``"max"``; for several objectives both are lists of the
    same length (list modes may also be ``"obs"``: observed, not optimised).

    Raises:
        ValueError: Naming the bad parameter and showing its value.

    Example:
        >>> validate_metric_mode("loss", "minimize")
        Traceback (most recent call last):
        ...
        ValueError: `mode` must be 'min' or 'max', got 'minimize'.
    """
    if metric is not None and not isinstance(metric, (str, list, tuple)):
        raise ValueError(f"`metric` must be a result key (str) or a list of keys, got {metric!r}.")
    if mode is None:
        return
    if isinstance(mode, str):
        if mode not in _MODES:
            raise ValueError(f"`mode` must be 'min' or 'max', got {mode!r}.")
        if isinstance(metric, (list, tuple)):
            raise ValueError(
                f"`metric` is a list ({metric!r}) but `mode` is a single string ({mode!r}); "
                "give one mode per metric."
            )
        return
    if not isinstance(mode, (list, tuple)):
        raise ValueError(f"`mode` must be 'min', 'max' or a list of them, got {mode!r}.")
    bad = [m for m in mode if m not in (*_MODES, "obs")]
    if bad:
        raise ValueError(f"Every entry of `mode` must be 'min', 'max' or 'obs'; got {bad!r}.")
    if metric is not None and (not isinstance(metric, (list, tuple)) or len(metric) != len(mode)):
        raise ValueError(
            f"`mode` is a list of {len(mode)} entries, so `metric` must be a list of as many "
            f"keys; got {metric!r}."
        )


class MetricModeMixin:
    """Read-only ``metric`` and ``mode`` properties over ``_metric``/``_mode``.

    The class defaults keep subclasses that skip ``super().__init__()`` working.
    """

    _metric: Any = None
    _mode: Any = None

    @property
    def metric(self) -> Any:
        """The result key being optimised (None until known)."""
        return self._metric

    @property
    def mode(self) -> Any:
        """``"min"`` or ``"max"`` (None until known)."""
        return self._mode

    def _take_metric_mode(self, metric: Any, mode: Any) -> bool:
        """Validate the run's ``metric`` and ``mode`` and keep those given.

        Returns:
            False, keeping nothing, if a metric (or mode) is already set and another
            is given; else True.

        Raises:
            ValueError: From :func:`validate_metric_mode`.
        """
        validate_metric_mode(metric, mode)
        if (self._metric and metric) or (self._mode and mode):
            return False
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        return True
