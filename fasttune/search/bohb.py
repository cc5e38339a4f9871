"""``TuneBOHB``: BOHB's model-based suggestions (hpbandster), as ``ray.tune.search.bohb``.

Use it with :class:`~fasttune.schedulers.hb_bohb.HyperBandForBOHB`, which stamps each
milestone result with the budget it was evaluated at. Needs the optional packages
``hpbandster`` and ``ConfigSpace`` (``pip install "fasttune[bohb]"``).

Example:
    >>> from fasttune.search.sample import uniform
    >>> searcher = TuneBOHB(metric="loss", mode="min", seed=0)
    >>> searcher.set_search_properties(None, None, {"x": uniform(-1, 1)})
    True
    >>> config = searcher.suggest("t1")
    >>> -1 <= config["x"] <= 1
    True
    >>> searcher.on_trial_result("t1", {"loss": 0.5, "hyperband_info": {"budget": 3}})
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping
from typing import Any

from fasttune._support.metric_mode import validate_metric_mode
from fasttune._support.numeric import is_int
from fasttune.result import DEFAULT_METRIC
from fasttune.search._bohb_space import (
    ConfigSpaceCodec,
    import_configspace,
    native_config,
    native_point,
)
from fasttune.search._flat_space import flatten_space
from fasttune.search._hpbandster import DebugLogger, Job, NumpyState, import_bohb, quiet
from fasttune.search._searcher_checks import (
    check_options,
    check_points,
    check_seed,
    check_single_metric,
    no_space_error,
    no_space_yet_error,
)
from fasttune.search._spec_view import contains_unresolved
from fasttune.search.searcher import Searcher

logger = logging.getLogger(__name__)

__all__ = ["TuneBOHB"]

_NAME = "TuneBOHB"
HYPERBAND_INFO = "hyperband_info"
BUDGET = "budget"


class TuneBOHB(Searcher):
    """Suggest configs with BOHB: a kernel density model per budget (hpbandster).

    Every result stamped by ``HyperBandForBOHB`` with
    ``result["hyperband_info"]["budget"]`` is told to BOHB as an observation at that
    budget (the metric, negated for ``mode="max"``); BOHB models the largest budget
    with enough observations. ``points_to_evaluate`` are handed out first, in order.

    Args:
        space: The search space, if not taken from the Tuner's ``param_space``:
            fasttune domains (a dict) or a ``ConfigSpace.ConfigurationSpace``.
        bohb_config: Keyword arguments for hpbandster's ``BOHB`` (e.g.
            ``min_points_in_model``, ``top_n_percent``, ``random_fraction``).
        metric: The result key to optimise.
        mode: ``"min"`` or ``"max"``.
        points_to_evaluate: Configs to try first, in order (every searched key).
        seed: Seed of the space's sampler and of BOHB's model sampling, for
            reproducible suggestions (Ray seeds the space only).
        max_concurrent: At most this many trials running (not paused) at once; 0 or
            less: no limit. ``ConcurrencyLimiter`` overrides it.

    Raises:
        ValueError: Bad arguments, spaces ConfigSpace cannot express (naming the key)
            or points outside the space.
        ImportError: If hpbandster or ConfigSpace is not installed.

    Example:
        >>> import ConfigSpace as CS
        >>> space = CS.ConfigurationSpace(space={"width": (0.0, 20.0), "act": ["relu", "tanh"]})
        >>> searcher = TuneBOHB(space, metric="loss", mode="min", seed=1)
        >>> sorted(searcher.suggest("t1"))
        ['act', 'width']
    """

    def __init__(
        self,
        space: Any = None,
        bohb_config: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        seed: int | None = None,
        max_concurrent: int = 0,
    ):
        import_bohb()
        check_single_metric(metric, _NAME)
        super().__init__(metric=metric, mode=mode)
        self._bohb_config = check_options(bohb_config, "bohb_config", _NAME)
        self._points = check_points(points_to_evaluate, _NAME)
        self._seed = check_seed(seed, "seed", _NAME)
        self._max_concurrent = _check_max_concurrent(max_concurrent)
        self._random = NumpyState(self._seed)  # what BOHB's model sampling draws from
        self._space: Any = None
        self._codec: ConfigSpaceCodec | None = None
        self._own_space = False
        self.bohber: Any = None
        self.trial_to_params: dict[str, dict[str, Any]] = {}
        self._budgets_told: dict[str, set[float]] = {}
        self.running: set[str] = set()
        self.paused: set[str] = set()
        self._queue: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self._warned: set[str] = set()
        if isinstance(space, dict) and not space:
            space = None
        if space is not None:
            self._own_space = True
            self._setup(space)

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> Any:
        """Convert fasttune domains to a ``ConfigSpace.ConfigurationSpace``.

        Names are the key paths joined with ``/``. Quantization and categories
        ConfigSpace cannot hold are kept by ``TuneBOHB`` itself, not by the space
        returned here (see ``fasttune.search._bohb_space``).

        Raises:
            ValueError: For ``grid_search``, ``sample_from``, domains in lists and
                other domains ConfigSpace cannot express, naming the key.

        Example:
            >>> from fasttune.search.sample import loguniform, randint
            >>> spec = {"lr": loguniform(1e-4, 1e-1), "n": randint(1, 9)}
            >>> space = TuneBOHB.convert_search_space(spec)
            >>> space["lr"].log, space["n"].upper
            (True, 8)
        """
        return ConfigSpaceCodec(flatten_space(spec, _NAME)).space

    # ------------------------------------------------------------------ setup
    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Take ``ConcurrencyLimiter``'s limit (paused trials do not count); returns True."""
        self._max_concurrent = _check_max_concurrent(max_concurrent)
        return True

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the Tuner's metric, mode and ``param_space``.

        Returns:
            False if the searcher was built with its own space (it then only takes a
            metric/mode it lacks); True otherwise.

        Raises:
            ValueError: If ``config`` holds domains ConfigSpace cannot express.
            RuntimeError: If there is nothing to search.
        """
        validate_metric_mode(metric, mode)
        check_single_metric(metric, _NAME)
        if self._own_space:
            self._metric = self._metric or metric
            self._mode = self._mode or mode
            return False
        if not contains_unresolved(config or {}):
            raise no_space_error(_NAME)
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        self._setup(config)
        return True

    def _setup(self, space: Any) -> None:
        cs = import_configspace()
        if isinstance(space, cs.ConfigurationSpace):  # a Mapping too, so checked first
            self._codec = None
            self._space = space
            if self._seed is not None:
                space.seed(self._seed)
        elif isinstance(space, Mapping):
            if not contains_unresolved(space):
                raise ValueError(
                    f"{_NAME}: `space` holds no search domains ({dict(space)!r}); give "
                    "domains such as tune.uniform(...), or a ConfigSpace.ConfigurationSpace."
                )
            self._codec = ConfigSpaceCodec(flatten_space(space, _NAME), seed=self._seed)
            self._space = self._codec.space
        else:
            raise ValueError(
                f"{_NAME}: `space` must be a dict of search domains or a "
                f"ConfigSpace.ConfigurationSpace, got {type(space).__name__}: {space!r}."
            )
        bohb = import_bohb()
        try:
            with self._random.active(), quiet():
                self.bohber = bohb(self._space, **self._bohb_config)
        except TypeError as error:
            raise ValueError(
                f"{_NAME}: hpbandster's BOHB does not accept bohb_config="
                f"{self._bohb_config!r}: {error}"
            ) from error
        if "logger" not in self._bohb_config:  # hpbandster's own: demote its KDE dumps
            self.bohber.logger = DebugLogger(self.bohber.logger, {})
        self.trial_to_params = {}
        self._budgets_told = {}
        self.running = set()
        self.paused = set()
        self._queue = [self._encode_point(point) for point in self._points]

    def _encode_point(self, point: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The point as BOHB's values, and the config to hand out."""
        if self._codec is None:
            values = native_point(self._space, point, _NAME)
            return values, copy.deepcopy(point)
        values = self._codec.encode_point(point, _NAME)
        return values, self._codec.decode(values)

    # ------------------------------------------------------------------ search
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """A pending ``points_to_evaluate`` entry, else BOHB's next config.

        Returns:
            None while ``max_concurrent`` trials are running.

        Raises:
            RuntimeError: If no space, metric or mode is known yet.
        """
        if self.bohber is None:
            raise no_space_yet_error(_NAME)
        self._require_metric_mode()
        if 0 < self._max_concurrent <= len(self.running):
            return None
        if self._queue:
            values, config = self._queue.pop(0)
        else:
            with self._random.active(), quiet():
                values, _info = self.bohber.get_config(None)  # the budget is not used
            values = dict(values)
            config = self._codec.decode(values) if self._codec else native_config(values)
        self.trial_to_params[trial_id] = values
        self.running.add(trial_id)
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """Tell BOHB a result stamped with a budget by ``HyperBandForBOHB``.

        Results without ``hyperband_info`` mean another scheduler is in use (warned
        once); results without a budget are between milestones and skipped. A trial
        gives one observation per budget: a budget stamped again (as after a restore,
        when a paused trial resumes) is not told twice.
        """
        values = self.trial_to_params.get(trial_id)
        if values is None:
            return
        if trial_id not in self.paused:
            self.running.add(trial_id)
        info = result.get(HYPERBAND_INFO)
        budget = info.get(BUDGET) if isinstance(info, Mapping) else None
        if budget is None:
            budget = result.get(f"{HYPERBAND_INFO}/{BUDGET}")
        if info is None and budget is None:
            self._warn_once(
                "no-info",
                "%s: results carry no 'hyperband_info'; use it with the HyperBandForBOHB "
                "scheduler, which gives BOHB the budget of each result.",
                _NAME,
            )
            return
        if budget is None:
            return
        told = self._budgets_told.setdefault(trial_id, set())
        if float(budget) in told:  # e.g. stamped again after a restore: one per budget
            return
        loss = self._loss(trial_id, result)
        if loss is None:
            return
        with self._random.active(), quiet():
            self.bohber.new_result(Job(loss, float(budget), values))
        told.add(float(budget))

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Forget the trial (its observations were told with its results)."""
        self.trial_to_params.pop(trial_id, None)
        self._budgets_told.pop(trial_id, None)
        self.paused.discard(trial_id)
        self.running.discard(trial_id)

    def on_pause(self, trial_id: str) -> None:
        """``HyperBandForBOHB`` paused the trial: it stops counting as running."""
        self.paused.add(trial_id)
        self.running.discard(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        """``HyperBandForBOHB`` promoted the trial: it counts as running again."""
        self.paused.discard(trial_id)
        self.running.add(trial_id)

    def _loss(self, trial_id: str, result: dict[str, Any]) -> float | None:
        try:
            loss = float(result.get(self._metric))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self._warn_once(
                "no-metric",
                "Trial %s reported no numeric %r (keys: %s); %s skips that result. Check "
                "the metric name.",
                trial_id,
                self._metric,
                sorted(result),
                _NAME,
            )
            return None
        if math.isnan(loss):
            return math.inf  # BOHB's own reading of a failed evaluation
        return -loss if self._mode == "max" else loss

    def _require_metric_mode(self) -> None:
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC
        if not self._metric or not self._mode:
            raise RuntimeError(
                f"{_NAME} needs a metric and a mode, got metric={self._metric!r} and "
                f"mode={self._mode!r}. Pass them to {_NAME}(metric=..., mode=...) or to "
                "TuneConfig(metric=..., mode=...)."
            )

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message, *args)

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """BOHB's observations and models, the random states, and the live trials."""
        return dict(self.__dict__)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self.__dict__.update(state)


# ---------------------------------------------------------------------- checks
def _check_max_concurrent(value: Any) -> int:
    if not is_int(value):
        raise ValueError(
            f"{_NAME}: `max_concurrent` must be an int (0 or less: no limit), got {value!r}."
        )
    return int(value)
