"""``HyperBandScheduler``: synchronous HyperBand (as ``ray.tune.schedulers``).

Trials are placed, as they arrive, into brackets of successive halving. Each trial
runs to its bracket's milestone and is paused there; once every live trial of the
bracket has reached it, the best ``1/eta`` are resumed (from the checkpoint saved at
the pause) towards the next milestone and the others are stopped.

Where fasttune differs from Ray Tune on purpose (decisions are otherwise Ray's):
- a bracket is re-examined whenever one of its trials leaves it (Ray stops doing so
  after its first halving, which can leave paused trials waiting forever), and a
  bracket whose last trials finish at ``max_t`` stops the ones still paused;
- the state is kept by trial id and restored by ``Tuner.restore``;
- a trial resumed without a checkpoint, or one that fails while being paused, gets
  a warning saying why (Ray restarts such trials from scratch silently).
"""

from __future__ import annotations

import copy
import logging
import numbers
from collections.abc import Iterable
from typing import Any

from fasttune import result as R
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers._hyperband_bracket import (
    Bracket,
    bracket_size,
    check_arguments,
    first_milestone,
    num_brackets,
)
from fasttune.schedulers.trial_scheduler import ControllerView, FIFOScheduler, TrialScheduler

logger = logging.getLogger(__name__)

CONTINUE, PAUSE, STOP = TrialScheduler.CONTINUE, TrialScheduler.PAUSE, TrialScheduler.STOP
# Attributes that describe the running experiment, not the scheduler's state.
_RUNTIME = ("_trials", "_needs_sync", "_warned")


