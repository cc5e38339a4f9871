"""``ZOOptSearch``: ZOOpt's sequential RACOS, as ``ray.tune.search.zoopt``.

Needs the optional ``zoopt`` package (``pip install "fasttune[zoopt]"``).

Example:
    >>> from fasttune.search.sample import choice, uniform
    >>> searcher = ZOOptSearch(budget=10, metric="loss", mode="min", seed=0)
    >>> searcher.set_search_properties(None, None, {"x": uniform(-1, 1), "act": choice(["a", "b"])})
    True
    >>> config = searcher.suggest("t1")
    >>> -1 <= config["x"] <= 1 and config["act"] in ("a", "b")
    True
    >>> searcher.on_trial_complete("t1", {"loss": config["x"] ** 2})
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping
from typing import Any

from fasttune._support.numeric import is_int
from fasttune.search._flat_space import FlatSpace, assign
from fasttune.search._objective import loss_of, resolved_metric_mode
from fasttune.search._rng import NumpyState
from fasttune.search._searcher_checks import (
    check_points,
    check_positive_int,
    check_seed,
    check_single_metric,
    no_space_error,
    no_space_yet_error,
    point_value,
    take_metric_mode,
)
from fasttune.search._zoopt_space import (
    Coordinate,
    check_native_value,
    coordinates,
    import_zoopt,
    param_space_coordinates,
)
from fasttune.search.searcher import Searcher

__all__ = ["ZOOptSearch"]

_NAME = "ZOOptSearch"
_ALGOS = ("asracos", "sracos")
# What a failed trial (error, no metric, NaN) is told: the worst value there is, so
# RACOS never keeps it among its good samples (and never waits for it).
_FAILED_LOSS = float("inf")
# How many more times to ask RACOS when a draw found no new sample (see ZOOptSearch._ask).
_RETRIES = 20


class ZOOptSearch(Searcher):
    """Suggest configs with ZOOpt's (asynchronous) sequential RACOS.

    The first samples (4 to 22, by ``budget``) are random, ``points_to_evaluate``
    first; once they are all back, RACOS learns a region of good values from them and
    samples there, ``parallel_num`` at a time. Spaces given as fasttune domains are
    converted (log domains searched on their log, steps and integers kept exact); a
    native ``dim_dict`` of ZOOpt tuples is used as is.

    Args:
        algo: ``"asracos"`` (default) or ``"sracos"``, in any case; both run ZOOpt's
            ``SRacosTune``.
        budget: The number of trials (set it to ``TuneConfig(num_samples)``); ZOOpt
            sizes its sample sets by it. At least 3.
        dim_dict: The search space, if not taken from the Tuner's ``param_space``:
            fasttune domains and/or ZOOpt tuples, e.g. ``{"x": (ValueType.CONTINUOUS,
            [-1, 1], 1e-6), "n": (ValueType.DISCRETE, [1, 8], True), "act":
            (ValueType.GRID, ["relu", "tanh"])}`` (names with ``/`` make nested keys).
        metric: The result key to optimise.
        mode: ``"min"`` or ``"max"``.
        points_to_evaluate: Configs to try first, in order (at most ZOOpt's first
            sample set: 4 for a budget up to 50).
        parallel_num: How many trials RACOS keeps running at once after its first
            samples.
        **kwargs: ``seed`` (an int, for reproducible suggestions: fasttune gives ZOOpt
            a random generator of its own, so other code's numpy draws neither move it
            nor are moved by it), and further arguments of ``zoopt.Parameter``.

    Raises:
        ValueError: Bad arguments, spaces ZOOpt cannot search (naming the key), points
            that do not fit the space.
        ImportError: If zoopt is not installed.

    Example:
        >>> from zoopt import ValueType
        >>> searcher = ZOOptSearch(
        ...     budget=20,
        ...     dim_dict={"lr": (ValueType.CONTINUOUS, [0.0, 1.0], 1e-3)},
        ...     metric="acc",
        ...     mode="max",
        ... )
        >>> 0 <= searcher.suggest("t1")["lr"] <= 1
        True
    """

    def __init__(
        self,
        algo: str = "asracos",
        budget: int | None = None,
        dim_dict: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        parallel_num: int = 1,
        **kwargs: Any,
    ):

        import_zoopt()
        check_single_metric(metric, _NAME)
        super().__init__(metric=metric, mode=mode)
        self._algo = _check_algo(algo)
        self._budget = _check_budget(budget)
        self.parallel_num = check_positive_int(parallel_num, "parallel_num", _NAME)
        seed = check_seed(kwargs.pop("seed", None), "seed", _NAME)
        self._parameter_kwargs = dict(kwargs)
        self._points = check_points(points_to_evaluate, _NAME)
        self._random = NumpyState(seed)
        self._coordinates: list[Coordinate] = []
        self._flat: FlatSpace | None = None
        self._precisions: list[Any] = []
        self.optimizer: Any = None
        self._live: dict[str, Any] = {}  # trial id -> the Solution it evaluates
        self._point_configs: list[dict[str, Any]] = []  # configs of the points not given yet
        self._warned: set[str] = set()
        self._own_space = False
        if dim_dict is not None and not isinstance(dim_dict, Mapping):
            raise TypeError(
                f"{_NAME}: `dim_dict` must be a dict, got {type(dim_dict).__name__}: {dim_dict!r}."
            )
        if dim_dict:
            self._own_space = True
            self._setup(*coordinates(dim_dict))

    @staticmethod
    def convert_search_space(spec: dict[str, Any], join: bool = False) -> dict[str, tuple]:
        """Convert fasttune domains to ZOOpt tuples, keyed by ``/``-joined names.

        Values come back on ZOOpt's own scale (log domains as logarithms, steps as
        indices, choices as indices); :class:`ZOOptSearch` maps them back itself.

        Args:
            spec: A space of fasttune domains (and native tuples, kept).
            join: Accepted for Ray's signature; the result holds the searched keys only.

        Raises:
            ValueError: For ``grid_search``, ``sample_from``, ``randn`` and other domains
                ZOOpt cannot search, naming the key.

        Example:
            >>> from fasttune.search.sample import randint
            >>> ZOOptSearch.convert_search_space({"net": {"units": randint(8, 65)}})
            {'net/units': (0, [8, 64], True)}
        """
        return {c.name: c.spec for c in coordinates(spec)[0]}

    # ------------------------------------------------------------------ setup
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the Tuner's metric, mode and ``param_space``.

        Returns:
            False if the searcher was built with its own ``dim_dict`` (it then only
            takes a metric/mode it lacks); True otherwise.

        Raises:
            ValueError: If ``config`` holds domains ZOOpt cannot search.
            RuntimeError: If there is nothing to search.
        """
        if take_metric_mode(self, metric, mode, _NAME):
            return False
        self._setup(*param_space_coordinates(config or {}))
        return True

    def _setup(self, coords: list[Coordinate], flat: FlatSpace) -> None:
        zoopt = import_zoopt()
        from zoopt.algos.opt_algorithms.racos.sracos import SRacosTune
        from zoopt.utils.zoo_global import gl

        if not coords:
            raise no_space_error(_NAME)
        self._coordinates, self._flat = coords, flat
        encoded = [self._encode_point(point) for point in self._points]
        dimension = zoopt.Dimension2([c.spec for c in coords])  # sets gl.float_precisions
        self._precisions = list(gl.float_precisions)
        try:
            parameter = zoopt.Parameter(
                budget=self._budget,
                init_samples=[zoopt.Solution(x=x) for x, _ in encoded] or None,
                **self._parameter_kwargs,
            )
        except TypeError as error:
            raise ValueError(
                f"{_NAME}: zoopt.Parameter does not take {sorted(self._parameter_kwargs)} "
                f"({error}); pass only `seed` and zoopt.Parameter's arguments as **kwargs."
            ) from error
        if len(encoded) > parameter.get_train_size():
            raise ValueError(
                f"{_NAME}: {len(encoded)} `points_to_evaluate` given, but with budget="
                f"{self._budget} ZOOpt's first sample set holds {parameter.get_train_size()}; "
                "give fewer points or a larger budget."
            )
        with self._zoopt_globals():
            self.optimizer = SRacosTune(
                dimension=dimension, parameter=parameter, parallel_num=self.parallel_num
            )
        self._point_configs = [config for _, config in encoded]
        self._live = {}

    def _encode_point(self, point: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """ZOOpt's ``x`` for a point, and the config to hand out for it."""
        assert self._flat is not None
        checked = self._flat.encode_point(point, _NAME) if self._flat.params else {}
        x: list[Any] = []
        config: dict[str, Any] = {}
        for coordinate in self._coordinates:
            if coordinate.param is not None:
                value = checked[coordinate.name]
            else:
                value = _native_point_value(point, coordinate)
            x.append(coordinate.encode(value))
            assign(config, coordinate.path, value)
        return x, config

    @contextlib.contextmanager
    def _zoopt_globals(self, draws: bool = True) -> Iterator[None]:
        """Run ZOOpt with this searcher's random state and float precisions.

        ZOOpt draws from numpy's global generator and keeps the precisions of the
        last space built in a module global; both are swapped in for the call and the
        caller's generator is put back after it. ``draws=False`` for calls that draw
        nothing (telling a result): swapping generators costs about 1 ms.
        """
        from zoopt.utils.zoo_global import gl

        gl.float_precisions = list(self._precisions)
        if not draws:
            yield
            return
        with self._random.active():
            yield

    # ------------------------------------------------------------------ search
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The next config: a point to evaluate, then RACOS's samples.

        Returns None while RACOS waits (for its first samples to come back, or for
        one of its ``parallel_num`` running trials to end).

        Raises:
            RuntimeError: If no space, metric or mode is known yet.
        """
        if self.optimizer is None:
            raise no_space_yet_error(_NAME)
        self._metric, self._mode = resolved_metric_mode(self._metric, self._mode, _NAME)
        with self._zoopt_globals():
            solution = self._ask()
        if solution is None:
            return None
        if isinstance(solution, str):  # "FINISHED": no distinct sample is left
            return Searcher.FINISHED
        self._live[trial_id] = solution
        if self._point_configs:
            return copy.deepcopy(self._point_configs.pop(0))
        config: dict[str, Any] = {}
        for coordinate, x in zip(self._coordinates, solution.get_x()):
            assign(config, coordinate.path, coordinate.decode(x))
        return config

    def _ask(self) -> Any:
        """``SRacosTune.suggest()``, past the places where it would stop for no reason.

        - After its first sample set, SRacosTune waits (returns None) until the last
          of those samples completes; when they had all completed already (trials run
          one at a time), the wait would never end, so it is ended here.
        - Later, it resamples a few random coordinates of its best sample inside a
          learnt region; when that region holds no new point (small discrete
          coordinates), it says ``"FINISHED"``, or returns nothing while counting a
          sample as running. Another draw picks other coordinates, so it is asked
          again (the phantom sample uncounted), up to ``_RETRIES`` times.

        Returns:
            A ``Solution``, None (wait), or ``"FINISHED"`` (no new sample is left).
        """
        optimizer = self.optimizer
        train_size = optimizer.get_parameters().get_train_size()
        for _ in range(_RETRIES):
            counts = optimizer.live_num, optimizer.init_num
            solution = optimizer.suggest()
            if solution is None and optimizer.live_num > counts[0]:
                optimizer.live_num, optimizer.init_num = counts
                solution = "FINISHED"
            elif solution is None and optimizer.semaphore == 0:
                if optimizer.complete_num < train_size:
                    return None  # first samples still running
                optimizer.semaphore = 1
                continue
            if solution != "FINISHED" or optimizer.init_num <= train_size:
                return solution
        return "FINISHED"

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Tell RACOS the trial's loss (the metric, negated for ``mode="max"``).

        Errored trials and trials without a numeric metric are told the worst loss
        (RACOS waits for every sample it gave out). Unknown ids are ignored.
        """
        solution = self._live.pop(trial_id, None)
        if solution is None:
            return
        loss = None
        if not error:
            loss = loss_of(result, self._metric, self._mode, self._warned, _NAME, trial_id)
        with self._zoopt_globals(draws=False):  # RACOS only sorts its samples here
            self.optimizer.complete(solution, _FAILED_LOSS if loss is None else loss)


# ---------------------------------------------------------------------- checks
def _native_point_value(point: Mapping[str, Any], coordinate: Coordinate) -> Any:
    value = point_value(point, coordinate.name, _NAME, coordinate.path)
    try:
        return check_native_value(coordinate, value)
    except ValueError as error:
        raise ValueError(f"{_NAME}: points_to_evaluate: {error}.") from None


def _check_algo(algo: Any) -> str:
    if not isinstance(algo, str) or algo.lower() not in _ALGOS:
        raise ValueError(f"{_NAME}: `algo` must be 'asracos' or 'sracos', got {algo!r}.")
    return algo.lower()


def _check_budget(budget: Any) -> int:
    if budget is None or not is_int(budget) or budget < 3:
        raise ValueError(
            f"{_NAME}: `budget` must be an int >= 3, the number of trials (usually "
            f"TuneConfig(num_samples=...)), got {budget!r}."
        )
    return int(budget)
