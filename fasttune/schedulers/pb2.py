"""``PB2``: Population Based Bandits (as ``ray.tune.schedulers.pb2.PB2``).

PB2 is :class:`~fasttune.schedulers.PopulationBasedTraining` whose explore step
chooses the new continuous hyperparameters with a GP bandit instead of random
perturbations: a Gaussian process learns how fast the score improves given the
time, the score and the hyperparameters, and the exploiting trial takes the values
maximising an upper confidence bound (see :mod:`~fasttune.schedulers._pb2_gp`).
Needs scikit-learn: ``pip install "fasttune[pb2]"``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.error import TuneError
from fasttune.experiment.trial import Trial
from fasttune.schedulers._pb2_data import Row, training_set
from fasttune.schedulers._pbt_explore import ExploreFn
from fasttune.schedulers._pbt_population import TrialState
from fasttune.schedulers.pbt import PopulationBasedTraining
from fasttune.schedulers.trial_scheduler import ControllerView

__all__ = ["PB2"]

Path = tuple[str, ...]


def _bound_paths(bounds: Mapping[str, Any], prefix: Path = ()) -> dict[Path, tuple[float, float]]:
    """Each (nested) key of ``hyperparam_bounds`` with its validated ``(low, high)``.

    Raises:
        ValueError: A value is not ``[low, high]`` with numbers and ``low <= high``.
    """
    out: dict[Path, tuple[float, float]] = {}
    for key, value in bounds.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping):
            out.update(_bound_paths(value, path))
            continue
        where = f"hyperparam_bounds[{'/'.join(path)!r}]"
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError(f"{where} must be a list or tuple [low, high], got {value!r}.")
        low, high = value
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        if not numbers or not all(math.isfinite(v) for v in value):
            raise ValueError(f"{where} must hold two finite numbers [low, high], got {value!r}.")
        if low > high:
            raise ValueError(f"{where} must be [low, high] with low <= high, got {value!r}.")
        out[path] = (float(low), float(high))
    return out


def _get(config: Mapping[str, Any], path: Path) -> Any:
    for key in path:
        config = config[key]
    return config


def _set(config: dict[str, Any], path: Path, value: Any) -> None:
    for key in path[:-1]:
        config = config.setdefault(key, {})
    config[path[-1]] = value


class PB2(PopulationBasedTraining):
    """Population Based Bandits: PBT whose explore step is a time-varying GP-UCB bandit.

    Args:
        time_attr: Monotonically increasing result key measuring progress.
        metric: Result key to optimise (or set it in ``TuneConfig``).
        mode: ``"min"`` or ``"max"``.
        perturbation_interval: Perturb a trial every this much ``time_attr``.
        hyperparam_bounds: Per key (nested dicts allowed) ``[low, high]`` of a
            continuous hyperparameter. Keys missing from a trial's config are drawn
            uniformly between the bounds.
        quantile_fraction: Fraction of trials in the top and bottom quantiles.
        log_config: Write the PBT policy log files (see ``PopulationBasedTraining``).
        require_attrs: Raise when a result lacks ``time_attr`` or ``metric``.
        synch: Perturb all trials together at each interval.
        custom_explore_fn: ``f(config) -> config`` applied after the bandit's choice.

    Raises:
        TuneError: No ``hyperparam_bounds``.
        ValueError: A bound that is not ``[low, high]``, or a bad PBT argument.
        MissingDependencyError: scikit-learn is not installed.

    Example:
        >>> pb2 = PB2(time_attr="training_iteration", metric="acc", mode="max",
        ...           perturbation_interval=4, hyperparam_bounds={"lr": [1e-4, 1e-1]})
        >>> pb2.debug_string()
        'PopulationBasedTraining: 0 checkpoints, 0 perturbs'
    """

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        hyperparam_bounds: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
        custom_explore_fn: ExploreFn | None = None,
    ):
        import_optional("sklearn", extra="pb2", feature="PB2")
        if not hyperparam_bounds:
            raise TuneError("`hyperparam_bounds` must be specified to use PB2 scheduler.")
        self._bounds = _bound_paths(hyperparam_bounds)
        super().__init__(
            time_attr=time_attr,
            metric=metric,
            mode=mode,
            perturbation_interval=perturbation_interval,
            hyperparam_mutations=hyperparam_bounds,
            quantile_fraction=quantile_fraction,
            resample_probability=0.0,
            custom_explore_fn=custom_explore_fn,
            log_config=log_config,
            require_attrs=require_attrs,
            synch=synch,
        )
        self._hyperparam_bounds = dict(hyperparam_bounds)
        self._rows: list[Row] = []
        # Values chosen for trials already restarted at the latest time (a batch).
        self._current: list[list[float]] | None = None
        self._last_exploration_time: float = 0

    def on_trial_add(self, tune_controller: ControllerView, trial: Trial) -> None:
        missing = [path for path in self._bounds if not _has(trial.config, path)]
        if missing:
            config = copy.deepcopy(trial.config)
            for path in missing:
                low, high = self._bounds[path]
                value = self._rng.uniform(low, high)  # type: ignore[attr-defined]
                _set(config, path, value)
                trial.evaluated_params["/".join(path)] = value
            trial.set_config(config)
        super().on_trial_add(tune_controller, trial)

    def _save_trial_state(
        self, state: TrialState, time: float, result: dict[str, Any], trial: Trial
    ) -> float:
        score = super()._save_trial_state(state, time, result, trial)
        params = tuple(float(_get(trial.config, path)) for path in self._bounds)
        self._rows.append(Row(trial.trial_id, float(time), params, float(score)))
        return score

    def _get_new_config(self, trial: Trial, donor: Trial) -> tuple[dict[str, Any], dict[str, Any]]:
        import numpy as np

        from fasttune.schedulers import _pb2_gp

        latest = max((row.time for row in self._rows), default=0)
        if latest > self._last_exploration_time:
            self._current = None  # a new round: trials still running are not in it
        new_config = copy.deepcopy(donor.config)
        data = training_set(self._rows, donor.trial_id)
        if data is not None:
            low = np.array([b[0] for b in self._bounds.values()])
            high = np.array([b[1] for b in self._bounds.values()])
            current = np.array(self._current) if self._current else None
            seed = int(self._rng.random() * 2**32)
            chosen = _pb2_gp.select_config(
                data.x, data.y, current, data.newpoint, low, high, np.random.default_rng(seed)
            )
            values = []
            for path, raw in zip(self._bounds, chosen):
                value = type(_get(donor.config, path))(raw)  # keep the donor's type
                _set(new_config, path, value)
                values.append(value)
            # The exploiting trial continues from the donor's point with its new values.
            self._rows.append(
                Row(trial.trial_id, data.donor_time, tuple(values), data.donor_reward)
            )
        new = [float(_get(new_config, path)) for path in self._bounds]
        if latest > self._last_exploration_time:
            self._last_exploration_time = latest
            self._current = [new]
        else:
            self._current = [*(self._current or []), new]
        if self._custom_explore_fn is not None:
            new_config = self._custom_explore_fn(new_config)
            if new_config is None:
                raise ValueError("custom_explore_fn returned None; it must return the new config.")
        return new_config, {}

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["pb2"] = {
            "rows": [(r.trial_id, r.time, r.params, r.reward) for r in self._rows],
            "current": self._current,
            "last_exploration_time": self._last_exploration_time,
        }
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        pb2 = state["pb2"]
        self._rows = [Row(tid, t, tuple(params), reward) for tid, t, params, reward in pb2["rows"]]
        self._current = pb2["current"]
        self._last_exploration_time = pb2["last_exploration_time"]


def _has(config: Mapping[str, Any], path: Path) -> bool:
    for key in path:
        if not isinstance(config, Mapping) or key not in config:
            return False
        config = config[key]
    return True
