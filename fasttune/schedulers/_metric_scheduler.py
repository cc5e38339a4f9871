"""The metric/mode handling shared by schedulers that compare trials by a metric.

ASHA and the median stopping rule need a metric and a mode, from their constructor or
from ``TuneConfig`` (through :meth:`set_search_properties`), and read two numbers from
each result: the metric and a time attribute.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

from fasttune import result as R
from fasttune._support.metric_mode import strict_metric_checking, validate_metric_mode
from fasttune.experiment.trial import Trial
from fasttune.schedulers.trial_scheduler import FIFOScheduler

_MISSING = object()


def lookup(result: Mapping[str, Any], key: str) -> Any:
    """``result[key]``, following ``a/b`` into nested dicts; ``_MISSING`` if absent."""
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def reported_keys(result: Mapping[str, Any]) -> list[str]:
    """The result's keys as shown in error messages (config entries left out)."""
    return sorted(k for k in result if k != R.CONFIG and not k.startswith("config/"))


class MetricModeScheduler(FIFOScheduler):
    """A FIFO-ordered scheduler that needs a ``metric`` and a ``mode`` to work.

    The constructor's ``metric``/``mode`` are the scheduler's own; ``TuneConfig`` may
    supply the ones it lacks. As on Ray, giving a value in both places is a conflict
    (:meth:`set_search_properties` returns False). A value received from ``TuneConfig``
    is replaced by the next one received, so a restored experiment configures the
    unpickled scheduler again without a conflict.
    """

    _time_attr: str = R.TRAINING_ITERATION  # the result key measuring progress

    def __init__(self, metric: str | None, mode: str | None):
        super().__init__()
        if metric is not None and not isinstance(metric, str):
            raise ValueError(f"{self._name}: `metric` must be a result key (str), got {metric!r}.")
        if mode is not None and mode not in ("min", "max"):
            raise ValueError(f"{self._name}: `mode` must be 'min' or 'max', got {mode!r}.")
        self._metric = metric
        self._mode = mode
        self._own_metric = metric is not None
        self._own_mode = mode is not None

    @property
    def _name(self) -> str:
        return type(self).__name__

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Take ``TuneConfig``'s metric and mode where the constructor gave none.

        Returns:
            False if the constructor already set the metric (or mode) and another is
            given, as Ray; True otherwise.

        Raises:
            ValueError: If ``mode`` is not ``"min"``/``"max"``, or if after this call
                the scheduler still lacks a mode (a mode alone selects the anonymous
                default metric, as Ray).
        """
        validate_metric_mode(metric, mode)
        if isinstance(metric, (list, tuple)) or isinstance(mode, (list, tuple)):
            raise ValueError(
                f"{self._name} optimises one metric; got metric={metric!r}, mode={mode!r}."
            )
        if (metric and self._own_metric) or (mode and self._own_mode):
            return False
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        self._require_metric_mode()
        return True

    def _require_metric_mode(self) -> None:
        """Fill the anonymous metric for a mode alone; raise if the mode is missing."""
        if self._metric is None and self._mode:
            self._metric = R.DEFAULT_METRIC
        if self._mode is None:
            missing = "`metric` and `mode`" if self._metric is None else "`mode`"
            raise ValueError(
                f"{self._name} needs {missing} to compare trials; got metric="
                f"{self._metric!r}, mode={self._mode!r}. Pass them to the scheduler "
                f"({self._name}(metric='loss', mode='min')) or to "
                "TuneConfig(metric=..., mode=...)."
            )

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        self._require_metric_mode()

    # ------------------------------------------------------------------ reading results
    def _number(self, trial: Trial, key: str, value: Any) -> float:
        if isinstance(value, numbers.Real):
            return float(value)
        raise TypeError(
            f"{self._name}: trial {trial} reported {key!r} = {value!r}, which is not a "
            "number. Report a number (int or float) under that key."
        )

    def _read(
        self, trial: Trial, result: Mapping[str, Any], strict: bool = True
    ) -> tuple[float, float] | None:
        """(time, metric) from ``result``; None for a result without the default metric
        (or, unless ``strict`` and ``TUNE_DISABLE_STRICT_METRIC_CHECKING`` is not 1,
        without either key).

        Raises:
            ValueError: The result lacks the time attribute or the metric (the message
                lists the reported keys).
            TypeError: One of them is not a number.
        """
        if self._metric is None or self._mode is None:
            self._require_metric_mode()
        time = lookup(result, self._time_attr)
        value = lookup(result, self._metric)
        if value is _MISSING and self._metric == R.DEFAULT_METRIC:
            return None  # the anonymous metric (a mode alone) is not required, as Ray
        if (value is _MISSING or time is _MISSING) and not (strict and strict_metric_checking()):
            return None
        for key, found, role in (
            (self._metric, value, "metric"),
            (self._time_attr, time, "time_attr"),
        ):
            if found is _MISSING:
                raise ValueError(
                    f"{self._name}: trial {trial} reported a result without {key!r} (the "
                    f"scheduler's {role}). Reported keys: {reported_keys(result)}. Report "
                    f"{key!r} in every result, or set the scheduler's {role} to a key "
                    "you report."
                )
        return self._number(trial, self._time_attr, time), self._number(trial, self._metric, value)
