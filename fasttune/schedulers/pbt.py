"""``PopulationBasedTraining`` (as ``ray.tune.schedulers.PopulationBasedTraining``).

Every ``perturbation_interval`` of ``time_attr`` (after ``burn_in_period``) a trial
is ranked against the population by its last score at such a point: a trial in the
bottom ``quantile_fraction`` *exploits* a random trial of the top quantile (it
restarts from that trial's latest checkpoint) and *explores* (its config is the
donor's, mutated as :mod:`~fasttune.schedulers._pbt_explore` describes). With
``synch=True`` every trial waits at the interval and all are perturbed together.

Decisions are exact: the scheduler sees every result before the trial trains on.
A perturbation costs O(population): one pass ranks the trial, and only the top
quantile is ordered (for a donor). Other results cost O(1); with ``synch=True`` a
whole round costs O(population) too (see :meth:`_others_behind`), and choosing the
next trial to run looks only at the waiting trials.
"""

from __future__ import annotations

import logging
import random
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from fasttune import result as R
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers._pbt_explore import (
    ExploreFn,
    RandomSource,
    explore,
    fill_config,
    filter_mutated,
    make_experiment_tag,
    summarize_changes,
)
from fasttune.schedulers._pbt_log import log_exploit
from fasttune.schedulers._pbt_population import (
    TrialState,
    check_arguments,
    checkpoint_comes,
    checkpoint_iteration,
    perturbation_checkpoint,
    quantiles,
    standing,
    top_trials,
)
from fasttune.schedulers._pbt_replay import PopulationBasedTrainingReplay
from fasttune.schedulers.trial_scheduler import ControllerView, FIFOScheduler, TrialScheduler
from fasttune.search.search_generator import SearchGenerator

__all__ = ["PopulationBasedTraining", "PopulationBasedTrainingReplay"]

logger = logging.getLogger(__name__)

CONTINUE, PAUSE = TrialScheduler.CONTINUE, TrialScheduler.PAUSE


