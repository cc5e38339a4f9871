"""What one result means: stoppers, scheduler and searcher, in Ray's order.

The controller hands each result here and acts on the decision; callbacks and
checkpoint bookkeeping stay with the controller.
"""

from __future__ import annotations

from typing import Any

from fasttune import result as R
from fasttune._internal.run_spec import RunSpec
from fasttune._support.flatten import flatten_result
from fasttune._support.noop_hooks import is_noop_hook
from fasttune.error import TuneValueError
from fasttune.experiment.trial import Trial, TrialStatus

CONTINUE, PAUSE, STOP, NOOP = "CONTINUE", "PAUSE", "STOP", "NOOP"
_NOT_METRICS = frozenset({R.CONFIG})


def tell_search_of_end(search_alg: Any, trial: Trial, last_flat: dict[str, Any] | None) -> None:
    """``search_alg.on_trial_complete`` as Ray calls it: with the trial's last result
    flattened (``last_flat``: ``"val/loss"``, as a metric names it) when it finished;
    with no result and ``error=True`` when it failed (``last_flat`` None)."""
    if last_flat is None:
        search_alg.on_trial_complete(trial.trial_id, None, error=True)
    else:
        search_alg.on_trial_complete(trial.trial_id, last_flat)


def last_flat_or_none(trial: Trial) -> dict[str, Any] | None:
    """For :func:`tell_search_of_end`: a finished trial's last result flattened, None for
    one that failed."""
    return None if trial.status is TrialStatus.ERROR else flatten_result(trial.last_result)


class ResultPipeline:
    """Turns a trial's result into a scheduling decision.

    Order (as Ray Tune): the result is flattened and checked for the required metric;
    the stopper and the trial's stop criteria may STOP it; otherwise the scheduler
    decides; the searcher sees every result that does not stop the trial; finally the
    trial records the result.
    """

    def __init__(self, spec: RunSpec, view: Any):
        self.spec = spec
        self.view = view
        self.required_metrics = spec.required_metrics
        # Plugins that ignore intermediate results (FIFO, the default search) are not
        # called, and then no copy of the result is made for them.
        self._scheduler_listens = not is_noop_hook(spec.scheduler, "on_trial_result")
        self._search_listens = not is_noop_hook(spec.search_alg, "on_trial_result")

    def __call__(self, trial: Trial, result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The decision for ``result`` and the result as recorded."""
        spec = self.spec
        if result.get(R.RESULT_DUPLICATE):
            # The function returned without a new result: its last one is final, marked
            # done in place, as Ray does (callbacks that kept it see the same dict).
            final = trial.last_result
            final[R.DONE] = True
            return STOP, {**final, R.RESULT_DUPLICATE: True}  # the marker: not a metric
        result[R.EXPERIMENT_TAG] = trial.experiment_tag
        result.setdefault(R.CHECKPOINT_DIR_NAME, None)
        flat = flatten_result(result, exclude=_NOT_METRICS)
        self._validate_metrics(trial, flat)
        stopper = spec.stopper
        # Plugins get their own copy: what they add (e.g. HyperBand's "hyperband_info")
        # must not reach the result files.
        seen = dict(flat) if self._scheduler_listens or self._search_listens else flat
        if (stopper is not None and stopper(trial.trial_id, result)) or trial.should_stop(flat):
            decision = STOP
        elif self._scheduler_listens:
            decision = spec.scheduler.on_trial_result(self.view, trial, seen)
        else:
            decision = CONTINUE
        if decision == STOP:
            result[R.DONE] = True
        elif self._search_listens:
            spec.search_alg.on_trial_result(trial.trial_id, seen)
        trial.update_last_result(result, flat)
        return decision, result

    def _validate_metrics(self, trial: Trial, flat: dict[str, Any]) -> None:
        for metric in self.required_metrics:
            if metric not in flat and not flat.get(R.DONE):
                raise TuneValueError(
                    f"Trial {trial} returned a result without the metric {metric!r} that "
                    f"TuneConfig(metric=...) (or the searcher/scheduler) expects. Reported keys: "
                    f"{sorted(k for k in flat if not k.startswith('config/'))}. Report {metric!r} "
                    "in every result, or change the metric."
                )