class HyperBandScheduler(FIFOScheduler):
    """Early-stop trials with synchronous HyperBand (Li et al., 2018).

    Trials fill one bracket after another; a band ("round") has ``s_max + 1``
    brackets, ``s_max = round(log(max_t) / log(reduction_factor))``, filled from the
    one without halvings (``max_t`` for every trial) to the one with the most. Paused
    trials resume from the checkpoint saved at the pause, so the trainable must save
    and load checkpoints (a ``Trainable`` class with ``save_checkpoint`` and
    ``load_checkpoint``, or a function that reports checkpoints and resumes from
    ``get_checkpoint()``).

    Args:
        time_attr: Result key measuring progress; must increase monotonically.
        metric: Result key to rank trials by. Taken from ``TuneConfig`` if None.
        mode: ``"min"`` or ``"max"``. Taken from ``TuneConfig`` if None.
        max_t: Most ``time_attr`` units a trial runs (at least 1).
        reduction_factor: ``eta``: each halving keeps ``1/eta`` of a bracket (> 1).
        stop_last_trials: Stop the trials that reach ``max_t``; if False they run on
            until other stopping conditions end them.

    Raises:
        ValueError: A parameter is out of range (the message names it).

    Example:
        >>> import fasttune as tune
        >>> hb = HyperBandScheduler(metric="loss", mode="min", max_t=9)
        >>> tuner = tune.Tuner(
        ...     MyTrainable,
        ...     tune_config=tune.TuneConfig(scheduler=hb, num_samples=8),
        ... )  # doctest: +SKIP
    """

    _supports_buffered_results = False  # milestones must be met exactly

    def __init__(
        self,
        time_attr: str = R.TRAINING_ITERATION,
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 81,
        reduction_factor: float = 3,
        stop_last_trials: bool = True,
    ):
        check_arguments(
            type(self).__name__, time_attr, metric, mode, max_t, reduction_factor, stop_last_trials
        )
        super().__init__()
        self._time_attr = time_attr
        self._metric = metric
        self._mode = mode
        self._max_t = max_t
        self._eta = reduction_factor
        self._stop_last_trials = stop_last_trials
        self._s_max_1 = num_brackets(max_t, reduction_factor)
        self._bands: list[list[Bracket | None]] = [[]]
        self._filling: Bracket | None = None  # the bracket new trials go to
        self._bracket_of: dict[str, Bracket] = {}
        self._num_stopped = 0
        self._stopping: set[str] = set()  # stop requested, not yet finished
        self._paused: set[str] = set()  # paused here at a milestone, not resumed since
        self._trials: dict[str, Trial] = {}
        self._needs_sync = False
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ metric, mode
    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Take ``TuneConfig``'s metric and mode; both must be known afterwards.

        Returns:
            False if the scheduler has another metric or mode already.

        Raises:
            ValueError: Metric or mode is still missing (or invalid).
        """
        if metric == self._metric:
            metric = None  # the same value again (e.g. on Tuner.restore) is no conflict
        if mode == self._mode:
            mode = None
        if isinstance(metric, (list, tuple)):
            raise ValueError(f"{type(self).__name__} ranks by one metric, got {metric!r}.")
        if not self._take_metric_mode(metric, mode):
            return False
        if self._metric is None and self._mode:
            self._metric = R.DEFAULT_METRIC  # Ray's anonymous metric
        self._require_metric_mode()
        return True

    def _require_metric_mode(self) -> None:
        for parameter in ("metric", "mode"):
            if getattr(self, f"_{parameter}") is None:
                raise ValueError(
                    f"{type(self).__name__} has no `{parameter}`: pass `{parameter}=` to "
                    f"{type(self).__name__}(...) or to tune.TuneConfig(...)."
                )

    @property
    def _sign(self) -> float:
        return 1.0 if self._mode == "max" else -1.0

    # ------------------------------------------------------------------ placing trials
    def on_trial_add(self, tune_controller: ControllerView, trial: Trial) -> None:
        """Put a new trial into the bracket being filled (opening brackets as needed)."""
        self._require_metric_mode()
        trial_id = trial.trial_id
        if trial_id in self._bracket_of or trial.is_finished():
            self._trials[trial_id] = trial  # known (restored) or done: nothing to place
            return
        if self._filling is None or self._filling.filled():
            self._filling = self._open_bracket()
        self._filling.add(trial_id)
        self._bracket_of[trial_id] = self._filling
        self._trials[trial_id] = trial

    def _open_bracket(self) -> Bracket:
        while True:
            band = self._bands[-1]
            if len(band) == self._s_max_1:
                band = []
                self._bands.append(band)
            s = self._next_s(len(band))
            milestone = first_milestone(s, self._max_t, self._eta)
            if milestone == 0:
                band.append(None)  # too small a bracket: skipped, as Ray does
                continue
            bracket = Bracket(
                s,
                bracket_size(s, self._s_max_1, self._eta),
                milestone,
                self._max_t,
                self._eta,
                self._stop_last_trials,
            )
            band.append(bracket)
            return bracket

    def _next_s(self, brackets_in_band: int) -> int:
        """Which bracket of a band opens next: the one without halvings first."""
        return brackets_in_band

    # ------------------------------------------------------------------ results
    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        """CONTINUE below the milestone; at it PAUSE, or halve the bracket when all are there."""
        bracket = self._observe(tune_controller, trial, result)
        if bracket.should_continue(trial.trial_id):
            return CONTINUE
        action = self._process_bracket(tune_controller, bracket, trial)
        logger.debug("%s for %s at %s=%s", action, trial, self._time_attr, result[self._time_attr])
        return action

    def _observe(self, view: ControllerView, trial: Trial, result: dict[str, Any]) -> Bracket:
        """Validate ``result`` and record it in the trial's bracket."""
        trial_id = trial.trial_id
        if self._needs_sync:
            self._sync(view)
        if trial_id not in self._bracket_of:
            self.on_trial_add(view, trial)
        self._trials[trial_id] = trial
        self._paused.discard(trial_id)
        for key, parameter in ((self._time_attr, "time_attr"), (self._metric, "metric")):
            if key not in result:
                raise ValueError(
                    f"{type(self).__name__}: trial {trial} reported a result without "
                    f"{key!r} (its `{parameter}`). Reported keys: "
                    f"{sorted(k for k in result if not k.startswith('config/'))}. Report "
                    f"{key!r} in every result, or set `{parameter}` to a key you report."
                )
            if not isinstance(result[key], numbers.Real):
                raise ValueError(
                    f"{type(self).__name__}: trial {trial} reported {key}={result[key]!r} "
                    f"(its `{parameter}`); it must be a number."
                )
        bracket = self._bracket_of[trial_id]
        bracket.add(trial_id)  # no-op unless the trial had left (e.g. resumed after an error)
        delta = bracket.record(trial_id, result[self._time_attr], result[self._metric])
        if delta < 0:
            logger.info(
                "Trial %s went back in %s (to %s): it restarted from an earlier point.",
                trial,
                self._time_attr,
                result[self._time_attr],
            )
        return bracket

    def _process_bracket(
        self, view: ControllerView, bracket: Bracket, current: Trial | None
    ) -> str:
        """Halve ``bracket`` if all its trials reached the milestone; the decision for ``current``.

        Other trials are stopped or promoted through requests. A promoted trial that
        is already past the next milestone (``time_attr`` jumped) leads to the next
        halving at once.
        """
        current_id = current.trial_id if current is not None else None
        action = PAUSE
        while bracket.live and bracket.all_reached():
            if bracket.finished():
                for trial_id in list(bracket.live):
                    if trial_id == current_id:
                        bracket.remove(trial_id)
                    else:
                        self._stop(view, bracket, trial_id)
                return STOP
            last_rung = bracket.halvings_left == 0  # trials run on past max_t
            kept, dropped = bracket.halve(self._sign)
            self._num_stopped += len(dropped)
            for trial_id in dropped:
                if trial_id == current_id:
                    action = STOP
                else:
                    self._stop(view, bracket, trial_id)
            for trial_id in kept:
                if not bracket.should_continue(trial_id):
                    continue
                if trial_id == current_id:
                    action = CONTINUE
                else:
                    self._promote(view, bracket, trial_id)
            if last_rung:
                break
        if action == PAUSE and current_id is not None:
            self._paused.add(current_id)
        return action

    def _stop(self, view: ControllerView, bracket: Bracket, trial_id: str) -> None:
        bracket.remove(trial_id)
        trial = self._trials.get(trial_id)
        if trial is not None and not trial.is_finished():
            self._stopping.add(trial_id)
            view.stop_trial(trial)

    def _promote(self, view: ControllerView, bracket: Bracket, trial_id: str) -> None:
        bracket.to_unpause.add(trial_id)
        trial = self._trials.get(trial_id)
        if trial is not None and trial.status in (TrialStatus.PAUSED, TrialStatus.RUNNING):
            self._on_unpause(view, trial)

    def _on_unpause(self, view: ControllerView, trial: Trial) -> None:
        """Hook: a paused trial was promoted (it will be resumed)."""

    # ------------------------------------------------------------------ trials leaving
    def on_trial_complete(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> None:
        """The trial ended: take it out of its bracket, which may now halve."""
        self.on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller: ControllerView, trial: Trial) -> None:
        """The trial failed: take it out of its bracket, which may now halve."""
        if trial.trial_id in self._paused and "<pause failed>" not in self._warned:
            self._warned.add("<pause failed>")  # once: every paused trial fails alike
            logger.warning(
                "Trial %s failed while %s was pausing it (%s). %s pauses trials at "
                "milestones and resumes them from the checkpoint saved then: implement "
                "save_checkpoint() and load_checkpoint() in your Trainable class, or "
                "report checkpoints from your function and resume from get_checkpoint().",
                trial,
                type(self).__name__,
                trial.error_msg,
                type(self).__name__,
            )
        self.on_trial_remove(tune_controller, trial)

    def on_trial_remove(self, tune_controller: ControllerView, trial: Trial) -> None:
        """A trial left without finishing its bracket: re-examine the bracket."""
        trial_id = trial.trial_id
        self._stopping.discard(trial_id)
        self._paused.discard(trial_id)
        bracket = self._bracket_of.get(trial_id)
        if bracket is None or trial_id not in bracket.live:
            return
        bracket.remove(trial_id)
        self._process_bracket(tune_controller, bracket, None)

    # ------------------------------------------------------------------ choosing
    def choose_trial_to_run(self, tune_controller: ControllerView) -> Trial | None:
        """A promoted paused trial or a new one, least complete bracket first (as Ray).

        Also repeats stop requests for trials that were still being paused when
        their bracket dropped them.
        """
        self._prepare(tune_controller)
        for band in self._bands:
            for bracket in self._in_order(b for b in band if b is not None):
                trial = self._runnable_in(tune_controller, bracket)
                if trial is not None:
                    return trial
        return None

    def _in_order(self, brackets: Iterable[Bracket]) -> list[Bracket]:
        return sorted(brackets, key=Bracket.completion)

    def _prepare(self, view: ControllerView) -> None:
        if self._needs_sync:
            self._sync(view)
        for trial_id in list(self._stopping):
            trial = self._trials.get(trial_id)
            if trial is None or trial.is_finished():
                self._stopping.discard(trial_id)
            elif trial.status in (TrialStatus.PAUSED, TrialStatus.PENDING):
                view.stop_trial(trial)

    def _runnable_in(self, view: ControllerView, bracket: Bracket) -> Trial | None:
        for trial_id in bracket.live:
            trial = self._trials.get(trial_id)
            if trial is None:
                continue
            promoted = trial_id in bracket.to_unpause
            if trial.status is TrialStatus.PAUSED:
                runnable = promoted
            elif trial.status is TrialStatus.PENDING:
                # A restored trial already at the milestone waits for the halving.
                runnable = promoted or bracket.should_continue(trial_id)
            else:
                runnable = False
            if not runnable:
                continue
            if not view.has_resources_for_trial(trial):
                continue
            if trial.status is TrialStatus.PAUSED:
                self._warn_if_no_checkpoint(trial, bracket)
            return trial
        return None

    def _warn_if_no_checkpoint(self, trial: Trial, bracket: Bracket) -> None:
        if trial.restore_path or trial.trial_id in self._warned:
            return
        self._warned.add(trial.trial_id)
        logger.warning(
            "%s resumes trial %s (paused at %s=%s) but no checkpoint was saved at the "
            "pause, so it starts again from scratch. Implement save_checkpoint() and "
            "load_checkpoint() in your Trainable class, or report checkpoints from your "
            "function and resume from get_checkpoint().",
            type(self).__name__,
            trial,
            self._time_attr,
            bracket.time_of(trial.trial_id),
        )

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The brackets and counters (by trial id; no ``Trial`` objects)."""
        state = {k: v for k, v in self.__dict__.items() if k not in _RUNTIME}
        return copy.deepcopy(state)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`; trials are matched by id when next seen."""
        self.__dict__.update(copy.deepcopy(state))
        self._trials = {}
        self._warned = set()
        self._needs_sync = True

    def _sync(self, view: ControllerView) -> None:
        """After a restore: bind trials by id, drop those gone or finished, add new ones."""
        self._needs_sync = False
        trials = {t.trial_id: t for t in view.get_trials()}
        for trial_id, bracket in self._bracket_of.items():
            trial = trials.get(trial_id)
            if trial is None or trial.is_finished():
                bracket.remove(trial_id)
            else:
                self._trials[trial_id] = trial
                if trial_id not in self._stopping:
                    bracket.add(trial_id)  # e.g. an errored trial resumed by Tuner.restore
        for trial in trials.values():
            if trial.trial_id not in self._bracket_of and not trial.is_finished():
                self.on_trial_add(view, trial)
        for band in self._bands:
            for slot in band:  # a Bracket, or None for a skipped one
                if slot is not None and slot.live and slot.all_reached():
                    self._process_bracket(view, slot, None)  # e.g. the laggard is gone

    # ------------------------------------------------------------------ output
    def state(self) -> dict[str, int]:
        """How many brackets were opened and trials stopped (Ray's ``state()``).

        Example:
            >>> HyperBandScheduler(metric="loss", mode="min").state()
            {'num_brackets': 0, 'num_stopped': 0}
        """
        return {
            "num_brackets": sum(len(band) for band in self._bands),
            "num_stopped": self._num_stopped,
        }

    def debug_string(self) -> str:
        """Brackets per round, as Ray prints them.

        Example:
            >>> HyperBandScheduler(metric="loss", mode="min").debug_string()
            'Using HyperBand: num_stopped=0 total_brackets=0\\nRound #0:'
        """
        total = sum(len(band) for band in self._bands)
        lines = [f"Using HyperBand: num_stopped={self._num_stopped} total_brackets={total}"]
        statuses = {tid: str(t.status) for tid, t in self._trials.items()}
        for i, band in enumerate(self._bands):
            lines.append(f"Round #{i}:")
            lines.extend(f"  {b.describe(statuses)}" for b in band if b is not None)
        return "\n".join(lines)
