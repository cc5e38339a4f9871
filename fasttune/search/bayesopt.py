"""``BayesOptSearch``: Gaussian-process search from bayes_opt (as ``ray.tune.search.bayesopt``).

Needs the optional ``bayesian-optimization`` package
(``pip install "fasttune[bayesopt]"``); releases 1.x (``UtilityFunction``) and
2.x/3.x (``bayes_opt.acquisition``) both work.

Example:
    >>> from fasttune.search.sample import uniform
    >>> searcher = BayesOptSearch(metric="loss", mode="min", random_search_steps=2)
    >>> searcher.set_search_properties(None, None, {"x": uniform(-1, 1)})
    True
    >>> config = searcher.suggest("t1")
    >>> -1 <= config["x"] <= 1
    True
    >>> searcher.on_trial_complete("t1", {"loss": config["x"] ** 2})
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from fasttune._support.imports import import_optional
from fasttune._support.metric_mode import validate_metric_mode
from fasttune._support.numeric import is_int
from fasttune.result import DEFAULT_METRIC
from fasttune.search._bayesopt_acquisition import (
    check_utility_kwargs,
    make_acquisition,
    one_blas_thread,
)
from fasttune.search._bayesopt_space import (
    BoundedParam,
    params_from_param_space,
    params_from_user_space,
    point_values,
)
from fasttune.search.searcher import Searcher
from fasttune.utils.util import flatten_dict, unflatten_dict

logger = logging.getLogger(__name__)

__all__ = ["BayesOptSearch"]


def _import_bayes_opt() -> Any:
    return import_optional("bayes_opt", extra="bayesopt", feature="BayesOptSearch")


class BayesOptSearch(Searcher):
    """Suggest configs with a Gaussian process fitted to the results so far.

    Only bounded float ranges can be searched (``tune.uniform``, ``tune.loguniform``
    on a log scale, and their quantized forms, rounded after each suggestion).
    The first ``random_search_steps`` trials are random; the process is fitted
    once they have all finished. Results that are NaN or infinite are ignored.

    When the process suggests a config again while trials are still running, the
    searcher suggests nothing until one of them finishes, instead of counting the
    repeat toward ``patience`` (so slow trials cannot end the search early; only
    repeats after new results count).

    Args:
        space: A space of its own: ``{"x": (lower, upper)}`` pairs (or float
            domains, or dicts of them). Leave it out to search the Tuner's
            ``param_space``.
        metric: The result key to optimise.
        mode: ``"min"`` or ``"max"``.
        points_to_evaluate: Configs to try first, each with a value for every
            searched key.
        utility_kwargs: The acquisition function: ``kind`` (``"ucb"``, ``"ei"`` or
            ``"poi"``), ``kappa``, ``xi``, and optionally ``kappa_decay`` and
            ``kappa_decay_delay``. Default: ``{"kind": "ucb", "kappa": 2.576, "xi": 0.0}``.
        random_state: Seed of the optimizer (an int, or a ``numpy.random.RandomState``).
        random_search_steps: Random trials before the Gaussian process is used.
        verbose: bayes_opt's verbosity.
        patience: End the search (``Searcher.FINISHED``) once one config has been
            suggested more than this many times.
        skip_duplicate: Do not run a config again (suggest nothing this time instead).
        analysis: An experiment analysis whose finished trials are learned first.

    Raises:
        ValueError: Bad arguments, or a space that is not made of bounded float ranges.
        ImportError: If bayesian-optimization is not installed.

    Example:
        >>> searcher = BayesOptSearch({"x": (0, 2)}, metric="score", mode="max")
        >>> 0 <= searcher.suggest("t1")["x"] <= 2
        True
    """

    optimizer: Any = None

    def __init__(
        self,
        space: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        utility_kwargs: dict[str, Any] | None = None,
        random_state: Any = 42,
        random_search_steps: int = 10,
        verbose: int = 0,
        patience: int = 5,
        skip_duplicate: bool = True,
        analysis: Any = None,
    ):
        _import_bayes_opt()
        if metric is not None and not isinstance(metric, str):
            raise ValueError(
                f"BayesOptSearch optimises a single metric (a result key), got metric={metric!r}."
            )
        super().__init__(metric=metric, mode=mode)
        if not is_int(patience) or patience <= 0:
            raise ValueError(f"`patience` must be an int greater than 0, got {patience!r}.")
        if not is_int(random_search_steps) or random_search_steps < 0:
            raise ValueError(
                f"`random_search_steps` must be an int >= 0, got {random_search_steps!r}."
            )
        self._utility_kwargs = check_utility_kwargs(utility_kwargs)
        self._random_state = _check_random_state(random_state)
        self._patience = int(patience)
        self._skip_duplicate = bool(skip_duplicate)
        self._verbose = verbose
        self._analysis = analysis
        self.random_search_trials = int(random_search_steps)
        self.repeat_float_precision = 5
        self._initial_points = _check_points(points_to_evaluate)
        self._params: dict[str, BoundedParam] | None = None
        self._own_space = False
        self._reset()
        if space is not None and not isinstance(space, Mapping):
            raise TypeError(f"BayesOptSearch: `space` must be a dict, got {type(space).__name__}.")
        if space:
            self._own_space = True
            self._setup(params_from_user_space(space))

    def _reset(self) -> None:
        self.optimizer = None
        self._utility: Any = None
        self._points: list[dict[str, float]] = []
        self._live: dict[str, dict[str, float]] = {}
        self._buffered: list[tuple[dict[str, float], float | None]] = []
        self._total_random = 0
        self._config_counter: defaultdict[str, int] = defaultdict(int)
        self._registered: set[tuple[tuple[str, float], ...]] = set()
        self._completions = 0
        self._stalled_at: int | None = None
        self._warned_no_metric = False

    @staticmethod
    def convert_search_space(spec: dict[str, Any], join: bool = False) -> dict[str, Any]:
        """The ``{"a/b": (lower, upper)}`` bounds of a fasttune space.

        Args:
            spec: A ``param_space``.
            join: Return the flattened ``spec`` with its domains replaced by bounds.

        Raises:
            ValueError: For anything but bounded float ranges (naming the key).

        Example:
            >>> from fasttune.search.sample import uniform
            >>> BayesOptSearch.convert_search_space({"a": {"b": uniform(0, 1)}})
            {'a/b': (0.0, 1.0)}
        """
        params = params_from_param_space(spec)
        bounds: dict[str, Any] = {key: (p.lower, p.upper) for key, p in params.items()}
        if join:
            return {**flatten_dict(spec, prevent_delimiter=True), **bounds}
        return bounds

    # ------------------------------------------------------------------ setup
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the Tuner's metric, mode and ``param_space``.

        Returns:
            False if the searcher was built with its own ``space`` (it then only
            takes a metric/mode it lacks); True otherwise.

        Raises:
            ValueError: If ``config`` holds anything but bounded float ranges.
            RuntimeError: If there is nothing to search.
        """
        validate_metric_mode(metric, mode)
        if self._own_space:
            self._metric = self._metric or metric
            self._mode = self._mode or mode
            return False
        params = params_from_param_space(config)
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        self._setup(params)
        return True

    def _setup(self, params: dict[str, BoundedParam]) -> None:
        byo = _import_bayes_opt()
        if not params:
            raise RuntimeError(
                "BayesOptSearch has no search space: pass `space` to BayesOptSearch(...) or "
                "put float ranges (tune.uniform, ...) in the Tuner's `param_space`."
            )
        points = [point_values(params, point, i) for i, point in enumerate(self._initial_points)]
        self._reset()
        self._params = params
        self._points = points
        self._utility, acquisition = make_acquisition(byo, self._utility_kwargs, self._random_state)
        options: dict[str, Any] = (
            {} if acquisition is None else {"acquisition_function": acquisition}
        )
        self.optimizer = byo.BayesianOptimization(
            f=None,
            pbounds={key: p.bounds() for key, p in params.items()},
            random_state=copy.deepcopy(self._random_state),
            verbose=self._verbose,
            **options,
        )
        if self._analysis is not None:
            self.register_analysis(self._analysis)

    def register_analysis(self, analysis: Any) -> None:
        """Learn from the finished trials of an earlier experiment.

        Each trial counts with its best value of the metric (its last result if the
        statistics are unknown); trials without it, or without every searched key in
        their config, are skipped.
        """
        if self._params is None:
            raise RuntimeError("BayesOptSearch.register_analysis needs a search space first.")
        for trial in getattr(analysis, "trials", []):
            config = flatten_dict(getattr(trial, "config", None) or {})
            if not all(key in config for key in self._params):
                continue
            stats = (getattr(trial, "metric_analysis", None) or {}).get(self._metric) or {}
            value = stats.get(self._mode) if self._mode else None
            if value is None:
                value = (getattr(trial, "last_result", None) or {}).get(self._metric)
            params = {k: p.to_internal(config[k]) for k, p in self._params.items()}
            self._register(params, self._target(str(trial), {self._metric: value}))

    # ------------------------------------------------------------------ search
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The next config: a pending ``points_to_evaluate`` entry, a random or a GP point.

        Returns None while waiting for the random trials to finish, or when the
        point was already run (``skip_duplicate``); ``Searcher.FINISHED`` once a
        point came up more than ``patience`` times.

        Raises:
            RuntimeError: If no space, metric or mode is known yet.
        """
        if self.optimizer is None or self._params is None:
            raise RuntimeError(
                "BayesOptSearch has no search space yet: pass `space` to BayesOptSearch(...) "
                "or a `param_space` with float ranges to the Tuner."
            )
        self._require_metric_mode()
        random_phase = len(self._buffered) < self.random_search_trials
        from_optimizer = not self._points
        if self._points:
            values = self._points.pop(0)
        elif random_phase and self._total_random >= self.random_search_trials:
            return None  # wait for the random trials before fitting the process
        elif self._live and self._stalled_at == self._completions:
            return None  # the process repeated itself; nothing was learned since
        else:
            values = self._next_values()
        key = _config_hash(values, self.repeat_float_precision)
        seen = key in self._config_counter
        if seen and from_optimizer and self._skip_duplicate and self._live:
            # Running trials will tell the process more: wait for them rather than
            # count this repeat toward `patience` (which would end the search early).
            self._stalled_at = self._completions
            return None
        self._stalled_at = None
        self._config_counter[key] += 1
        if max(self._config_counter.values()) > self._patience:
            return Searcher.FINISHED
        if seen and self._skip_duplicate:
            logger.info("BayesOptSearch: skipping a config already suggested: %s.", values)
            return None
        if random_phase:
            self._total_random += 1
        self._live[trial_id] = {k: p.to_internal(values[k]) for k, p in self._params.items()}
        return unflatten_dict(values)

    def _next_values(self) -> dict[str, float]:
        assert self._params is not None
        with one_blas_thread():
            if self._utility is not None:  # bayes_opt 1.x
                self._utility.update_params()
                point = self.optimizer.suggest(self._utility)
            else:
                point = self.optimizer.suggest()
        return {key: p.to_value(point[key]) for key, p in self._params.items()}

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Register the trial's metric (negated for ``mode="min"``) with the optimizer.

        During the random phase results are kept until all random trials finished
        (failed ones count as finished, so the search never waits for them).
        Unknown or already completed ids are ignored.
        """
        params = self._live.pop(trial_id, None)
        if params is None:
            return
        self._completions += 1
        target = None if error else self._target(trial_id, result)
        if len(self._buffered) < self.random_search_trials:
            self._buffered.append((params, target))
            if len(self._buffered) == self.random_search_trials:
                for buffered_params, buffered_target in self._buffered:
                    self._register(buffered_params, buffered_target)
            return
        self._register(params, target)

    def _target(self, trial_id: str, result: dict[str, Any] | None) -> float | None:
        if not result:
            return None
        try:
            value = float(result.get(self._metric))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            if not self._warned_no_metric:
                self._warned_no_metric = True
                logger.warning(
                    "Trial %s ended without a numeric %r in its last result (keys: %s); "
                    "BayesOptSearch ignores it. Check the metric name.",
                    trial_id,
                    self._metric,
                    sorted(result),
                )
            return None
        if not math.isfinite(value):
            return None
        return value if self._mode == "max" else -value

    def _register(self, params: dict[str, float], target: float | None) -> None:
        if target is None:
            return
        key = tuple(sorted(params.items()))
        if key in self._registered:  # bayes_opt rejects a point registered twice
            return
        self._registered.add(key)
        self.optimizer.register(params=params, target=target)

    def _require_metric_mode(self) -> None:
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC
        if not self._metric or not self._mode:
            raise RuntimeError(
                f"BayesOptSearch needs a metric and a mode, got metric={self._metric!r} and "
                f"mode={self._mode!r}. Pass them to BayesOptSearch(metric=..., mode=...) or "
                "to TuneConfig(metric=..., mode=...)."
            )

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The optimizer (with its observations and random state) and the search's progress."""
        return {
            "optimizer": self.optimizer,
            "utility": self._utility,
            "points": list(self._points),
            "live": dict(self._live),
            "buffered": list(self._buffered),
            "total_random": self._total_random,
            "config_counter": dict(self._config_counter),
            "registered": set(self._registered),
            "completions": self._completions,
            "stalled_at": self._stalled_at,
            # so that a freshly built searcher restored from this can suggest (as Ray's)
            "params": self._params,
            "own_space": self._own_space,
            "metric": self._metric,
            "mode": self._mode,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self.optimizer = state["optimizer"]
        self._utility = state["utility"]
        self._points = list(state["points"])
        self._live = dict(state["live"])
        self._buffered = list(state["buffered"])
        self._total_random = state["total_random"]
        self._config_counter = defaultdict(int, state["config_counter"])
        self._registered = set(state["registered"])
        self._completions = state["completions"]
        self._stalled_at = state["stalled_at"]
        if "params" in state:  # states saved before the space was part of them lack it
            self._params = state["params"]
            self._own_space = state["own_space"]
            self._metric, self._mode = state["metric"], state["mode"]


def _config_hash(values: dict[str, float], precision: int) -> str:
    rounded = {key: f"{value:.{precision}f}" for key, value in values.items()}
    return json.dumps(rounded, sort_keys=True)


def _check_points(points: Any) -> list[dict[str, Any]]:
    if points is None:
        return []
    if not isinstance(points, (list, tuple)) or not all(isinstance(p, Mapping) for p in points):
        raise TypeError(f"`points_to_evaluate` must be a list of config dicts, got {points!r}.")
    return [copy.deepcopy(dict(point)) for point in points]


def _check_random_state(value: Any) -> Any:
    import numpy as np

    if value is None or isinstance(value, np.random.RandomState):
        return value
    if not is_int(value) or not 0 <= value < 2**32:
        raise ValueError(
            "`random_state` must be an int seed in [0, 2**32), a numpy.random.RandomState "
            f"or None, got {value!r}."
        )
    return int(value)
