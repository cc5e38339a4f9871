"""``NevergradSearch``: nevergrad's gradient-free optimizers, as ``ray.tune.search.nevergrad``.

Needs the optional ``nevergrad`` package (``pip install "fasttune[nevergrad]"``).

Example:
    >>> from fasttune.search.sample import uniform
    >>> searcher = NevergradSearch(metric="loss", mode="min")
    >>> searcher.set_search_properties(None, None, {"x": uniform(-1, 1)})
    True
    >>> config = searcher.suggest("t1")
    >>> -1 <= config["x"] <= 1
    True
    >>> searcher.on_trial_complete("t1", {"loss": config["x"] ** 2})
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping
from typing import Any

from fasttune._support.metric_mode import validate_metric_mode
from fasttune.result import DEFAULT_METRIC
from fasttune.search._flat_space import FlatSpace, assign, flatten_space
from fasttune.search._nevergrad_optimizer import is_optimizer_instance, prepare, resolve_factory
from fasttune.search._nevergrad_space import (
    check_native,
    encode_value,
    import_nevergrad,
    native_config,
    native_value,
    to_parametrization,
)
from fasttune.search._searcher_checks import (
    check_options,
    check_points,
    check_single_metric,
    no_space_error,
    no_space_yet_error,
)
from fasttune.search._spec_view import contains_unresolved
from fasttune.search.searcher import Searcher

logger = logging.getLogger(__name__)

__all__ = ["NevergradSearch"]

_NAME = "NevergradSearch"
# Told for a failed trial to optimizers that must hear about every point they asked
# (nevergrad caps losses at 5e20 and warns above it).
_FAILED_LOSS = 1e20


class NevergradSearch(Searcher):
    """Suggest configs with a nevergrad optimizer (ask/tell).

    Each trial's config is one ``optimizer.ask()``; when the trial completes its
    final ``metric`` is told as the loss (negated for ``mode="max"``: nevergrad
    minimises). Errored trials, and trials that end without a numeric metric, are
    not told. Spaces given as fasttune domains are converted (see
    :meth:`convert_search_space`); a native ``ng.p.Dict`` or keyword-only
    ``ng.p.Instrumentation`` is used as is, its ``/``-joined names nested back.

    Args:
        optimizer: A nevergrad optimizer class or configured optimizer (e.g.
            ``ng.optimizers.OnePlusOne``), a name from ``ng.optimizers.registry``
            (e.g. ``"TwoPointsDE"``), or an optimizer instance (built on its own
            parametrization). Default: ``ng.optimizers.OnePlusOne`` (Ray Tune
            requires this argument).
        optimizer_kwargs: Keyword arguments for building the optimizer (e.g.
            ``budget``, ``num_workers``); not allowed with an instance.
        space: The search space, if not taken from the Tuner's ``param_space``:
            fasttune domains (a dict), a native nevergrad parametrization, or, with
            an optimizer instance over an array, the list of parameter names.
        metric: The result key to minimise or maximise.
        mode: ``"min"`` or ``"max"``.
        points_to_evaluate: Configs to try first, in order (each gives a value for
            every searched key). They are told to the optimizer like its own points.

    Raises:
        ValueError: Bad arguments, unknown optimizer names, spaces nevergrad cannot
            express (naming the key), or points outside the space.
        ImportError: If nevergrad is not installed.

    Example:
        >>> import nevergrad as ng
        >>> space = ng.p.Dict(lr=ng.p.Log(lower=1e-4, upper=1e-1), act=ng.p.Choice(["a", "b"]))
        >>> searcher = NevergradSearch("TwoPointsDE", space=space, metric="acc", mode="max")
        >>> sorted(searcher.suggest("t1"))
        ['act', 'lr']
    """

    def __init__(
        self,
        optimizer: Any = None,
        optimizer_kwargs: dict[str, Any] | None = None,
        space: Any = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
    ):
        ng = import_nevergrad()
        check_single_metric(metric, _NAME)
        super().__init__(metric=metric, mode=mode)
        self._optimizer_kwargs = check_options(optimizer_kwargs, "optimizer_kwargs", _NAME)
        self._points = check_points(points_to_evaluate, _NAME)
        self._factory: Any = None
        self._optimizer: Any = None
        self._flat: FlatSpace | None = None  # set when the space was converted from domains
        self._names: list[str] | None = None  # with an optimizer instance over an array
        self._own_space = False
        self._live: dict[str, Any] = {}  # trial id -> the candidate it evaluates
        self._queue: list[tuple[Any, dict[str, Any]]] = []  # encoded points, their configs
        self._warned: set[str] = set()
        if is_optimizer_instance(ng, optimizer):
            if self._optimizer_kwargs:
                raise ValueError(
                    f"{_NAME}: `optimizer_kwargs` cannot be applied to an optimizer that is "
                    "already built; pass the optimizer class (or its registry name) instead."
                )
            if space is not None and not _is_names(space):
                raise ValueError(
                    f"{_NAME}: an optimizer instance brings its own parametrization; pass "
                    f"`space` as None or as a list of parameter names, got {type(space).__name__}."
                )
            self._own_space = True
            self._names = list(space) if space is not None else None
            self._optimizer = optimizer
            check_native(optimizer.parametrization, self._names)
            prepare(optimizer)
            self._queue = [self._encode_point(point) for point in self._points]
            return
        self._factory = resolve_factory(ng, optimizer)
        if isinstance(space, dict) and not space:
            space = None
        if space is not None:
            self._own_space = True
            self._setup(self._parametrization_of(ng, space))

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> Any:
        """Convert fasttune domains to an ``ng.p.Dict`` (nested keys joined with ``/``).

        Raises:
            ValueError: For ``grid_search``, ``sample_from``, domains in lists and
                other domains nevergrad cannot express, naming the key.

        Example:
            >>> from fasttune.search.sample import choice, loguniform
            >>> param = NevergradSearch.convert_search_space(
            ...     {"lr": loguniform(1e-4, 1e-1), "net": {"act": choice(["relu", "tanh"])}}
            ... )
            >>> sorted(param.keys())
            ['lr', 'net/act']
        """
        return to_parametrization(flatten_space(spec, _NAME))

    # ------------------------------------------------------------------ setup
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the Tuner's metric, mode and ``param_space``.

        Returns:
            False if the searcher was built with its own space (it then only takes a
            metric/mode it lacks); True otherwise.

        Raises:
            ValueError: If ``config`` holds domains nevergrad cannot express.
            RuntimeError: If there is nothing to search.
        """
        validate_metric_mode(metric, mode)
        check_single_metric(metric, _NAME)
        if self._own_space:
            self._metric = self._metric or metric
            self._mode = self._mode or mode
            return False
        flat = flatten_space(config or {}, _NAME)
        if not flat.params:
            raise no_space_error(_NAME)
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        self._flat = flat
        self._setup(to_parametrization(flat))
        return True

    def _parametrization_of(self, ng: Any, space: Any) -> Any:
        if isinstance(space, Mapping):
            if not contains_unresolved(space):
                raise ValueError(
                    f"{_NAME}: `space` holds no search domains ({dict(space)!r}); give "
                    "domains such as tune.uniform(...), or a nevergrad parametrization."
                )
            self._flat = flatten_space(space, _NAME)
            return to_parametrization(self._flat)
        if isinstance(space, ng.p.Parameter):
            return space
        raise ValueError(
            f"{_NAME}: `space` must be a dict of search domains or a nevergrad "
            f"parametrization (ng.p.Dict / ng.p.Instrumentation), got {type(space).__name__}"
            f": {space!r}. A list of names is only accepted with an optimizer instance."
        )

    def _setup(self, parametrization: Any) -> None:
        if self._flat is None:
            check_native(parametrization, self._names)
        try:
            self._optimizer = self._factory(parametrization, **self._optimizer_kwargs)
        except TypeError as error:
            raise ValueError(
                f"{_NAME}: could not build the optimizer {self._factory!r} with "
                f"optimizer_kwargs={self._optimizer_kwargs!r}: {error}"
            ) from error
        prepare(self._optimizer)
        self._live = {}
        self._queue = [self._encode_point(point) for point in self._points]

    # ------------------------------------------------------------------ points
    def _encode_point(self, point: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The point as the parametrization takes it, and the config to hand out."""
        if self._flat is not None:
            flat = self._flat.encode_point(point, _NAME)
            value = {p.name: encode_value(p, flat[p.name]) for p in self._flat.params}
            config: dict[str, Any] = {}
            for param in self._flat.params:
                assign(config, param.path, flat[param.name])
        else:
            value = native_value(self._optimizer.parametrization, self._names, point)
            config = copy.deepcopy(point)
        try:  # let nevergrad check it now, not when the point's turn comes
            self._optimizer.parametrization.spawn_child(new_value=value)
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(
                f"{_NAME}: a point of `points_to_evaluate` does not fit the search space "
                f"({error}). Point: {point!r}."
            ) from None
        return value, config

    # ------------------------------------------------------------------ search
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """Ask the optimizer for a point (a pending ``points_to_evaluate`` entry first).

        Raises:
            RuntimeError: If no space, metric or mode is known yet.
        """
        if self._optimizer is None:
            raise no_space_yet_error(_NAME)
        self._require_metric_mode()
        if self._optimizer.no_parallelization and self._live:
            return None  # a sequential optimizer (e.g. NelderMead) waits for its last point
        if self._queue:
            value, config = self._queue.pop(0)
            if isinstance(value, tuple):  # an Instrumentation's (args, kwargs)
                self._optimizer.suggest(*value[0], **value[1])
            else:
                self._optimizer.suggest(value)
            candidate = self._optimizer.ask()  # suggestions come first (last in, first out)
        else:
            candidate = self._optimizer.ask()
            config = self._config_of(candidate)
        self._live[trial_id] = candidate
        return config

    def _config_of(self, candidate: Any) -> dict[str, Any]:
        if self._flat is not None:
            return self._flat.decode(candidate.value)
        return native_config(candidate, self._names)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Tell the optimizer the trial's loss (the metric, negated for ``mode="max"``).

        Errored trials, and trials that ended without a numeric (non-NaN) metric, are
        not told (as Ray Tune), except to sequential optimizers (``NelderMead``,
        ``Powell``...), which cannot go on without an answer: they are told a loss of
        1e20. Unknown or already completed ids are ignored.
        """
        candidate = self._live.pop(trial_id, None)
        if candidate is None:
            return
        loss = None if error else self._loss(trial_id, result)
        if loss is None:
            if not self._optimizer.no_parallelization:
                return
            loss = _FAILED_LOSS  # a sequential optimizer cannot go on without an answer
        ng = import_nevergrad()
        try:
            self._optimizer.tell(candidate, loss)
        except ng.errors.TellNotAskedNotSupportedError:
            self._warn_once(
                "not-asked",
                "%s cannot learn from points it did not propose (points_to_evaluate); "
                "their results are not told to it.",
                type(self._optimizer).__name__,
            )

    def _loss(self, trial_id: str, result: dict[str, Any] | None) -> float | None:
        value = (result or {}).get(self._metric)
        try:
            loss = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self._warn_once(
                "no-metric",
                "Trial %s ended without a numeric %r in its last result (keys: %s); "
                "%s does not tell it to the optimizer. Check the metric name.",
                trial_id,
                self._metric,
                sorted(result or {}),
                _NAME,
            )
            return None
        if math.isnan(loss):
            return None
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
        """Everything, pickled together: the optimizer and the candidates still running.

        Pickled as one object, the running candidates stay the optimizer's own, so a
        restored searcher tells their results as if it had never stopped.
        """
        return dict(self.__dict__)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self.__dict__.update(state)


# ---------------------------------------------------------------------- helpers
def _is_names(space: Any) -> bool:
    return isinstance(space, (list, tuple)) and all(isinstance(name, str) for name in space)
