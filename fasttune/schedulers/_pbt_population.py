"""PBT's bookkeeping: arguments, per-trial state, quantiles, when a checkpoint comes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttune import result as R
from fasttune.error import TuneError
from fasttune.experiment.trial import Trial
from fasttune.schedulers._pbt_explore import validate_mutations


@dataclass
class TrialState:
    """What PBT remembers of one trial (keyed by trial id, so it survives a restore)."""

    orig_tag: str
    last_score: float | None = None
    last_perturbation_time: float = 0.0
    last_train_time: float = 0.0


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


def quantiles(
    trials: list[Trial], states: Mapping[str, TrialState], fraction: float
) -> tuple[list[Trial], list[Trial]]:
    """The bottom and top ``fraction`` of unfinished trials with a score.

    Each holds ``ceil(n * fraction)`` trials, at most ``n / 2``; none for fewer than
    two ranked trials or a fraction of 0. Ties keep the order of ``trials``.

    Example:
        >>> ts = [Trial("t", trial_id=i) for i in "abcd"]
        >>> states = {t.trial_id: TrialState("", last_score=s) for t, s in zip(ts, [3, 1, 4, 2])}
        >>> low, high = quantiles(ts, states, 0.25)
        >>> [t.trial_id for t in low], [t.trial_id for t in high]
        (['b'], ['c'])
    """
    scored = []
    for trial in trials:
        state = states.get(trial.trial_id)
        if state is not None and state.last_score is not None and not trial.is_finished():
            scored.append(trial)
    scored.sort(key=lambda t: states[t.trial_id].last_score)
    if len(scored) <= 1:
        return [], []
    size = math.ceil(len(scored) * fraction)
    if size > len(scored) / 2:
        size = math.floor(len(scored) / 2)
    if size == 0:
        return [], []
    return scored[:size], scored[-size:]


def checkpoint_iteration(trial: Trial) -> int:
    """The training iteration of ``trial``'s latest checkpoint (else of its last result)."""
    latest = getattr(trial.checkpoint_manager, "latest", None)
    metrics = getattr(latest, "metrics", None) or {}
    if R.TRAINING_ITERATION in metrics:
        return metrics[R.TRAINING_ITERATION]
    return trial.last_result.get(R.TRAINING_ITERATION, 0)


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
