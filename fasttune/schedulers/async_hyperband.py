"""``AsyncHyperBandScheduler`` (ASHA) and its alias ``ASHAScheduler``.

Asynchronous successive halving (Li et al., https://arxiv.org/abs/1810.05934): each
bracket has rungs at ``grace_period * reduction_factor**k`` time units. The first
time a trial reaches a rung, its score is compared with the scores recorded there
so far: below their ``1 - 1/reduction_factor`` quantile it stops, otherwise it
continues; either way its score joins the rung.
"""

from __future__ import annotations

import copy
import logging
import warnings
from typing import Any

import numpy as np

from fasttune._support.numeric import is_int, is_real
from fasttune.experiment.trial import Trial
from fasttune.schedulers._metric_scheduler import MetricModeScheduler
from fasttune.schedulers.trial_scheduler import ControllerView, TrialScheduler

logger = logging.getLogger(__name__)


class _Bracket:
    """The rungs of one bracket: ``(milestone, {trial_id: score})``, highest first.

    Scores are signed so that higher is better (``-loss`` in ``min`` mode).
    """

    def __init__(
        self,
        min_t: float,
        max_t: float,
        reduction_factor: float,
        s: int,
        stop_last_trials: bool = True,
    ):
        self.rf = reduction_factor
        # Ray's rung count, float rounding included (max_t=1000, rf=10 gives 3 rungs).
        num_rungs = int(np.log(max_t / min_t) / np.log(reduction_factor) - s + 1)
        self.rungs: list[tuple[float, dict[str, float]]] = [
            (min_t * reduction_factor ** (k + s), {}) for k in reversed(range(num_rungs))
        ]
        self.stop_last_trials = stop_last_trials

    def cutoff(self, recorded: dict[str, float]) -> float | None:
        """The ``1 - 1/rf`` quantile of a rung's scores (NaN left out), or None if empty."""
        if not recorded:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rung
            return float(np.nanpercentile(list(recorded.values()), (1 - 1 / self.rf) * 100))

    def on_result(self, trial_id: str, time: float, score: float) -> str:
        """Decide for a trial at ``time`` with ``score`` (higher is better)."""
        for milestone, recorded in self.rungs:
            if time < milestone:
                continue
            if trial_id in recorded:
                if not self.stop_last_trials:
                    # Promoted past this rung already: keep going (Ray's rule).
                    return TrialScheduler.CONTINUE
                continue
            cutoff = self.cutoff(recorded)
            recorded[trial_id] = score
            # Strictly below: a score equal to the cutoff continues; NaN never stops.
            if cutoff is not None and score < cutoff:
                return TrialScheduler.STOP
            return TrialScheduler.CONTINUE
        return TrialScheduler.CONTINUE

    def debug_str(self, sign: float) -> str:
        parts = []
        for milestone, recorded in self.rungs:
            cutoff = self.cutoff(recorded)
            shown = None if cutoff is None else sign * cutoff
            parts.append(f"Iter {milestone:.3f}: {shown}")
        return "Bracket: " + " | ".join(parts)


def _check_number(name: str, value: Any, low: float, inclusive: bool) -> None:
    ok = is_real(value)
    if ok:
        ok = value >= low if inclusive else value > low
    if not ok:
        bound = f">= {low}" if inclusive else f"> {low}"
        raise ValueError(
            f"AsyncHyperBandScheduler: `{name}` must be a number {bound}, got {value!r}."
        )


