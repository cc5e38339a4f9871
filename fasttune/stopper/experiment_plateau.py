"""``ExperimentPlateauStopper``: stop the experiment once the best results stop moving."""

from __future__ import annotations

import bisect
import math
from typing import Any

from fasttune._support.numeric import is_int, is_real
from fasttune.stopper.stopper import Stopper
from fasttune.stopper.trial_plateau import metric_value


class ExperimentPlateauStopper(Stopper):
    """Stop the whole experiment when the ``top`` best values have plateaued.

    Every result's ``metric`` joins the ``top`` best values seen across all trials
    (smallest for ``mode="min"``, largest for ``"max"``). Once ``top`` values are known
    and their (population) standard deviation is at most ``std``, the experiment has
    plateaued. It stops at the ``patience``-th consecutive result that finds it
    plateaued (the first one for ``patience`` 0 or 1, as Ray); a result that breaks
    the plateau resets the count. The trial whose result triggers the stop is
    stopped too. NaN values are ignored.

    Args:
        metric: Result key to watch (``a/b`` reaches nested dicts).
        std: Standard deviation at or below which the top values have plateaued.
        top: How many best values to watch (> 1).
        mode: ``"min"`` or ``"max"``.
        patience: Consecutive plateaued results needed to stop.

    Raises:
        ValueError: A parameter is out of range (the message names it).
        KeyError: A result lacks ``metric`` (the message lists the reported keys).

    Example:
        >>> stopper = ExperimentPlateauStopper("loss", std=0.01, top=2, patience=2)
        >>> [stopper("t1", {"loss": loss}) for loss in (1.0, 0.5, 0.5, 0.5)]
        [False, False, False, True]
        >>> stopper.stop_all()
        True
    """

    def __init__(
        self,
        metric: str,
        std: float = 0.001,
        top: int = 10,
        mode: str = "min",
        patience: int = 0,
    ):
        if not isinstance(metric, str) or not metric:
            raise ValueError(
                f"ExperimentPlateauStopper: `metric` must be a result key, got {metric!r}."
            )
        if mode not in ("min", "max"):
            raise ValueError(
                f"ExperimentPlateauStopper: `mode` must be 'min' or 'max', got {mode!r}."
            )
        if not is_int(top) or top <= 1:
            raise ValueError(f"ExperimentPlateauStopper: `top` must be an int > 1, got {top!r}.")
        if not is_int(patience) or patience < 0:
            raise ValueError(
                f"ExperimentPlateauStopper: `patience` must be an int >= 0, got {patience!r}."
            )
        if not is_real(std) or not std > 0:
            raise ValueError(f"ExperimentPlateauStopper: `std` must be a number > 0, got {std!r}.")
        self._metric = metric
        self._std = std
        self._top = int(top)
        self._mode = mode
        self._patience = int(patience)
        self._iterations = 0
        # The best values, sorted ascending (negated in max mode, so best come first).
        self._top_values: list[float] = []

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = metric_value(result, self._metric)
        if value is None:
            raise KeyError(
                f"ExperimentPlateauStopper: the result of trial {trial_id} has no "
                f"{self._metric!r}; reported keys: {sorted(result)}. Report it in every "
                "result or change the stopper's metric."
            )
        value = float(value)
        if not math.isnan(value):
            bisect.insort(self._top_values, value if self._mode == "min" else -value)
            del self._top_values[self._top :]
        self._iterations = self._iterations + 1 if self.has_plateaued() else 0
        return self.stop_all()

    def has_plateaued(self) -> bool:
        """Whether the ``top`` best values are known and within ``std`` of each other."""
        if len(self._top_values) < self._top:
            return False
        import numpy as np  # here, not at import: make_stopper loads this module for every run

        return bool(np.std(self._top_values) <= self._std)

    def stop_all(self) -> bool:
        return self.has_plateaued() and self._iterations >= self._patience
