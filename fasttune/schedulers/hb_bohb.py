"""``HyperBandForBOHB``: the HyperBand variant ``TuneBOHB`` works with (as Ray Tune).

Contract with the searcher (what ``TuneBOHB`` relies on):

- Every result this scheduler sees gets a ``"hyperband_info"`` dict; a result at a
  milestone carries ``result["hyperband_info"]["budget"]``: the milestone (in
  ``time_attr`` units) the trial was evaluated at. The searcher receives the same
  result dict right after the scheduler (unless the decision is STOP), so its
  ``on_trial_result(trial_id, result)`` reads the budget from there.
- When a trial is paused at a milestone the scheduler calls the searcher's
  ``on_pause(trial_id)``; when a paused trial is promoted to the next rung, its
  ``on_unpause(trial_id)``. Each is called once per pause / promotion, pause
  first. The searcher is reached as Ray does, through the controller view's
  ``search_alg`` (unwrapping ``.searcher``); the calls are skipped when the view has
  no ``search_alg`` or the searcher lacks the method.
"""

from __future__ import annotations

import logging
from typing import Any

from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers._hyperband_bracket import Bracket
from fasttune.schedulers.hyperband import CONTINUE, PAUSE, HyperBandScheduler
from fasttune.schedulers.trial_scheduler import ControllerView

logger = logging.getLogger(__name__)

HYPERBAND_INFO = "hyperband_info"
BUDGET = "budget"


class HyperBandForBOHB(HyperBandScheduler):
    """HyperBand for BOHB: largest bracket first, and no waiting for a bracket to fill.

    Differences from :class:`HyperBandScheduler` (as Ray Tune):

    1. A band's brackets open from the one with the most halvings to the one with none,
       so the searcher's model sees many cheap evaluations early.
    2. A trial reaching a milestone is paused while its bracket is not yet full (or
       others are still running), letting the searcher add trials; when no trial is
       running, brackets with paused trials are halved with the trials they have.
    3. Results carry the budget they were evaluated at, and the searcher is told of
       pauses and promotions (see the module docstring for the contract).

    Arguments are those of :class:`HyperBandScheduler`. Use it with ``TuneBOHB``.

    Example:
        >>> import fasttune as tune
        >>> scheduler = HyperBandForBOHB(metric="loss", mode="min", max_t=27)
        >>> tuner = tune.Tuner(
        ...     MyTrainable,
        ...     tune_config=tune.TuneConfig(scheduler=scheduler, search_alg=TuneBOHB()),
        ... )  # doctest: +SKIP
    """

    def _next_s(self, brackets_in_band: int) -> int:
        return self._s_max_1 - brackets_in_band - 1  # largest bracket first

    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        """As HyperBand, but pause at a milestone until the bracket is full and all wait."""
        bracket = self._observe(tune_controller, trial, result)
        info: dict[str, Any] = {}
        result[HYPERBAND_INFO] = info
        trial_id = trial.trial_id
        if bracket.should_continue(trial_id):
            return CONTINUE
        info[BUDGET] = bracket.milestone
        others_wait = all(
            self._status(other) is TrialStatus.PAUSED for other in bracket.live if other != trial_id
        )
        if bracket.filled() and others_wait:
            action = self._process_bracket(tune_controller, bracket, trial)
        else:
            action = PAUSE
            self._paused.add(trial_id)
        if action == PAUSE:
            self._call_searcher(tune_controller, "on_pause", trial_id)
        return action

    def _on_unpause(self, view: ControllerView, trial: Trial) -> None:
        self._call_searcher(view, "on_unpause", trial.trial_id)

    def choose_trial_to_run(self, tune_controller: ControllerView) -> Trial | None:
        """A promoted or new trial, brackets in order; if none and nothing runs, halve.

        When no trial is running, brackets holding paused trials are halved with the
        trials they have (a bracket may never fill), and a trial that halving made
        runnable is returned.
        """
        trial = super().choose_trial_to_run(tune_controller)
        if trial is not None:
            return trial
        if any(t.status is TrialStatus.RUNNING for t in tune_controller.get_trials()):
            return None
        for band in self._bands:
            for bracket in band:
                if bracket is None or not any(
                    self._status(tid) is TrialStatus.PAUSED for tid in bracket.live
                ):
                    continue
                logger.debug("Halving %s: no trial is running.", bracket)
                self._process_bracket(tune_controller, bracket, None)
                trial = self._runnable_in(tune_controller, bracket)
                if trial is not None:
                    return trial
        return None

    def _in_order(self, brackets: Any) -> list[Bracket]:
        return list(brackets)  # in the order they opened, not by completion

    def _status(self, trial_id: str) -> TrialStatus | None:
        trial = self._trials.get(trial_id)
        return trial.status if trial is not None else None

    def _call_searcher(self, view: ControllerView, method: str, trial_id: str) -> None:
        searcher = getattr(view, "search_alg", None)
        for _ in range(8):  # unwrap SearchGenerator / ConcurrencyLimiter / Repeater
            if searcher is None or hasattr(searcher, method):
                break
            searcher = getattr(searcher, "searcher", None)
        hook = getattr(searcher, method, None)
        if callable(hook):
            hook(trial_id)
