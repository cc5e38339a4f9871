"""PBT's bookkeeping: arguments, per-trial state, ranking, when a checkpoint comes.

Ranking is O(population) per perturbation: a trial's rank is counted in one pass,
and only the quantiles are ordered (with heaps), never the whole population.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from fasttune import result as R
from fasttune.error import TuneError
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers._pbt_explore import validate_mutations

_WAITING = (TrialStatus.PENDING, TrialStatus.PAUSED)
_FINISHED = (TrialStatus.TERMINATED, TrialStatus.ERROR)  # Trial.is_finished, on hot paths


@dataclass
class TrialState:
    """What PBT remembers of one trial (keyed by trial id, so it survives a restore)."""

    orig_tag: str
    last_score: float | None = None
    last_perturbation_time: float = 0.0
    last_train_time: float = 0.0
    # ``time_attr`` at its last perturbation if it was in the upper quantile then (it
    # was checkpointed there, and others clone that checkpoint), else None.
    clone_time: float | None = None


def check_arguments(
    mutations: Mapping[str, Any],
    custom_explore_fn: Any,
    quantile_fraction: float,
    perturbation_interval: float,
    perturbation_factors: Any,
) -> None:
    """Validate PBT's constructor arguments, naming the bad one.

    Raises:
        TuneError: Neither mutations nor ``custom_explore_fn``.
        ValueError, TypeError: See :func:`validate_mutations`, or a bad number.
    """
    validate_mutations(mutations)
    if not mutations and custom_explore_fn is None:
        raise TuneError(
            "You must specify at least one of `hyperparam_mutations` or "
            "`custom_explore_fn` to use PBT."
        )
    if not 0 <= quantile_fraction <= 0.5:
        raise ValueError(f"quantile_fraction must be between 0 and 0.5, got {quantile_fraction!r}.")
    if not perturbation_interval > 0:
        raise ValueError(
            f"perturbation_interval must be a number > 0, got {perturbation_interval!r}."
        )
    if not perturbation_factors:
        raise ValueError("perturbation_factors must hold at least one factor, e.g. (1.2, 0.8).")


def quantile_size(num_ranked: int, fraction: float) -> int:
    """Trials in each quantile: ``ceil(n * fraction)``, at most ``n / 2``; 0 below two.

    Example:
        >>> quantile_size(5, 0.25), quantile_size(5, 0.5), quantile_size(1, 0.5)
        (2, 2, 0)
    """
    if num_ranked <= 1:
        return 0
    size = math.ceil(num_ranked * fraction)
    return math.floor(num_ranked / 2) if size > num_ranked / 2 else size


def _ranked(
    trials: Sequence[Trial], states: Mapping[str, TrialState]
) -> list[tuple[float, int, Trial]]:
    """``(score, position, trial)`` of each unfinished trial with a score, in list order.

    A NaN score (a diverged trial) ranks below everything. Tuples compare by score,
    then position (unique), so ties keep list order and trials are never compared.
    """
    ranked = []
    get = states.get
    for position, trial in enumerate(trials):
        state = get(trial.trial_id)
        if state is None or state.last_score is None or trial.status in _FINISHED:
            continue
        score = state.last_score
        ranked.append((-math.inf if score != score else score, position, trial))
    return ranked


class Standing(NamedTuple):
    """Where one trial stands in the population (see :func:`standing`)."""

    rank: int  # its position in the population sorted worst first (ties: list order)
    num_ranked: int  # trials ranked
    any_waiting: bool  # whether some trial is PENDING or PAUSED

    def quantile_size(self, fraction: float) -> int:
        return quantile_size(self.num_ranked, fraction)

    def in_lower(self, fraction: float) -> bool:
        return self.rank < self.quantile_size(fraction)

    def in_upper(self, fraction: float) -> bool:
        return self.rank >= self.num_ranked - self.quantile_size(fraction)


def standing(trial: Trial, trials: Sequence[Trial], states: Mapping[str, TrialState]) -> Standing:
    """Rank ``trial`` (unfinished, with a score) among ``trials`` in one O(n) pass.

    Its rank is its position in the population sorted by score, worst first, ties
    kept in list order: the number of ranked trials that score less, or the same
    and come before it. No sort: this runs at every perturbation. The same pass
    tells whether any trial waits to run.

    Example:
        >>> ts = [Trial("t", trial_id=i) for i in "abcd"]
        >>> states = {t.trial_id: TrialState("", last_score=s) for t, s in zip(ts, [3, 1, 4, 1])}
        >>> [standing(t, ts, states).rank for t in ts]
        [2, 0, 3, 1]
    """
    key = states[trial.trial_id].last_score
    key = -math.inf if key is None or key != key else key
    rank = num_ranked = 0
    before = True  # still before `trial` in the list: its ties rank below it
    any_waiting = False
    get = states.get
    for other in trials:
        status = other.status
        if status in _WAITING:
            any_waiting = True
        elif status in _FINISHED:
            continue
        if other is trial:
            before = False
            num_ranked += 1
            continue
        state = get(other.trial_id)
        if state is None or state.last_score is None:
            continue
        num_ranked += 1
        score = state.last_score
        if score != score:  # NaN
            score = -math.inf
        if score < key or (before and score == key):
            rank += 1
    return Standing(rank, num_ranked, any_waiting)


def top_trials(trials: Sequence[Trial], states: Mapping[str, TrialState], size: int) -> list[Trial]:
    """The ``size`` best ranked trials, worst first: the end of the sorted population.

    O(n log size) with a heap: only the top quantile is ordered, not the population.
    """
    return [trial for _, _, trial in reversed(heapq.nlargest(size, _ranked(trials, states)))]


def quantiles(
    trials: Sequence[Trial], states: Mapping[str, TrialState], fraction: float
) -> tuple[list[Trial], list[Trial]]:
    """The bottom and top ``fraction`` of unfinished trials with a score, worst first.

    Each holds :func:`quantile_size` trials; none for fewer than two ranked trials or
    a fraction of 0. Ties keep the order of ``trials``. O(n log size): the two
    quantiles are picked with heaps; the middle of the population is never sorted.

    Example:
        >>> ts = [Trial("t", trial_id=i) for i in "abcd"]
        >>> states = {t.trial_id: TrialState("", last_score=s) for t, s in zip(ts, [3, 1, 4, 2])}
        >>> low, high = quantiles(ts, states, 0.25)
        >>> [t.trial_id for t in low], [t.trial_id for t in high]
        (['b'], ['c'])
    """
    ranked = _ranked(trials, states)
    size = quantile_size(len(ranked), fraction)
    if size == 0:
        return [], []
    lower = heapq.nsmallest(size, ranked)
    upper = heapq.nlargest(size, ranked)
    return [t for _, _, t in lower], [t for _, _, t in reversed(upper)]


def checkpoint_iteration(trial: Trial, checkpoint: Any = None) -> int:
    """The training iteration of ``trial``'s ``checkpoint`` (by default its latest one;
    else of its last result)."""
    manager = trial.checkpoint_manager
    if checkpoint is not None and manager is not None:
        name = os.path.basename(str(checkpoint.path).rstrip("/"))
        metrics = manager.metrics_of(name) or {}
    else:
        metrics = getattr(getattr(manager, "latest", None), "metrics", None) or {}
    if R.TRAINING_ITERATION in metrics:
        return metrics[R.TRAINING_ITERATION]
    return trial.last_result.get(R.TRAINING_ITERATION, 0)


def perturbation_checkpoint(donor: Trial, state: TrialState, time_attr: str) -> Any:
    """The checkpoint ``donor`` made at its last perturbation, where it was in the upper
    quantile (the one Ray Tune clones): not a newer one, which may be the end of its
    training; None if it was not in the upper quantile then, or that one is gone."""
    manager = donor.checkpoint_manager
    if state.clone_time is None or manager is None:
        return None
    return manager.latest_up_to(time_attr, state.clone_time)


def checkpoint_comes(view: Any, trial: Trial, result: dict[str, Any]) -> bool:
    """Whether ``trial`` will checkpoint this iteration without being paused.

    True if it saves this iteration anyway (``checkpoint_frequency`` or
    ``should_checkpoint``), or after asking the controller for a save when the view
    offers ``save_trial``.
    """
    if result.get(R.SHOULD_CHECKPOINT):
        return True
    frequency = trial.checkpoint_frequency
    if frequency and result.get(R.TRAINING_ITERATION, 0) % frequency == 0:
        return True
    save_trial = getattr(view, "save_trial", None)
    if callable(save_trial):
        save_trial(trial)
        return True
    return False
