"""``HyperOptSearch``: hyperopt's TPE algorithm, as ``ray.tune.search.hyperopt``.

Needs the optional ``hyperopt`` package (``pip install "fasttune[hyperopt]"``).

Example:
    >>> from fasttune.search.sample import choice, uniform
    >>> searcher = HyperOptSearch(metric="loss", mode="min", random_state_seed=0)
    >>> searcher.set_search_properties(None, None, {"x": uniform(-1, 1), "act": choice(["a", "b"])})
    True
    >>> config = searcher.suggest("t1")
    >>> -1 <= config["x"] < 1 and config["act"] in ("a", "b")
    True
    >>> searcher.on_trial_complete("t1", {"loss": config["x"] ** 2})
"""

from __future__ import annotations

import copy
import functools
import logging
import math
from collections.abc import Mapping
from typing import Any

from fasttune._support.metric_mode import validate_metric_mode
from fasttune._support.numeric import is_int, is_real
from fasttune.result import DEFAULT_METRIC
from fasttune.search._hyperopt_space import (
    convert_space,
    encode_point,
    has_parameters,
    import_hyperopt,
)
from fasttune.search.searcher import Searcher

logger = logging.getLogger(__name__)

__all__ = ["HyperOptSearch"]


class HyperOptSearch(Searcher):
    """Suggest configs with hyperopt's TPE algorithm.

    The first ``n_initial_points`` suggestions are random; later ones model which
    regions gave low losses. Spaces given as fasttune domains (``tune.uniform``,
    ``tune.choice`` with nested dicts, ...) are converted; a native hyperopt space
    (``hp.uniform("x", 0, 1)``...) is used as is.

    Args:
        space: A search space of its own (fasttune domains or ``hp.*``
            expressions). Leave it out to search the Tuner's ``param_space``.
        metric: The result key to optimise.
        mode: ``"min"`` or ``"max"``.
        points_to_evaluate: Configs to try first, in order; each gives a value for
            every searched key (choices by value, not by index).
        n_initial_points: Random suggestions before TPE starts (None: hyperopt's
            default of 20).
        random_state_seed: Seed, for reproducible suggestions.
        gamma: TPE's quantile splitting good from bad trials, in (0, 1].

    Raises:
        ValueError: Bad arguments, or a space with domains hyperopt cannot express.
        ImportError: If hyperopt is not installed.

    Example:
        >>> from hyperopt import hp
        >>> searcher = HyperOptSearch({"x": hp.uniform("x", 0, 1)}, metric="m", mode="max")
        >>> 0 <= searcher.suggest("t1")["x"] <= 1
        True
    """

    def __init__(
        self,
        space: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        n_initial_points: int | None = 20,
        random_state_seed: int | None = None,
        gamma: float | None = 0.25,
    ):
        import numpy as np

        import_hyperopt()
        _check_single_metric(metric)
        super().__init__(metric=metric, mode=mode)
        self._n_initial_points = _check_n_initial_points(n_initial_points)
        self._gamma = _check_gamma(gamma)
        self._points = _check_points(points_to_evaluate)
        self._rstate = np.random.RandomState(_check_seed(random_state_seed))
        self._space: dict[str, Any] | None = None
        self._own_space = False
        self._trials: Any = None
        self._domain: Any = None
        self._live: dict[str, int] = {}
        self._num_points = 0
        self._next_point = 0
        self._warned_no_metric = False
        if space is not None and not isinstance(space, Mapping):
            raise TypeError(f"HyperOptSearch: `space` must be a dict, got {type(space).__name__}.")
        if space:
            self._own_space = True
            self._setup(convert_space(space) or dict(space))

    @staticmethod
    def convert_search_space(spec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        """Convert a fasttune space to hyperopt expressions (``{}`` if nothing is searched).

        Raises:
            ValueError: For ``grid_search``, ``sample_from`` and unsupported domains.
        """
        return convert_space(spec, prefix)

    # ------------------------------------------------------------------ setup
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the Tuner's metric, mode and ``param_space``.

        Returns:
            False if the searcher was built with its own ``space`` (it then only
            takes a metric/mode it lacks); True otherwise.

        Raises:
            ValueError: If ``config`` holds domains hyperopt cannot express.
            RuntimeError: If there is nothing to search.
        """
        validate_metric_mode(metric, mode)
        _check_single_metric(metric)
        if self._own_space:
            self._metric = self._metric or metric
            self._mode = self._mode or mode
            return False
        # Constants are left to the Tuner, which lays each suggestion over them.
        space = convert_space(config, keep_constants=False)
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        self._setup(space)
        return True

    def _setup(self, space: dict[str, Any]) -> None:
        hpo = import_hyperopt()
        if not has_parameters(space):
            raise RuntimeError(
                "HyperOptSearch has no search space: pass `space` to HyperOptSearch(...) or "
                "put search domains (tune.uniform, tune.choice, ...) in the Tuner's "
                "`param_space`. A space of constants only cannot be searched; for that "
                "leave `TuneConfig.search_alg` unset."
            )
        encoded = [encode_point(space, point) for point in self._points]
        self._space = space
        self._domain = None
        trials = hpo.Trials()
        if encoded:
            trials.insert_trial_docs(
                _point_docs(trials, list(self._hyperopt_domain().params), encoded)
            )
        trials.refresh()
        self._trials = trials
        self._live = {}
        self._num_points = len(encoded)
        self._next_point = 0

    def _hyperopt_domain(self) -> Any:
        if self._domain is None:
            self._domain = import_hyperopt().Domain(_identity, self._space)
        return self._domain

    # ------------------------------------------------------------------ search
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """The next point to evaluate: a pending ``points_to_evaluate`` entry, else TPE's.

        Raises:
            RuntimeError: If no space, metric or mode is known yet.
        """
        if self._trials is None:
            raise RuntimeError(
                "HyperOptSearch has no search space yet: pass `space` to HyperOptSearch(...) "
                "or a `param_space` with search domains to the Tuner."
            )
        self._require_metric_mode()
        if self._next_point < self._num_points:
            doc = self._doc(self._next_point)
            self._next_point += 1
        else:
            doc = self._new_doc()
        self._live[trial_id] = doc["tid"]
        return self._config_of(doc)

    def _new_doc(self) -> dict[str, Any]:
        hpo = import_hyperopt()
        options: dict[str, Any] = {"verbose": False}
        if self._n_initial_points is not None:
            options["n_startup_jobs"] = self._n_initial_points
        if self._gamma is not None:
            options["gamma"] = self._gamma
        trials = self._trials
        new_ids = trials.new_trial_ids(1)
        trials.refresh()
        seed = int(self._rstate.randint(2**31 - 1))
        docs = functools.partial(hpo.tpe.suggest, **options)(
            new_ids, self._hyperopt_domain(), trials, seed
        )
        trials.insert_trial_docs(docs)
        trials.refresh()
        return self._doc(docs[0]["tid"])

    def _config_of(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Evaluate the space at the values hyperopt stored for ``doc``."""
        hpo = import_hyperopt()
        domain = self._hyperopt_domain()
        values = hpo.base.spec_from_misc(doc["misc"])
        memo = domain.memo_from_config(values)
        ctrl = hpo.base.Ctrl(self._trials, current_trial=doc)
        hpo.utils.use_obj_for_literal_in_memo(domain.expr, ctrl, hpo.base.Ctrl, memo)
        config = hpo.pyll.rec_eval(domain.expr, memo=memo, print_node_on_error=False)
        return copy.deepcopy(_plain(config))

    def _doc(self, tid: int) -> dict[str, Any]:
        """The trial document hyperopt holds for ``tid`` (errored ones included)."""
        docs = self._trials._dynamic_trials
        if tid < len(docs) and docs[tid]["tid"] == tid:
            return docs[tid]
        return next(doc for doc in docs if doc["tid"] == tid)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Report the trial's loss to hyperopt (negated for ``mode="max"``).

        Errored trials, and trials that ended without a numeric metric, are marked
        failed, so TPE ignores them. Unknown or already completed ids are ignored.
        """
        tid = self._live.pop(trial_id, None)
        if tid is None:
            return
        hpo = import_hyperopt()
        doc = self._doc(tid)
        doc["refresh_time"] = hpo.utils.coarse_utcnow()
        loss = None if error else self._loss(trial_id, result)
        if loss is None:
            doc["state"] = hpo.base.JOB_STATE_ERROR
            doc["misc"]["error"] = ("TuneError", "trial failed or reported no metric")
        else:
            doc["state"] = hpo.base.JOB_STATE_DONE
            doc["result"] = {"loss": loss, "status": hpo.STATUS_OK}
        self._trials.refresh()

    def _loss(self, trial_id: str, result: dict[str, Any] | None) -> float | None:
        if not result:
            return None
        value = result.get(self._metric)
        try:
            loss = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            if not self._warned_no_metric:
                self._warned_no_metric = True
                logger.warning(
                    "Trial %s ended without a numeric %r in its last result (keys: %s); "
                    "HyperOptSearch counts it as failed. Check the metric name.",
                    trial_id,
                    self._metric,
                    sorted(result),
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
                f"HyperOptSearch needs a metric and a mode, got metric={self._metric!r} and "
                f"mode={self._mode!r}. Pass them to HyperOptSearch(metric=..., mode=...) or "
                "to TuneConfig(metric=..., mode=...)."
            )

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """hyperopt's trials, the random state, and the trials still running."""
        return {
            "hyperopt_trials": self._trials,
            "rstate": self._rstate.get_state(),
            "live": dict(self._live),
            "next_point": self._next_point,
            "num_points": self._num_points,
            # so that a freshly built searcher restored from this can suggest (as Ray's)
            "space": self._space,
            "own_space": self._own_space,
            "metric": self._metric,
            "mode": self._mode,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self._trials = state["hyperopt_trials"]
        self._rstate.set_state(state["rstate"])
        self._live = dict(state.get("live", {}))
        self._num_points = state.get("num_points", self._num_points)
        self._next_point = state.get("next_point", self._num_points)
        if "space" in state:  # states saved before the space was part of them lack it
            self._space, self._own_space = state["space"], state["own_space"]
            self._metric, self._mode = state["metric"], state["mode"]
            self._domain = None  # rebuilt from the space on first use

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_domain"] = None  # rebuilt from the space on first use
        return state


def _point_docs(
    trials: Any, labels: list[str], points: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """New trial documents for ``points`` (tids 0, 1, ...), every label listed.

    TPE reads every label of every trial, so labels a point leaves inactive (in
    another branch of a choice) get empty entries, as in hyperopt's own trials.
    """
    miscs = []
    for tid, values in enumerate(points):
        miscs.append(
            {
                "tid": tid,
                "cmd": ("domain_attachment", "FMinIter_Domain"),
                "workdir": None,
                "idxs": {label: [tid] if label in values else [] for label in labels},
                "vals": {label: [values[label]] if label in values else [] for label in labels},
            }
        )
    tids = list(range(len(points)))
    return trials.new_trial_docs(tids, [None] * len(tids), [{"status": "new"} for _ in tids], miscs)


def _identity(config: Any) -> Any:
    return config


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars (and in containers) turned into Python numbers."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if type(value) is tuple:
        return tuple(_plain(item) for item in value)
    if (
        type(value).__module__ == "numpy"
        and hasattr(value, "item")
        and getattr(value, "ndim", 1) == 0
    ):
        return value.item()
    return value


def _check_single_metric(metric: Any) -> None:
    if metric is not None and not isinstance(metric, str):
        raise ValueError(
            f"HyperOptSearch optimises a single metric (a result key), got metric={metric!r}."
        )


def _check_n_initial_points(value: Any) -> int | None:
    if value is None:
        return None
    if not is_int(value) or value < 0:
        raise ValueError(f"`n_initial_points` must be an int >= 0 (or None), got {value!r}.")
    return int(value)


def _check_gamma(value: Any) -> float | None:
    if value is None:
        return None
    if not is_real(value) or not 0 < value <= 1:
        raise ValueError(f"`gamma` must be a number in (0, 1] (or None), got {value!r}.")
    return float(value)


def _check_seed(value: Any) -> int | None:
    if value is None:
        return None
    if not is_int(value) or not 0 <= value < 2**32:
        raise ValueError(
            f"`random_state_seed` must be an int in [0, 2**32) or None, got {value!r}."
        )
    return int(value)


def _check_points(points: Any) -> list[dict[str, Any]]:
    if points is None:
        return []
    if not isinstance(points, (list, tuple)) or not all(isinstance(p, Mapping) for p in points):
        raise TypeError(f"`points_to_evaluate` must be a list of config dicts, got {points!r}.")
    return [copy.deepcopy(dict(point)) for point in points]
