"""``AxSearch``: Ax's Bayesian optimisation (BoTorch), as ``ray.tune.search.ax``.

Needs the optional ``ax-platform`` package (``pip install "fasttune[ax]"``), which
brings BoTorch and GPyTorch over an installed torch.

Example:
    >>> from fasttune.search.sample import uniform
    >>> searcher = AxSearch(metric="loss", mode="min", random_seed=0)
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
from collections.abc import Mapping
from typing import Any

from fasttune.search._ax_space import AxParameter, import_ax, to_parameters
from fasttune.search._flat_space import FlatSpace, decode_config, encode_config, unflatten
from fasttune.search._objective import metric_value, resolved_metric_mode
from fasttune.search._searcher_checks import (
    check_points,
    check_single_metric,
    no_space_error,
    no_space_yet_error,
    point_value,
    take_metric_mode,
)
from fasttune.search._spec_view import contains_unresolved
from fasttune.search.searcher import Searcher

logger = logging.getLogger(__name__)

__all__ = ["AxSearch"]

_NAME = "AxSearch"


class AxSearch(Searcher):
    """Suggest configs with Ax (quasi-random Sobol points, then BoTorch's models).

    Spaces given as fasttune domains are converted (see
    :func:`~fasttune.search._ax_space.to_parameters`); a list of Ax parameter dicts
    is used as is; or bring an ``AxClient`` whose experiment is already created.
    Ax may hold suggestions back (``get_next_trial`` raises while it waits for data
    or at its parallelism limit): :meth:`suggest` then returns None and the Tuner
    asks again when a trial ends.

    Args:
        space: The search space, if not taken from the Tuner's ``param_space``:
            fasttune domains (a dict) or Ax parameter dicts (a list, e.g.
            ``[{"name": "x", "type": "range", "bounds": [0.0, 1.0]}]``).
        metric: The result key to optimise (Ax's objective name).
        mode: ``"min"`` or ``"max"``.
        points_to_evaluate: Configs to try first, in order (attached to Ax as trials).
        parameter_constraints: Ax's parameter constraints, e.g. ``["x + y <= 1"]``.
        outcome_constraints: Ax's outcome constraints, e.g. ``["l2norm <= 1.25"]``;
            their metrics are read from each trial's last result too.
        ax_client: An ``AxClient`` with its experiment created; then leave ``space``,
            ``metric``, ``mode`` and the constraints out (they come from it).
        **ax_kwargs: Arguments for ``AxClient(...)`` (e.g. ``random_seed``,
            ``enforce_sequential_optimization``, ``generation_strategy``);
            ``verbose_logging`` defaults to False.

    Raises:
        ValueError: Bad arguments, spaces Ax cannot search (naming the key), points
            outside the space.
        ImportError: If ax-platform is not installed.
    """

    def __init__(
        self,
        space: dict[str, Any] | list[dict[str, Any]] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        parameter_constraints: list[str] | None = None,
        outcome_constraints: list[str] | None = None,
        ax_client: Any = None,
        **ax_kwargs: Any,
    ):
        import_ax()
        check_single_metric(metric, _NAME)
        super().__init__(metric=metric, mode=mode)
        self._points = check_points(points_to_evaluate, _NAME)
        self._parameter_constraints = _check_strings(parameter_constraints, "parameter_constraints")
        self._outcome_constraints = _check_strings(outcome_constraints, "outcome_constraints")
        self._ax_kwargs = {"verbose_logging": False, **ax_kwargs}
        self._ax: Any = None
        self._params: list[AxParameter] | None = None  # set when converted from domains
        self._flat: FlatSpace | None = None
        self._native: list[dict[str, Any]] | None = None
        self._own_space = False
        self._live: dict[str, int] = {}  # trial id -> Ax trial index
        self._encoded: list[tuple[dict[str, Any], dict[str, Any]]] = []  # points not given yet
        self._warned: set[str] = set()
        if ax_client is not None:
            given = {
                "space": space,
                "metric": metric,
                "mode": mode,
                "parameter_constraints": parameter_constraints,
                "outcome_constraints": outcome_constraints,
            }
            passed = [name for name, value in given.items() if value]
            if passed:
                raise ValueError(
                    f"{_NAME}: with an `ax_client`, the experiment brings the space, metric, "
                    f"mode and constraints; do not pass {passed} as well."
                )
            self._own_space = True
            self._ax = ax_client
            self._adopt_experiment()
            return
        if space is not None and not isinstance(space, (Mapping, list)):
            raise TypeError(
                f"{_NAME}: `space` must be a dict of search domains or a list of Ax parameter "
                f"dicts, got {type(space).__name__}: {space!r}."
            )
        if space:
            self._own_space = True
            self._take_space(space)
            if self._mode:
                self._create_experiment()

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Convert fasttune domains to Ax parameter dicts (``/``-joined names).

        Choices of categories Ax cannot hold, and quantized domains, become indices
        (:class:`AxSearch` maps them back itself).

        Raises:
            ValueError: For ``grid_search``, ``sample_from``, ``randn`` and other
                domains Ax cannot search, naming the key.

        Example:
            >>> from fasttune.search.sample import choice, randint
            >>> AxSearch.convert_search_space({"n": randint(1, 5), "c": choice(["a", "b"])})[1]
            {'name': 'c', 'type': 'choice', 'values': ['a', 'b'], 'is_ordered': False}
        """
        return [p.definition for p in to_parameters(spec)[0]]

    # ------------------------------------------------------------------ setup
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the Tuner's metric, mode and ``param_space``, and create the Ax experiment.

        Returns:
            False if the searcher was built with its own space or client (it then only
            takes a metric/mode it lacks); True otherwise.

        Raises:
            ValueError: If ``config`` holds domains Ax cannot search.
            RuntimeError: If there is nothing to search.
        """
        if take_metric_mode(self, metric, mode, _NAME):
            if self._ax is None and self._mode:
                self._create_experiment()
            return False
        self._take_space(config or {})
        if self._mode:
            self._create_experiment()
        return True

    def _take_space(self, space: Mapping[str, Any] | list[dict[str, Any]]) -> None:
        if isinstance(space, list):
            if not all(isinstance(p, Mapping) and "name" in p for p in space):
                raise ValueError(
                    f"{_NAME}: a `space` list must hold Ax parameter dicts, each with a "
                    f"'name', got {space!r}."
                )
            self._native = [dict(p) for p in space]
            return
        if self._own_space and not contains_unresolved(space):
            raise ValueError(
                f"{_NAME}: `space` holds no search domains ({dict(space)!r}); give domains "
                "such as tune.uniform(...), or a list of Ax parameter dicts."
            )
        params, flat = to_parameters(space)
        if not params:
            raise no_space_error(_NAME)
        self._params, self._flat = params, flat

    def _create_experiment(self) -> None:
        from ax.service.ax_client import AxClient, ObjectiveProperties

        self._metric, self._mode = resolved_metric_mode(self._metric, self._mode, _NAME)
        definitions = self._native if self._native is not None else self._definitions()
        try:
            client = AxClient(**self._ax_kwargs)
        except TypeError as error:
            raise ValueError(
                f"{_NAME}: AxClient(...) does not take {sorted(self._ax_kwargs)}: {error}"
            ) from error
        client.create_experiment(
            parameters=definitions,
            objectives={self._metric: ObjectiveProperties(minimize=self._mode == "min")},
            parameter_constraints=self._parameter_constraints,
            outcome_constraints=self._outcome_constraints,
        )
        self._ax = client
        self._encoded = [self._encode_point(point) for point in self._points]

    def _definitions(self) -> list[dict[str, Any]]:
        assert self._params is not None
        return [copy.deepcopy(p.definition) for p in self._params]

    def _adopt_experiment(self) -> None:
        try:
            experiment = self._ax.experiment
        except Exception as error:  # AxClient raises when no experiment was created
            raise ValueError(
                f"{_NAME}: the `ax_client` has no experiment; call "
                "ax_client.create_experiment(...) first, or pass `space` instead."
            ) from error
        objective = experiment.optimization_config.objective
        names = _metric_names(objective)
        if len(names) != 1:
            raise ValueError(
                f"{_NAME}: the `ax_client`'s experiment has the objectives {names}; "
                "AxSearch optimises one metric."
            )
        self._metric = names[0]
        self._mode = "min" if objective.minimize else "max"
        self._native = [{"name": name} for name in experiment.parameters]
        self._encoded = [self._encode_point(point) for point in self._points]

    def _encode_point(self, point: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Ax's parameters for a point, and the config to hand out for it."""
        if self._params is None:
            assert self._native is not None
            names = [p["name"] for p in self._native if p.get("type") != "fixed"]
            flat = {name: point_value(point, name, _NAME) for name in names}
            return flat, unflatten(flat)
        assert self._flat is not None
        return encode_config(self._params, self._flat, point, _NAME)

    # ------------------------------------------------------------------ search
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """The next config: a point to evaluate (attached to Ax), then Ax's.

        Returns None while Ax holds suggestions back.

        Raises:
            RuntimeError: If no space, metric or mode is known yet.
        """
        if self._ax is None:
            if self._params is None and self._native is None:
                raise no_space_yet_error(_NAME)
            resolved_metric_mode(self._metric, self._mode, _NAME)  # raises: mode unknown
            self._create_experiment()
        from ax.exceptions.core import DataRequiredError
        from ax.exceptions.generation_strategy import MaxParallelismReachedException

        if self._encoded:
            parameters, config = self._encoded.pop(0)
            _, index = self._ax.attach_trial(parameters)
            self._live[trial_id] = index
            return copy.deepcopy(config)
        try:
            parameters, index = self._ax.get_next_trial()
        except (MaxParallelismReachedException, DataRequiredError):
            return None
        self._live[trial_id] = index
        return self._config_of(parameters)

    def _config_of(self, parameters: dict[str, Any]) -> dict[str, Any]:
        if self._params is None:
            return unflatten(parameters)
        return decode_config(self._params, parameters)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Complete the Ax trial with the metric (and the outcome constraints' metrics).

        Errored trials, and trials whose last result lacks a numeric value for one of
        them, are marked failed in Ax (so they do not count against its parallelism
        limit). Unknown ids are ignored.
        """
        index = self._live.pop(trial_id, None)
        if index is None:
            return
        names = [self._metric, *self._constraint_metrics()]
        values: dict[str, Any] = {}
        for name in names:
            value = None if error else metric_value(result, name, self._warned, _NAME, trial_id)
            if value is None:
                self._ax.log_trial_failure(trial_index=index)
                return
            values[name] = (value, None)
        self._ax.complete_trial(trial_index=index, raw_data=values)

    def _constraint_metrics(self) -> list[str]:
        config = self._ax.experiment.optimization_config
        names = [name for c in config.outcome_constraints for name in _metric_names(c)]
        return [name for name in dict.fromkeys(names) if name != self._metric]


def _metric_names(item: Any) -> list[str]:
    """The metric names of an Ax objective or outcome constraint (old and new Ax)."""
    names = getattr(item, "metric_names", None)
    return list(names) if names is not None else [item.metric.name]


def _check_strings(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(
            f'{_NAME}: `{name}` must be a list of strings such as "x + y <= 1", got {value!r}.'
        )
    return list(value) or None
