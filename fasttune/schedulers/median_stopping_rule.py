"""``MedianStoppingRule``: stop trials that fall below the median of the others.

The rule of Google Vizier (https://research.google.com/pubs/pub46180.html), as Ray
Tune applies it: at time ``t`` a trial stops if its best value so far is strictly
worse than the median, over the other trials that have reached ``t``, of their mean
value between ``grace_period`` and ``t``.
"""

from __future__ import annotations

import bisect
import copy
import logging
import math
import numbers
import statistics
from typing import Any

from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers._metric_scheduler import MetricModeScheduler
from fasttune.schedulers.trial_scheduler import ControllerView, TrialScheduler

logger = logging.getLogger(__name__)


def _check(name: str, value: Any, low: float, integral: bool = False) -> None:
    kind = numbers.Integral if integral else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or value < low:
        what = "an int" if integral else "a number"
        raise ValueError(f"MedianStoppingRule: `{name}` must be {what} >= {low}, got {value!r}.")


class _Curve:
    """One trial's (time, value) results, with prefix sums for windowed means.

    While times only grow (the usual case) a mean over a time window costs two
    bisections; after a trial resumed from an earlier checkpoint, a scan.
    """

    def __init__(self, maximize: bool):
        self.maximize = maximize
        self.times: list[float] = []
        self.values: list[float] = []
        self.sums = [0.0]  # sums[i]: sum of the non-NaN values before index i
        self.counts = [0]
        self.ordered = True
        self.best = math.nan  # best non-NaN value so far

    def add(self, time: float, value: float) -> None:
        if self.times and time < self.times[-1]:
            self.ordered = False
        self.times.append(time)
        self.values.append(value)
        known = not math.isnan(value)
        self.sums.append(self.sums[-1] + (value if known else 0.0))
        self.counts.append(self.counts[-1] + known)
        if known and (
            math.isnan(self.best) or (value > self.best if self.maximize else value < self.best)
        ):
            self.best = value

    def records(self) -> list[tuple[float, float]]:
        return list(zip(self.times, self.values))

    def mean(self, low: float, high: float) -> float | None:
        """Mean of the non-NaN values with ``low <= time <= high``; None if none."""
        if self.ordered:
            i, j = bisect.bisect_left(self.times, low), bisect.bisect_right(self.times, high)
            count = self.counts[j] - self.counts[i]
            return (self.sums[j] - self.sums[i]) / count if count else None
        window = [
            v for t, v in zip(self.times, self.values) if low <= t <= high and not math.isnan(v)
        ]
        return sum(window) / len(window) if window else None