class PopulationBasedTraining(FIFOScheduler):
    """Population Based Training: bad trials clone good ones, then mutate their config.

    Trials must save and restore checkpoints. A trial in the top quantile provides
    one at its perturbation point: its ``checkpoint_frequency`` or
    ``should_checkpoint`` save if one falls there, else a save the controller is
    asked for, else (when the controller cannot save a running trial) by pausing.
    The ``random`` module drives all choices: ``random.seed`` makes them repeatable.
    Its state is saved with the scheduler's, and a restored experiment sets it back,
    so the draws after a restore are those the uninterrupted run would have made.

    Args:
        time_attr: Monotonically increasing result key measuring progress.
        metric: Result key to optimise (or set it in ``TuneConfig``).
        mode: ``"min"`` or ``"max"``.
        perturbation_interval: Perturb a trial every this much ``time_attr``.
        burn_in_period: No perturbation before this much ``time_attr``.
        hyperparam_mutations: Per key: a list of allowed values, a search space
            (``tune.uniform``...), a callable returning a value, or a nested dict of
            those. Keys missing from a trial's config are sampled from it.
        quantile_fraction: Fraction of trials in the top and bottom quantiles, in
            ``[0, 0.5]``; 0 means no exploitation.
        resample_probability: Chance of resampling a value instead of perturbing it.
        perturbation_factors: Factors a continuous value is multiplied by.
        custom_explore_fn: ``f(config) -> config`` applied after the mutations.
        log_config: Write ``pbt_global.txt`` and ``pbt_policy_<trial_id>.txt`` to the
            experiment directory (for :class:`PopulationBasedTrainingReplay`).
        require_attrs: Raise when a result lacks ``time_attr`` or ``metric``
            (else warn once and ignore the result).
        synch: Wait for all trials at each interval and perturb them together.

    Raises:
        ValueError: A bad ``quantile_fraction``, ``perturbation_interval``,
            ``perturbation_factors`` or ``mode``, or a ``tune.sample_from`` mutation.
        TypeError: A mutation value of an unsupported type.
        TuneError: Neither ``hyperparam_mutations`` nor ``custom_explore_fn``.

    Example:
        >>> import fasttune as tune
        >>> pbt = PopulationBasedTraining(
        ...     time_attr="training_iteration", metric="acc", mode="max",
        ...     perturbation_interval=4,
        ...     hyperparam_mutations={"lr": tune.loguniform(1e-4, 1e-1), "bs": [16, 32, 64]})
        >>> pbt.debug_string()
        'PopulationBasedTraining: 0 checkpoints, 0 perturbs'
    """

    _supports_buffered_results = False

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        burn_in_period: float = 0.0,
        hyperparam_mutations: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturbation_factors: Sequence[float] = (1.2, 0.8),
        custom_explore_fn: ExploreFn | None = None,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
    ):
        mutations = dict(hyperparam_mutations or {})
        check_arguments(
            mutations, custom_explore_fn, quantile_fraction, perturbation_interval,
            perturbation_factors,
        )  # fmt: skip
        super().__init__()
        self._take_metric_mode(metric, mode)
        self._time_attr = time_attr
        self._perturbation_interval = perturbation_interval
        self._burn_in_period = burn_in_period
        self._hyperparam_mutations = mutations
        self._quantile_fraction = quantile_fraction
        self._resample_probability = resample_probability
        self._perturbation_factors = tuple(perturbation_factors)
        self._custom_explore_fn = custom_explore_fn
        self._log_config = log_config
        self._require_attrs = require_attrs
        self._synch = synch
        self._rng: RandomSource = random  # seeded with random.seed(), as in Ray Tune
        self._trial_state: dict[str, TrialState] = {}
        self._next_perturbation_sync = max(perturbation_interval, burn_in_period)
        self._deferred: dict[str, str] = {}  # synch: target id -> donor id still saving
        self._waiting_on: dict[str, list[Trial]] = {}  # the same: donor id -> targets
        self._check_deferred = False  # restored: resolve with one scan of every trial
        self._realign = False  # restored: align each trial's state with its resume point
        self._sync_cursor = 0  # synch: trials before it have reached the sync point
        self._num_checkpoints = 0
        self._num_perturbations = 0
        self._warned: set[str] = set()

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if not self._take_metric_mode(metric, mode):
            return False
        if self._metric is None and self._mode:
            self._metric = R.DEFAULT_METRIC
        return True

    @property
    def _metric_op(self) -> float:
        return 1.0 if self._mode == "max" else -1.0

    def _state(self, trial: Trial) -> TrialState:
        state = self._trial_state.get(trial.trial_id)
        if state is None:
            state = self._trial_state[trial.trial_id] = TrialState(trial.experiment_tag)
        return state

    # ------------------------------------------------------------------ hooks
    def on_trial_add(self, tune_controller: ControllerView, trial: Trial) -> None:
        search_alg = getattr(tune_controller, "search_alg", None)
        if isinstance(search_alg, SearchGenerator):
            raise ValueError(
                f"Search algorithms cannot be used with {type(self).__name__} schedulers "
                f"(PBT explores by itself). Remove the searcher {search_alg.searcher!r}."
            )
        if not self._metric or self._mode not in ("min", "max"):
            raise ValueError(
                f"{type(self).__name__} needs a `metric` and a `mode` (got metric="
                f"{self._metric!r}, mode={self._mode!r}): pass them to the scheduler or to "
                "tune.TuneConfig(metric=..., mode=...)."
            )
        num_to_keep = getattr(trial.checkpoint_manager, "num_to_keep", None)
        if num_to_keep and num_to_keep <= 2 and "num_to_keep" not in self._warned:
            self._warned.add("num_to_keep")
            warnings.warn(
                "CheckpointConfig(num_to_keep<=2) with PBT may delete a checkpoint before "
                "another trial restores from it; keep more checkpoints if restores fail.",
                stacklevel=2,
            )
        self._trial_state[trial.trial_id] = TrialState(trial.experiment_tag)
        missing = [key for key in self._hyperparam_mutations if key not in trial.config]
        if missing:
            config = dict(trial.config)
            for key in missing:
                fill_config(config, key, self._hyperparam_mutations[key], self._rng)
                trial.evaluated_params[key] = config[key]
            trial.set_config(config)

    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        if not self._has_attrs(result):
            return CONTINUE
        time = result[self._time_attr]
        state = self._state(trial)
        if time < self._burn_in_period:
            return CONTINUE
        if time - state.last_perturbation_time < self._perturbation_interval:
            return CONTINUE
        if self._synch and time < self._next_perturbation_sync:
            # Short of the sync point there is nothing to wait for. (A restored state can
            # hold an older perturbation time than the sync point; pausing the trial
            # here would send it back to its checkpoint before the sync point, again
            # at every turn: a livelock the chaos campaign found.)
            return CONTINUE
        self._save_trial_state(state, time, result, trial)
        if self._synch:
            return self._synch_step(tune_controller, trial, time)
        return self._async_step(tune_controller, trial, state, time, result)

    def on_trial_complete(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> None:
        self._forget(tune_controller, trial)

    def on_trial_error(self, tune_controller: ControllerView, trial: Trial) -> None:
        self._forget(tune_controller, trial)

    def on_trial_remove(self, tune_controller: ControllerView, trial: Trial) -> None:
        self._forget(tune_controller, trial)

    def choose_trial_to_run(self, tune_controller: ControllerView) -> Trial | None:
        """The waiting trial that has trained least (by ``time_attr``), for a fair share.

        O(waiting trials): finished and running trials are not looked at.
        """
        if self._realign:
            self._realign = False
            self._realign_to_resume_points(tune_controller.get_trials())
        waiting = tune_controller.get_waiting_trials()
        self._resolve_deferred(tune_controller, waiting)
        best, best_time = None, 0.0
        for t in waiting:
            if t.trial_id in self._deferred:
                continue
            time = self._state(t).last_train_time
            if self._synch and time >= self._next_perturbation_sync:
                continue
            if best is None or time < best_time:
                best, best_time = t, time
        return best

    def debug_string(self) -> str:
        return (
            f"PopulationBasedTraining: {self._num_checkpoints} checkpoints, "
            f"{self._num_perturbations} perturbs"
        )

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        return {
            "trial_state": {tid: asdict(s) for tid, s in self._trial_state.items()},
            "next_perturbation_sync": self._next_perturbation_sync,
            "deferred": dict(self._deferred),
            "num_checkpoints": self._num_checkpoints,
            "num_perturbations": self._num_perturbations,
            # The random generator's state too (the `random` module's, unless replaced):
            # a restore then draws what the run would have drawn, not from the seed again.
            "rng_state": _rng_state(self._rng),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._trial_state = {tid: TrialState(**s) for tid, s in state["trial_state"].items()}
        self._next_perturbation_sync = state["next_perturbation_sync"]
        self._deferred = dict(state["deferred"])
        self._waiting_on = {}  # rebuilt from the trials by the next choose_trial_to_run
        self._check_deferred = bool(self._deferred)
        self._sync_cursor = 0
        self._realign = True
        self._num_checkpoints = state["num_checkpoints"]
        self._num_perturbations = state["num_perturbations"]
        rng_state = state.get("rng_state")  # absent from states saved before it was kept
        if rng_state is not None and callable(getattr(self._rng, "setstate", None)):
            self._rng.setstate(rng_state)  # type: ignore[attr-defined]

    def _realign_to_resume_points(self, trials: list[Trial]) -> None:
        """After a restore, put each trial that is not running back where it resumes.

        The saved state may have seen results past a trial's newest checkpoint (a crash
        between a result and its checkpoint's record): the trial resumes from the
        checkpoint, behind what the state says. Left so, a synch round would not wait
        for it, and it would exploit (or be exploited) across rounds.
        """
        for trial in trials:
            state = self._trial_state.get(trial.trial_id)
            if state is None or trial.is_finished() or trial.status is TrialStatus.RUNNING:
                continue
            latest = getattr(trial.checkpoint_manager, "latest", None)
            metrics = getattr(latest, "metrics", None) or {}
            if latest is not None and self._time_attr not in metrics:
                continue  # where it resumes is not known: leave it
            resumes_at = metrics[self._time_attr] if latest is not None else 0
            if resumes_at < state.last_train_time:
                state.last_train_time = resumes_at
                state.last_perturbation_time = min(state.last_perturbation_time, resumes_at)

    # ------------------------------------------------------------------ steps
    def _has_attrs(self, result: dict[str, Any]) -> bool:
        for what, key in (("time_attr", self._time_attr), ("metric", self._metric)):
            if key in result:
                continue
            message = (
                f"Cannot find {what} {key!r} in the trial result (keys: {sorted(result)}). "
                "Make sure your trainable reports it in every result."
            )
            if self._require_attrs:
                raise RuntimeError(
                    f"{message} If this is expected, pass {type(self).__name__}"
                    "(require_attrs=False) to get a warning instead."
                )
            if what not in self._warned:
                self._warned.add(what)
                logger.warning(message)
            return False
        return True

    def _save_trial_state(
        self, state: TrialState, time: float, result: dict[str, Any], trial: Trial
    ) -> float:
        score = self._metric_op * result[self._metric]
        state.last_score = score
        state.last_train_time = time
        return score

    def _async_step(
        self,
        view: ControllerView,
        trial: Trial,
        state: TrialState,
        time: float,
        result: dict[str, Any],
    ) -> str:
        state.last_perturbation_time = time
        trials = view.get_trials()
        rank = standing(trial, trials, self._trial_state)  # O(n), no sort
        # Others are waiting for resources: let them have a turn (time-sharing).
        decision = PAUSE if rank.any_waiting else CONTINUE
        state.clone_time = None
        if rank.in_upper(self._quantile_fraction):
            self._num_checkpoints += 1
            state.clone_time = time
            if decision == CONTINUE and not checkpoint_comes(view, trial, result):
                decision = PAUSE  # pausing saves a checkpoint others can clone
        if rank.in_lower(self._quantile_fraction):
            size = rank.quantile_size(self._quantile_fraction)
            donor = self._rng.choice(top_trials(trials, self._trial_state, size))
            checkpoint = perturbation_checkpoint(donor, self._state(donor), self._time_attr)
            if checkpoint is None:
                logger.info(
                    "[pbt]: trial %s has no checkpoint from its last perturbation in the "
                    "upper quantile; %s does not exploit it now.",
                    donor,
                    trial,
                )
            elif self._exploit(view, trial, donor, checkpoint):
                return CONTINUE  # the exploit request restarts it from the donor's checkpoint
        return decision

    def _synch_step(self, view: ControllerView, trial: Trial, time: float) -> str:
        if self._others_behind(view.get_trials(), trial):
            return PAUSE  # wait for the others to reach the interval
        return CONTINUE if self._synch_perturb(view, time, trial) else PAUSE

    def _behind(self, trial: Trial) -> bool:
        """Whether ``trial`` is live and short of the next sync point."""
        return (
            not trial.is_finished()
            and self._state(trial).last_train_time < self._next_perturbation_sync
        )

    def _others_behind(self, trials: list[Trial], current: Trial) -> bool:
        """Whether a live trial other than ``current`` is short of the next sync point.

        Amortised O(1) per call, O(n) per round: within a round trials only move past
        the sync point, so the scan resumes where the last one stopped (at a trial
        still behind). A "no" is confirmed by a full scan, once per round.
        """
        n = len(trials)
        i = self._sync_cursor if self._sync_cursor <= n else 0
        while i < n and not self._behind(trials[i]):
            i += 1
        self._sync_cursor = i
        if i < n and trials[i] is not current:
            return True
        # None left (or only `current` itself): check them all before perturbing.
        return any(t is not current and self._behind(t) for t in trials)

    def _synch_perturb(self, view: ControllerView, time: float, current: Trial | None) -> bool:
        """Perturb every trial at once; True if ``current`` was exploited."""
        trials = view.get_trials()
        lower, upper = self._quantiles(view)
        for t in trials:
            self._state(t).last_perturbation_time = time
        self._num_checkpoints += len(upper)
        exploited = False
        for trial in lower:
            donor = self._rng.choice(upper)
            if donor.status is TrialStatus.RUNNING:
                # Its pause (and save) is still under way: exploit once it is PAUSED.
                self._deferred[trial.trial_id] = donor.trial_id
                self._waiting_on.setdefault(donor.trial_id, []).append(trial)
            elif self._exploit(view, trial, donor, donor.checkpoint) and trial is current:
                exploited = True
        self._next_perturbation_sync = max(
            self._next_perturbation_sync + self._perturbation_interval,
            max(self._state(t).last_train_time for t in trials),
        )
        self._sync_cursor = 0  # a new round: every trial is behind again
        return exploited

    def _forget(self, view: ControllerView, trial: Trial) -> None:
        donor_id = self._deferred.pop(trial.trial_id, None)
        if donor_id is not None and donor_id in self._waiting_on:
            self._waiting_on[donor_id] = [t for t in self._waiting_on[donor_id] if t is not trial]
        if trial.trial_id in self._waiting_on:
            self._resolve_donor(view, trial)  # it ended rather than paused: use its last save
        if not self._synch:
            return
        # A trial that ends before the interval must not leave the others waiting.
        trials = view.get_trials()
        if self._others_behind(trials, trial):
            return
        times = [
            self._state(t).last_train_time for t in trials if t is not trial and not t.is_finished()
        ]
        if times:
            self._synch_perturb(view, max(times), None)

    def _quantiles(self, view: ControllerView) -> tuple[list[Trial], list[Trial]]:
        """The bottom and top quantiles of the population, worst first (O(n log k))."""
        return quantiles(view.get_trials(), self._trial_state, self._quantile_fraction)

    # ------------------------------------------------------------------ deferred exploits
    def _resolve_deferred(self, view: ControllerView, waiting: list[Trial]) -> None:
        """Carry out the exploits whose donor has paused (so it is among ``waiting``)."""
        if not self._deferred:
            return
        if self._check_deferred:  # restored: find the trials, once
            self._check_deferred = False
            by_id = {t.trial_id: t for t in view.get_trials()}
            for target_id, donor_id in list(self._deferred.items()):
                target = by_id.get(target_id)
                if target is None:
                    del self._deferred[target_id]
                else:
                    self._waiting_on.setdefault(donor_id, []).append(target)
            for donor_id in list(self._waiting_on):
                donor = by_id.get(donor_id)
                if donor is None or donor.status is not TrialStatus.RUNNING:
                    self._resolve_donor(view, donor, donor_id)
            return
        for donor in waiting:
            if donor.trial_id in self._waiting_on:
                self._resolve_donor(view, donor)

    def _resolve_donor(
        self, view: ControllerView, donor: Trial | None, donor_id: str | None = None
    ) -> None:
        """Exploit ``donor`` into each trial waiting for it (``donor`` None: it is gone)."""
        key = donor.trial_id if donor is not None else donor_id
        for target in self._waiting_on.pop(key, []):  # type: ignore[arg-type]
            del self._deferred[target.trial_id]
            if donor is not None and not target.is_finished():
                self._exploit(view, target, donor, donor.checkpoint)

    # ------------------------------------------------------------------ exploit
    def _exploit(self, view: ControllerView, trial: Trial, donor: Trial, checkpoint: Any) -> bool:
        """Ask for ``trial`` to restart from ``checkpoint`` (``donor``'s) with an explored
        config (in synchronous mode the donor's latest: it paused at the sync point)."""
        if checkpoint is None:
            logger.info("[pbt]: trial %s has no checkpoint; %s does not exploit it.", donor, trial)
            return False
        state, donor_state = self._state(trial), self._state(donor)
        logger.info(
            "[%s] [Exploit] Cloning trial %s (score = %s) into trial %s (score = %s)",
            type(self).__name__, donor.trial_id, donor_state.last_score,
            trial.trial_id, state.last_score,
        )  # fmt: skip
        new_config, operations = self._get_new_config(trial, donor)
        if logger.isEnabledFor(logging.INFO):
            old_params = filter_mutated(donor.config, self._hyperparam_mutations)
            new_params = filter_mutated(new_config, self._hyperparam_mutations)
            changes = summarize_changes(old_params, new_params, operations)
            logger.info(
                "[%s] [Explore] Perturbed the hyperparameter config of trial %s:\n%s",
                type(self).__name__, trial.trial_id, changes or "No hyperparameters mutated.",
            )  # fmt: skip
        if self._log_config and not getattr(view, "replaying", False):
            # (a decision replayed after a restore was logged when it was first made)
            self._log_config_on_step(state, donor_state, trial, donor, new_config, checkpoint)
        new_tag = make_experiment_tag(state.orig_tag, new_config, self._hyperparam_mutations)
        view.exploit_trial(trial, checkpoint, new_config, new_tag)
        self._num_perturbations += 1
        state.last_perturbation_time = donor_state.last_perturbation_time
        state.last_train_time = donor_state.last_train_time
        return True

    def _get_new_config(self, trial: Trial, donor: Trial) -> tuple[dict[str, Any], dict[str, Any]]:
        """The explored config (and the operations applied) for ``trial``, from ``donor``'s."""
        return explore(
            donor.config,
            self._hyperparam_mutations,
            self._resample_probability,
            self._perturbation_factors,
            self._custom_explore_fn,
            self._rng,
        )

    def _log_config_on_step(
        self,
        state: TrialState,
        donor_state: TrialState,
        trial: Trial,
        donor: Trial,
        new_config: dict[str, Any],
        checkpoint: Any,
    ) -> None:
        # [target tag, donor tag, target iteration, cloned checkpoint's iteration, configs]
        row = [state.orig_tag, donor_state.orig_tag, trial.last_result.get(R.TRAINING_ITERATION, 0)]
        row += [checkpoint_iteration(donor, checkpoint), donor.config, new_config]
        log_exploit(trial.experiment_path, trial.trial_id, donor.trial_id, row)


def _rng_state(rng: RandomSource) -> Any:
    """``rng``'s state (``random.getstate()`` for the module), or None if it has none."""
    getstate = getattr(rng, "getstate", None)
    return getstate() if callable(getstate) else None