class AsyncHyperBandScheduler(MetricModeScheduler):
    """Asynchronous successive halving (ASHA): stop the worse trials at each rung.

    Trials run in FIFO order. A trial is stopped once its ``time_attr`` reaches
    ``max_t`` (with ``stop_last_trials``), or when it first reaches a rung with a
    score strictly below the ``1 - 1/reduction_factor`` quantile of the scores that
    earlier trials recorded at that rung. NaN scores are left out of the quantile
    and never stop a trial. With several brackets, each new trial joins one at
    random (a softmax over their number of rungs, from NumPy's global generator).

    Args:
        time_attr: Result key measuring progress; must increase monotonically.
        metric: Result key to compare trials by (or from ``TuneConfig``).
        mode: ``"min"`` or ``"max"`` (or from ``TuneConfig``).
        max_t: Time units after which a trial stops.
        grace_period: Time units before a trial may be stopped; the first rung.
        reduction_factor: Ratio between rungs; ``1/reduction_factor`` of the trials
            continue past each rung.
        brackets: Number of brackets; bracket ``s`` starts at
            ``grace_period * reduction_factor**s``.
        stop_last_trials: Stop trials at ``max_t``. If False they run on, and a
            trial already recorded at its highest reached rung is not compared again.

    Raises:
        ValueError: A parameter is out of range (the message names it).

    Example:
        >>> from fasttune.experiment.trial import Trial
        >>> asha = ASHAScheduler(metric="acc", mode="max", max_t=16, grace_period=1)
        >>> first, second = Trial("train", trial_id="a"), Trial("train", trial_id="b")
        >>> asha.on_trial_result(None, first, {"training_iteration": 1, "acc": 0.9})
        'CONTINUE'
        >>> asha.on_trial_result(None, second, {"training_iteration": 1, "acc": 0.5})
        'STOP'
        >>> print(asha.debug_string())
        Using AsyncHyperBand: num_stopped=1
        Bracket: Iter 16.000: None | Iter 4.000: None | Iter 1.000: 0.8
    """

    # Rung decisions must be exact: a trial may not run past a rung before its
    # decision arrives, so the controller waits for a decision after every result.
    _supports_buffered_results = False

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 100,
        grace_period: float = 1,
        reduction_factor: float = 4,
        brackets: int = 1,
        stop_last_trials: bool = True,
    ):
        if not isinstance(time_attr, str) or not time_attr:
            raise ValueError(
                f"AsyncHyperBandScheduler: `time_attr` must be a result key (str), got "
                f"{time_attr!r}."
            )
        _check_number("max_t", max_t, 0, inclusive=False)
        _check_number("grace_period", grace_period, 0, inclusive=False)
        _check_number("reduction_factor", reduction_factor, 1, inclusive=False)
        if grace_period > max_t:
            raise ValueError(
                f"AsyncHyperBandScheduler: `grace_period` ({grace_period!r}) must be <= "
                f"`max_t` ({max_t!r})."
            )
        if not is_int(brackets) or brackets < 1:
            raise ValueError(
                f"AsyncHyperBandScheduler: `brackets` must be an int >= 1, got {brackets!r}."
            )
        super().__init__(metric, mode)
        self._time_attr = time_attr
        self._max_t = max_t
        self._grace_period = grace_period
        self._reduction_factor = reduction_factor
        self._stop_last_trials = bool(stop_last_trials)
        self._brackets = [
            _Bracket(grace_period, max_t, reduction_factor, s, self._stop_last_trials)
            for s in range(int(brackets))
        ]
        self._trial_info: dict[str, int] = {}  # trial_id -> bracket index
        self._num_stopped = 0

    # ------------------------------------------------------------------ hooks
    def on_trial_add(self, tune_controller: ControllerView, trial: Trial) -> None:
        super().on_trial_add(tune_controller, trial)
        self._bracket_index(trial.trial_id)

    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        read = self._read(trial, result)
        if read is None:
            return TrialScheduler.CONTINUE
        time, value = read
        if time >= self._max_t and self._stop_last_trials:
            action = TrialScheduler.STOP
        else:
            bracket = self._brackets[self._bracket_index(trial.trial_id)]
            action = bracket.on_result(trial.trial_id, time, self._sign * value)
        if action == TrialScheduler.STOP:
            self._num_stopped += 1
        return action

    def on_trial_complete(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> None:
        index = self._trial_info.pop(trial.trial_id, None)
        read = self._read(trial, result, strict=False)
        if index is None or read is None:
            return
        # The final result counts at the rung it reached (if not recorded yet).
        time, value = read
        self._brackets[index].on_result(trial.trial_id, time, self._sign * value)

    def on_trial_remove(self, tune_controller: ControllerView, trial: Trial) -> None:
        self._trial_info.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        lines = [f"Using AsyncHyperBand: num_stopped={self._num_stopped}"]
        lines += [bracket.debug_str(self._sign) for bracket in self._brackets]
        return "\n".join(lines)

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        return copy.deepcopy(self.__dict__)

    def set_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(copy.deepcopy(state))

    # ------------------------------------------------------------------ helpers
    @property
    def _sign(self) -> float:
        return 1.0 if self._mode == "max" else -1.0

    def _bracket_index(self, trial_id: str) -> int:
        """The trial's bracket, chosen on first sight (also for trials added before a
        restore whose scheduler state was saved earlier)."""
        index = self._trial_info.get(trial_id)
        if index is None:
            index = 0
            if len(self._brackets) > 1:
                sizes = np.array([len(b.rungs) for b in self._brackets])
                weights = np.e ** (sizes - sizes.max())
                index = int(np.random.choice(len(self._brackets), p=weights / weights.sum()))
            self._trial_info[trial_id] = index
        return index


ASHAScheduler = AsyncHyperBandScheduler