class MedianStoppingRule(MetricModeScheduler):
    """Stop a trial whose best result is worse than the median of the others' means.

    For each result at time ``t >= grace_period``: the other trials whose latest
    result is at ``t`` or later each give their mean metric over results with
    ``grace_period <= time <= t``. With at least ``min_samples_required`` such means,
    the trial stops (or pauses, if not ``hard_stop``) when its best value so far is
    strictly worse than their median. With fewer, the trial *yields*: it pauses if
    other trials are waiting to run and ``min_time_slice`` has passed since its last
    pause, else it continues. A trial paused by the rule (``hard_stop=False``) is
    never judged again. NaN values are left out of means and bests (a trial with
    only NaN values is worse than any median).

    Differences from Ray, on purpose: a trial with no result between
    ``grace_period`` and ``t`` gives no mean (Ray's NaN mean would stop every trial
    compared with it); NaN values do not poison the median; a trial's final result is
    counted once (Ray adds it again when the trial completes).

    Args:
        time_attr: Result key measuring progress; must increase monotonically.
        metric: Result key to compare trials by (or from ``TuneConfig``).
        mode: ``"min"`` or ``"max"`` (or from ``TuneConfig``).
        grace_period: Time before which no trial is stopped and results are left out
            of the means.
        min_samples_required: Means of other trials needed to apply the rule.
        min_time_slice: Time a trial runs between two yields.
        hard_stop: Stop trials (True) or pause them (False; they are resumed and
            run FIFO when nothing else waits).

    Raises:
        ValueError: A parameter is out of range (the message names it).

    Example:
        >>> rule = MedianStoppingRule("training_iteration", "acc", "max", grace_period=1,
        ...                           min_samples_required=1)
        >>> class T:
        ...     def __init__(self, trial_id):
        ...         self.trial_id = trial_id
        >>> rule.on_trial_result(None, T("good"), {"training_iteration": 1, "acc": 0.9})
        'CONTINUE'
        >>> rule.on_trial_result(None, T("bad"), {"training_iteration": 1, "acc": 0.1})
        'STOP'
    """

    # Decisions are taken after each result; the trial must not run past them.
    _supports_buffered_results = False

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        grace_period: float = 60.0,
        min_samples_required: int = 3,
        min_time_slice: float = 0,
        hard_stop: bool = True,
    ):
        if not isinstance(time_attr, str) or not time_attr:
            raise ValueError(
                f"MedianStoppingRule: `time_attr` must be a result key (str), got {time_attr!r}."
            )
        _check("grace_period", grace_period, 0)
        _check("min_samples_required", min_samples_required, 1, integral=True)
        _check("min_time_slice", min_time_slice, 0)
        super().__init__(metric, mode)
        self._time_attr = time_attr
        self._grace_period = grace_period
        self._min_samples_required = int(min_samples_required)
        self._min_time_slice = min_time_slice
        self._hard_stop = bool(hard_stop)
        self._results: dict[str, _Curve] = {}  # trial_id -> its results
        self._stopped_trials: set[str] = set()
        self._last_pause: dict[str, float] = {}

    # ------------------------------------------------------------------ hooks
    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        read = self._read(trial, result)
        if read is None or trial.trial_id in self._stopped_trials:
            # Paused by the rule and resumed: it now runs FIFO, as on Ray.
            return TrialScheduler.CONTINUE
        time, value = read
        curve = self._curve(trial.trial_id)
        curve.add(time, value)
        if time < self._grace_period:
            return TrialScheduler.CONTINUE

        means = []
        for trial_id, other in self._results.items():
            if trial_id != trial.trial_id and other.times[-1] >= time:
                mean = other.mean(self._grace_period, time)
                if mean is not None:
                    means.append(mean)
        if len(means) < self._min_samples_required:
            return self._on_insufficient_samples(tune_controller, trial, time)

        median = statistics.median(means)
        best = curve.best
        worse = best < median if self._mode == "max" else best > median
        if math.isnan(best) or worse:
            logger.debug(
                "MedianStoppingRule: stopping %s (best %s, median %s)", trial, best, median
            )
            self._stopped_trials.add(trial.trial_id)
            return TrialScheduler.STOP if self._hard_stop else TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def on_trial_complete(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> None:
        read = self._read(trial, result, strict=False)
        if read is None:
            return
        curve = self._curve(trial.trial_id)
        if not curve.times or curve.times[-1] != read[0]:  # not already counted
            curve.add(*read)

    def on_trial_remove(self, tune_controller: ControllerView, trial: Trial) -> None:
        self._last_pause.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        return f"Using MedianStoppingRule: num_stopped={len(self._stopped_trials)}."

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        return copy.deepcopy(self.__dict__)

    def set_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(copy.deepcopy(state))

    # ------------------------------------------------------------------ helpers
    def _on_insufficient_samples(
        self, view: ControllerView | None, trial: Trial, time: float
    ) -> str:
        """Yield to waiting trials, at most once per ``min_time_slice``."""
        last = self._last_pause.get(trial.trial_id, -math.inf)
        if time - last > self._min_time_slice and view is not None:
            waiting = (TrialStatus.PENDING, TrialStatus.PAUSED)
            if any(t.status in waiting for t in view.get_live_trials()):
                self._last_pause[trial.trial_id] = time
                return TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def _curve(self, trial_id: str) -> _Curve:
        curve = self._results.get(trial_id)
        if curve is None:
            curve = self._results[trial_id] = _Curve(self._mode == "max")
        return curve
