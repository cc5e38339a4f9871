"""``OptunaSearch``: suggestions from an Optuna study (as ``ray.tune.search.optuna``).

Optuna is imported when a searcher is built, not when this module is.

Example:
    >>> from fasttune.search.optuna import OptunaSearch
    >>> from fasttune.search.sample import uniform
    >>> searcher = OptunaSearch({"x": uniform(-1, 1)}, metric="loss", mode="min", seed=0)
    >>> config = searcher.suggest("trial_1")
    >>> -1 <= config["x"] <= 1
    True
    >>> searcher.on_trial_complete("trial_1", {"loss": config["x"] ** 2})
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fasttune import result as R
from fasttune.search._optuna_space import (
    OptunaSpace,
    _optuna,
    as_float,
    flatten,
    to_optuna_space,
    unflatten,
)
from fasttune.search._spec_paths import parse_spec_vars
from fasttune.search.searcher import Searcher

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.samplers import BaseSampler
    from optuna.storages import BaseStorage
    from optuna.study import Study
    from optuna.trial import Trial as OptunaTrial

logger = logging.getLogger(__name__)

__all__ = ["OptunaSearch"]

DefineByRun = Callable[["OptunaTrial"], dict[str, Any] | None]

# A define-by-run function slower than this gets a warning: it should only define.
DEFINE_BY_RUN_WARN_THRESHOLD_S = 1.0


class OptunaSearch(Searcher):
    """Suggest configs with an `Optuna <https://optuna.org>`_ sampler (TPE by default).

    The search space comes from the Tuner's ``param_space`` (fasttune domains are
    converted) or from ``space``: a dict of ``optuna.distributions`` (or of fasttune
    domains), or a define-by-run function ``space(trial)`` that calls
    ``trial.suggest_*`` and returns None or a dict of constants to add to the
    config. Nested dicts are searched under ``"a/b"`` names and handed back nested.

    Each trial is an ``ask`` on the study; its end is a ``tell`` with the final value
    of ``metric`` (FAIL if it errored without one, PRUNED if it ended without one).
    Intermediate values are reported to the trial for single-objective studies. For
    several objectives give ``metric`` and ``mode`` as lists of equal length.

    Args:
        space: A dict of Optuna distributions or fasttune domains (and constants), or
            a define-by-run function. Leave it None to take the Tuner's
            ``param_space``.
        metric: The result key to optimise, or a list of keys. If None while ``mode``
            is set, ``"_metric"`` is used.
        mode: ``"min"`` or ``"max"``, or a list with one per metric.
        points_to_evaluate: Configs to try first (dicts, nested as the space).
        sampler: Any ``optuna.samplers.BaseSampler`` (CMA-ES, NSGA-II...). Default:
            ``TPESampler(seed=seed)``.
        study_name: Name of the Optuna study (default ``"optuna"``).
        storage: An ``optuna.storages.BaseStorage`` or a storage URL (default: in
            memory). The study is loaded if it exists there.
        seed: Seed of the default sampler; ignored (with a warning) if ``sampler`` is
            given.
        evaluated_rewards: The known values of ``points_to_evaluate``, one per point
            (a list per point for several objectives). Those points are added to the
            study as finished trials instead of being run.

    Raises:
        fasttune._support.imports.MissingDependencyError: If optuna is not installed.
        TypeError: For a ``space``, ``sampler``, ``storage`` or point of the wrong type.
        ValueError: For mismatched ``metric``/``mode``, a space Optuna cannot sample
            (``grid_search``, ``sample_from``, ``randn``...), or ``evaluated_rewards``
            that do not match ``points_to_evaluate``.

    Example:
        >>> import optuna
        >>> searcher = OptunaSearch(
        ...     {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)},
        ...     metric="loss",
        ...     mode="min",
        ...     points_to_evaluate=[{"lr": 0.01}],
        ... )
        >>> searcher.suggest("t1")
        {'lr': 0.01}
    """

    def __init__(
        self,
        space: dict[str, Any] | DefineByRun | None = None,
        metric: str | list[str] | None = None,
        mode: str | list[str] | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        sampler: BaseSampler | None = None,
        study_name: str | None = None,
        storage: BaseStorage | str | None = None,
        seed: int | None = None,
        evaluated_rewards: list[Any] | None = None,
    ):
        ot = _optuna()
        super().__init__(metric=metric, mode=mode)
        _check_objectives(metric, mode)
        if sampler is not None and not isinstance(sampler, ot.samplers.BaseSampler):
            raise TypeError(
                "OptunaSearch(sampler=...) must be an optuna.samplers.BaseSampler (e.g. "
                f"optuna.samplers.CmaEsSampler()), got {type(sampler).__name__}: {sampler!r}."
            )
        if sampler is not None and seed is not None:
            logger.warning(
                "OptunaSearch: `seed` is ignored because a `sampler` was given; seed the "
                "sampler itself (e.g. TPESampler(seed=%r)).",
                seed,
            )
        if storage is not None and not isinstance(storage, (str, ot.storages.BaseStorage)):
            raise TypeError(
                "OptunaSearch(storage=...) must be an optuna.storages.BaseStorage or a "
                f"storage URL, got {type(storage).__name__}: {storage!r}."
            )
        if space is not None and not (isinstance(space, dict) or callable(space)):
            raise TypeError(
                "OptunaSearch(space=...) must be a dict of optuna distributions (or fasttune "
                "domains), or a define-by-run function `space(trial) -> dict | None`; got "
                f"{type(space).__name__}."
            )
        _check_points(points_to_evaluate, evaluated_rewards, space)
        self._points_to_evaluate = [dict(point) for point in points_to_evaluate or []]
        self._evaluated_rewards = list(evaluated_rewards) if evaluated_rewards else None

        self._space: OptunaSpace | DefineByRun | None = None
        self._own_space = False
        if callable(space):
            self._space, self._own_space = space, True
        elif space:
            self._space, self._own_space = to_optuna_space(space), True
            self._check_points_fit_space()
        self._sampler = sampler
        self._seed = seed
        self._study_name = study_name or "optuna"
        self._storage = storage
        self._ot_study: Study | None = None
        self._ot_trials: dict[str, OptunaTrial] = {}
        self._completed_trials: set[str] = set()
        self._last_steps: dict[str, int] = {}

    # ------------------------------------------------------------------ setup
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the Tuner's metric, mode and ``param_space`` (unless built with a space).

        Returns:
            False if the searcher was built with its own ``space`` (it still takes a
            metric and mode it lacks); True otherwise.

        Raises:
            ValueError: If the space cannot be converted, or the points do not fit it.
            RuntimeError: If neither the searcher nor ``config`` defines a search space.
        """
        _check_objectives(metric or self._metric, mode or self._mode)
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        if self._own_space:
            return False
        _, domain_vars, grid_vars = parse_spec_vars(config or {})
        if not domain_vars and not grid_vars:
            raise RuntimeError(_no_space_message())
        space = to_optuna_space(config)
        space.constants.clear()  # the search generator lays them over each suggestion
        self._space = space
        self._check_points_fit_space()
        return True

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> dict[str, BaseDistribution]:
        """Convert a space of fasttune domains to ``{"a/b": optuna distribution}``.

        Constants are left out. Categories Optuna cannot store (lists, objects) become
        choices of their index.

        Raises:
            ValueError: For a parameter Optuna cannot sample, naming its key.

        Example:
            >>> from fasttune.search.sample import qrandint
            >>> OptunaSearch.convert_search_space({"n": qrandint(1, 10, 5)})
            {'n': IntDistribution(high=10, log=False, low=5, step=5)}
        """
        return to_optuna_space(spec).distributions

    def _check_points_fit_space(self) -> None:
        """Raise ValueError now if a point lacks a searched parameter or a valid choice."""
        if isinstance(self._space, OptunaSpace):
            for number, point in enumerate(self._points_to_evaluate):
                self._space.encode(flatten(point), f"points_to_evaluate[{number}]")

    def _study(self) -> Study:
        """The Optuna study, created (with the points to evaluate) on first use."""
        if self._ot_study is not None:
            return self._ot_study
        ot = _optuna()
        modes = self._mode if isinstance(self._mode, (list, tuple)) else [self._mode]
        directions = ["minimize" if m == "min" else "maximize" for m in modes]
        sampler = self._sampler or ot.samplers.TPESampler(seed=self._seed)
        if self._storage is None:
            self._storage = ot.storages.InMemoryStorage()
        self._ot_study = ot.create_study(
            storage=self._storage,
            sampler=sampler,
            pruner=ot.pruners.NopPruner(),
            study_name=self._study_name,
            load_if_exists=True,
            directions=directions,
        )
        if self._evaluated_rewards:
            for point, reward in zip(self._points_to_evaluate, self._evaluated_rewards):
                self.add_evaluated_point(point, reward)
        else:
            for point in self._points_to_evaluate:
                self._ot_study.enqueue_trial(self._optuna_params(point, "points_to_evaluate"))
        return self._ot_study

    def _optuna_params(self, point: dict[str, Any], what: str) -> dict[str, Any]:
        flat = flatten(point)
        if isinstance(self._space, OptunaSpace):
            return self._space.encode(flat, what)
        return flat

    def _check_ready(self) -> None:
        if not self._space:
            raise RuntimeError(_no_space_message())
        if self._metric is None and self._mode and not isinstance(self._mode, (list, tuple)):
            self._metric = R.DEFAULT_METRIC  # only a mode given: the anonymous metric
        if not self._metric or not self._mode:
            raise RuntimeError(
                f"OptunaSearch has no metric ({self._metric!r}) or mode ({self._mode!r}). "
                "Pass them to OptunaSearch(metric=..., mode=...) or to "
                "tune.TuneConfig(metric=..., mode=...)."
            )

    # ------------------------------------------------------------------ search
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """Ask the study for a trial and return its config.

        Raises:
            RuntimeError: If no search space, metric or mode was set.
            TypeError: If a define-by-run function returns something other than a
                dict with str keys, or None.
        """
        self._check_ready()
        study = self._study()
        ot_trial = self._ot_trials.get(trial_id)
        space = self._space
        if ot_trial is None:
            if isinstance(space, OptunaSpace):
                ot_trial = study.ask(fixed_distributions=space.distributions)
            else:
                ot_trial = study.ask()
            self._ot_trials[trial_id] = ot_trial
        if isinstance(space, OptunaSpace):
            return unflatten(space.decode(ot_trial.params))
        try:
            return unflatten(_define_by_run(space, ot_trial))  # type: ignore[arg-type]
        except BaseException:
            self._ot_trials.pop(trial_id, None)
            study.tell(ot_trial, state=_optuna().trial.TrialState.FAIL)
            raise

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """Report the metric as an intermediate value (single objective only)."""
        if isinstance(self._metric, (list, tuple)):
            return  # Optuna keeps intermediate values for one objective only
        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is None:
            return
        value = as_float(result.get(self._metric))
        step = result.get(R.TRAINING_ITERATION)
        if value is None or not math.isfinite(value) or not isinstance(step, int):
            return
        if step <= self._last_steps.get(trial_id, -1):
            return  # e.g. a trial that resumed from an earlier checkpoint
        self._last_steps[trial_id] = step
        ot_trial.report(value, step)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Tell the study how the trial ended.

        COMPLETE with the metric's last value(s); FAIL if the trial errored without
        one or reported a non-finite value; PRUNED if it ended without one.
        """
        if trial_id in self._completed_trials:
            logger.warning("OptunaSearch: trial %s already completed; ignoring.", trial_id)
            return
        ot_trial = self._ot_trials.pop(trial_id, None)
        if ot_trial is None:
            logger.warning("OptunaSearch: trial %s was not suggested by it; ignoring.", trial_id)
            return
        self._completed_trials.add(trial_id)
        self._last_steps.pop(trial_id, None)
        states = _optuna().trial.TrialState
        metrics = self._metric if isinstance(self._metric, (list, tuple)) else [self._metric]
        raw = [(result or {}).get(metric) for metric in metrics]
        values = [as_float(value) for value in raw]
        if any(value is None for value in values):
            state = states.FAIL if error else states.PRUNED
            self._ot_study.tell(ot_trial, state=state)  # type: ignore[union-attr]
            return
        if not all(math.isfinite(value) for value in values):  # type: ignore[arg-type]
            logger.warning(
                "OptunaSearch: trial %s ended with %s = %s; the study records it as failed.",
                trial_id,
                self._metric,
                raw if len(raw) > 1 else raw[0],
            )
            self._ot_study.tell(ot_trial, state=states.FAIL)  # type: ignore[union-attr]
            return
        told = values if len(values) > 1 else values[0]
        self._ot_study.tell(ot_trial, told)  # type: ignore[union-attr,arg-type]

    def add_evaluated_point(
        self,
        parameters: dict[str, Any],
        value: float | list[float],
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        """Add a point evaluated elsewhere to the study as a finished trial.

        Args:
            parameters: The config (nested as the space; extra keys are ignored).
            value: Its metric value (a list, one per metric, for several objectives).
            error: Whether it failed (recorded as FAIL, without a value).
            pruned: Whether it was stopped early (recorded as PRUNED).
            intermediate_values: Values per step, from step 0.

        Raises:
            RuntimeError: If no search space, metric or mode was set.
            TypeError: If the space is a define-by-run function.
            ValueError: If a searched parameter is missing from ``parameters``.
        """
        self._check_ready()
        if not isinstance(self._space, OptunaSpace):
            raise TypeError(
                "OptunaSearch cannot add evaluated points (or `evaluated_rewards`) with a "
                "define-by-run space; give a dict of optuna distributions, or the Tuner's "
                "param_space."
            )
        ot = _optuna()
        states = ot.trial.TrialState
        params = self._space.encode(flatten(parameters), "add_evaluated_point(parameters)")
        kwargs: dict[str, Any] = {"state": states.COMPLETE}
        if error:
            kwargs["state"] = states.FAIL
        elif pruned:
            kwargs["state"] = states.PRUNED
        else:
            kwargs["values"] = _objective_values(value, self._metric)
        if intermediate_values:
            kwargs["intermediate_values"] = dict(enumerate(map(float, intermediate_values)))
        trial = ot.trial.create_trial(
            params=params, distributions=self._space.distributions, **kwargs
        )
        self._study().add_trial(trial)


def _define_by_run(func: DefineByRun, ot_trial: OptunaTrial) -> dict[str, Any]:
    start = time.monotonic()
    constants = func(ot_trial)
    took = time.monotonic() - start
    if took > DEFINE_BY_RUN_WARN_THRESHOLD_S:
        warnings.warn(
            f"The define-by-run function given as OptunaSearch(space=...) took {took:.1f} s. "
            "It should only define the space: do the training in the trainable.",
            stacklevel=3,
        )
    if constants is not None and (
        not isinstance(constants, dict) or not all(isinstance(k, str) for k in constants)
    ):
        raise TypeError(
            "The define-by-run function given as OptunaSearch(space=...) must return "
            f"None or a dict with str keys, got {type(constants).__name__}: {constants!r}."
        )
    return {**ot_trial.params, **(constants or {})}


def _objective_values(value: Any, metric: Any) -> list[float]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    count = len(metric) if isinstance(metric, (list, tuple)) else 1
    if len(values) != count or any(as_float(v) is None for v in values):
        raise ValueError(
            f"The value of an evaluated point must be {count} number(s), one per metric "
            f"({metric!r}); got {value!r}."
        )
    return [float(v) for v in values]


def _check_objectives(metric: Any, mode: Any) -> None:
    """Reject metric/mode pairs that Optuna studies cannot take.

    Raises:
        ValueError: For a list ``metric`` without a list ``mode`` of the same length,
            or an ``"obs"`` mode.
    """
    if isinstance(mode, (list, tuple)):
        if not isinstance(metric, (list, tuple)) or len(metric) != len(mode):
            raise ValueError(
                f"OptunaSearch: `mode` is a list ({mode!r}), so `metric` must be a list of "
                f"as many result keys; got metric={metric!r}."
            )
        if any(m not in ("min", "max") for m in mode):
            raise ValueError(
                f"OptunaSearch: every entry of `mode` must be 'min' or 'max', got {mode!r}."
            )
    elif isinstance(metric, (list, tuple)):
        raise ValueError(
            f"OptunaSearch: `metric` is a list ({metric!r}), so `mode` must be a list of "
            f"'min'/'max' of the same length; got mode={mode!r}."
        )


def _check_points(points: Any, rewards: Any, space: Any) -> None:
    if points is not None:
        if not isinstance(points, (list, tuple)):
            raise TypeError(
                "OptunaSearch(points_to_evaluate=...) must be a list of config dicts, got "
                f"{type(points).__name__}."
            )
        for number, point in enumerate(points):
            if not isinstance(point, dict):
                raise TypeError(
                    f"points_to_evaluate[{number}] must be a config dict, got "
                    f"{type(point).__name__}: {point!r}."
                )
    if rewards is None:
        return
    if not isinstance(rewards, (list, tuple)):
        raise TypeError(
            "OptunaSearch(evaluated_rewards=...) must be a list of values, got "
            f"{type(rewards).__name__}."
        )
    if len(rewards) != len(points or []):
        raise ValueError(
            f"OptunaSearch: `evaluated_rewards` has {len(rewards)} values but "
            f"`points_to_evaluate` has {len(points or [])} points; give one value per point."
        )
    if callable(space) and rewards:
        raise TypeError(
            "OptunaSearch: `evaluated_rewards` needs a dict space (optuna distributions or "
            "fasttune domains), not a define-by-run function."
        )


def _no_space_message() -> str:
    return (
        "OptunaSearch has no search space: pass `space` to OptunaSearch(...) or a "
        "`param_space` with search-space definitions (tune.uniform, tune.choice...) to "
        "tune.Tuner()."
    )
