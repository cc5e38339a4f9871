"""``HEBOSearch``: Huawei's HEBO Bayesian optimisation, as ``ray.tune.search.hebo``.

Needs the optional ``HEBO`` package (``pip install "fasttune[hebo]"``; see the
``hebo`` extra's note in ``pyproject.toml`` about HEBO's numpy pin).

Example:
    >>> from fasttune.search.sample import uniform
    >>> searcher = HEBOSearch(metric="loss", mode="min", random_state_seed=0)
    >>> searcher.set_search_properties(None, None, {"x": uniform(-1, 1)})
    True
    >>> config = searcher.suggest("t1")
    >>> -1 <= config["x"] <= 1
    True
    >>> searcher.on_trial_complete("t1", {"loss": config["x"] ** 2})
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping
from typing import Any

from fasttune._support.numeric import is_real
from fasttune.search._checks import plain
from fasttune.search._flat_space import FlatSpace, decode_config, encode_config, unflatten
from fasttune.search._hebo_space import (
    HeboParameter,
    design_space_class,
    import_hebo,
    to_parameters,
)
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
from fasttune.search._spec_view import contains_unresolved
from fasttune.search.searcher import Searcher

__all__ = ["HEBOSearch"]

_NAME = "HEBOSearch"


class HEBOSearch(Searcher):
    """Suggest configs with HEBO, in batches of ``max_concurrent``.

    HEBO's first suggestions are random (its ``rand_sample``, by default one more than
    the number of parameters); later ones come from its model. A batch of
    ``max_concurrent`` configs is asked at once and handed out one per trial; the
    next batch is asked once the whole batch has finished, as in Ray Tune. Spaces given
    as fasttune domains are converted (see
    :func:`~fasttune.search._hebo_space.to_parameters`); a HEBO ``DesignSpace`` is
    used as is.

    Args:
        space: The search space, if not taken from the Tuner's ``param_space``:
            fasttune domains (a dict) or a HEBO ``DesignSpace``.
        metric: The result key to optimise.
        mode: ``"min"`` or ``"max"``.
        points_to_evaluate: Configs to try first, in order.
        evaluated_rewards: The metric values of ``points_to_evaluate`` if known: they
            are told to HEBO and not run again.
        random_state_seed: Seed, for reproducible suggestions. HEBO draws from numpy's
            and torch's global generators; fasttune swaps generators of the searcher's
            own in around each call, so other code's draws neither move nor are moved
            by the search. (With pymoo newer than HEBO's pinned 0.6.0, HEBO's
            acquisition search seeds itself from fresh entropy, so its model-based
            suggestions still vary from run to run.)
        max_concurrent: The batch size (trials running at once); a
            ``ConcurrencyLimiter`` or ``TuneConfig(max_concurrent_trials)`` sets it.
        **kwargs: Arguments for ``HEBO(...)``, e.g. ``rand_sample``, ``model_name``.

    Raises:
        ValueError: Bad arguments, spaces HEBO cannot search (naming the key), points
            outside the space.
        TypeError: If ``space`` is neither a dict of domains nor a ``DesignSpace``.
        ImportError: If HEBO is not installed.
    """

    def __init__(
        self,
        space: dict[str, Any] | Any = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        evaluated_rewards: list[Any] | None = None,
        random_state_seed: int | None = None,
        max_concurrent: int = 8,
        **kwargs: Any,
    ):

        import_hebo()
        check_single_metric(metric, _NAME)
        super().__init__(metric=metric, mode=mode)
        self._max_concurrent = check_positive_int(max_concurrent, "max_concurrent", _NAME)
        self._seed = check_seed(random_state_seed, "random_state_seed", _NAME)
        self._points = check_points(points_to_evaluate, _NAME)
        self._rewards = _check_rewards(evaluated_rewards, self._points)
        self._hebo_kwargs = dict(kwargs)
        self._numpy = NumpyState(self._seed)
        self._torch_state: Any = None  # set from the seed on first use
        self._params: list[HeboParameter] | None = None  # set when converted from domains
        self._flat: FlatSpace | None = None
        self._space: Any = None  # the HEBO DesignSpace
        self._opt: Any = None
        self._own_space = False
        self._queue: list[tuple[dict[str, Any], dict[str, Any]]] = []  # points not given yet
        self._cache: list[dict[str, Any]] = []  # the rest of HEBO's current batch
        self._batch_filled = False
        self._live: dict[str, dict[str, Any]] = {}  # trial id -> its row in HEBO's space
        self._warned: set[str] = set()
        if isinstance(space, Mapping):
            if space:
                if not contains_unresolved(space):
                    raise TypeError(
                        f"{_NAME}: `space` must be a HEBO DesignSpace or a dict of search "
                        f"domains (tune.uniform, ...); got constants only: {dict(space)!r}."
                    )
                self._own_space = True
                self._take_domains(space)
        elif space is not None:
            if not isinstance(space, design_space_class()):
                raise TypeError(
                    f"{_NAME}: `space` must be a HEBO DesignSpace or a dict of search domains, "
                    f"got {type(space).__name__}: {space!r}."
                )
            self._own_space = True
            self._space = space
        if self._space is not None and self._mode:
            self._setup_optimizer()

    @staticmethod
    def convert_search_space(spec: dict[str, Any], prefix: str = "") -> Any:
        """Convert fasttune domains to a HEBO ``DesignSpace`` (``/``-joined names).

        Choices and quantized domains become indices (:class:`HEBOSearch` maps them
        back itself).

        Raises:
            ValueError: For ``grid_search``, ``sample_from``, ``randn`` and other domains
                HEBO cannot search, naming the key.
        """
        if prefix:
            spec = {prefix: spec}
        params = to_parameters(spec)[0]
        return design_space_class()().parse([p.definition for p in params])

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Take a ``ConcurrencyLimiter``'s limit as the batch size (returns True)."""
        self._max_concurrent = check_positive_int(max_concurrent, "max_concurrent", _NAME)
        return True

    # ------------------------------------------------------------------ setup
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the Tuner's metric, mode and ``param_space``.

        Returns:
            False if the searcher was built with its own space (it then only takes a
            metric/mode it lacks); True otherwise.

        Raises:
            ValueError: If ``config`` holds domains HEBO cannot search.
            RuntimeError: If there is nothing to search.
        """
        if take_metric_mode(self, metric, mode, _NAME):
            if self._opt is None and self._mode:
                self._setup_optimizer()
            return False
        self._take_domains(config or {})
        if self._mode:
            self._setup_optimizer()
        return True

    def _take_domains(self, space: Mapping[str, Any]) -> None:
        params, flat = to_parameters(space)
        if not params:
            raise no_space_error(_NAME)
        self._params, self._flat = params, flat
        self._space = design_space_class()().parse([p.definition for p in params])

    def _setup_optimizer(self) -> None:
        import numpy as np
        import pandas as pd

        self._metric, self._mode = resolved_metric_mode(self._metric, self._mode, _NAME)
        encoded = [self._encode_point(point) for point in self._points]
        kwargs = dict(self._hebo_kwargs)
        if self._seed is not None:
            kwargs.setdefault("scramble_seed", self._seed)
        with self._own_generators():
            try:
                self._opt = import_hebo().HEBO(self._space, **kwargs)
            except TypeError as error:
                raise ValueError(
                    f"{_NAME}: HEBO(...) does not take {sorted(self._hebo_kwargs)}: {error}"
                ) from error
            if self._rewards is not None and encoded:
                sign = -1.0 if self._mode == "max" else 1.0
                rows = pd.DataFrame([row for row, _ in encoded])
                values = sign * np.asarray(self._rewards, dtype=float).reshape(-1, 1)
                self._opt.observe(rows, values)
                encoded = []
        self._queue = encoded
        self._cache, self._batch_filled, self._live = [], False, {}

    def _encode_point(self, point: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """HEBO's row for a point, and the config to hand out for it."""
        if self._params is None:
            native = {name: point_value(point, name, _NAME) for name in self._space.para_names}
            return native, unflatten(native)
        assert self._flat is not None
        return encode_config(self._params, self._flat, point, _NAME)

    @contextlib.contextmanager
    def _own_generators(self) -> Iterator[None]:
        """Run HEBO with this searcher's numpy and torch generators as the global ones."""
        import numpy as np
        import torch

        with self._numpy.active():
            torch_saved = torch.random.get_rng_state()
            if self._torch_state is None:
                seed = self._seed if self._seed is not None else np.random.randint(2**31)
                torch.manual_seed(seed)
            else:
                torch.random.set_rng_state(self._torch_state)
            try:
                yield
            finally:
                self._torch_state = torch.random.get_rng_state()
                torch.random.set_rng_state(torch_saved)

    # ------------------------------------------------------------------ search
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """The next config: a point to evaluate, else the next of HEBO's batch.

        Returns None while the current batch is still running.

        Raises:
            RuntimeError: If no space, metric or mode is known yet.
        """
        if self._opt is None:
            if self._space is None:
                raise no_space_yet_error(_NAME)
            self._setup_optimizer()
        if not self._live:
            self._batch_filled = False
        if self._queue:
            row, config = self._queue.pop(0)
            config = copy.deepcopy(config)
        else:
            if self._batch_filled or len(self._live) >= self._max_concurrent:
                return None
            if not self._cache:
                with self._own_generators():
                    batch = self._opt.suggest(n_suggestions=self._max_concurrent)
                self._cache = [
                    {name: plain(value) for name, value in record.items()}
                    for record in batch.to_dict("records")
                ]
            row = self._cache.pop(0)
            config = self._config_of(row)
        self._live[trial_id] = row
        if len(self._live) >= self._max_concurrent:
            self._batch_filled = True
        return config

    def _config_of(self, row: dict[str, Any]) -> dict[str, Any]:
        if self._params is None:
            return unflatten(row)
        return decode_config(self._params, row)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Tell HEBO the trial's loss (the metric, negated for ``mode="max"``).

        Errored trials, and trials without a finite numeric metric, are not told.
        Unknown ids are ignored.
        """
        import numpy as np
        import pandas as pd

        row = self._live.pop(trial_id, None)
        if row is None or error:
            return
        loss = loss_of(result, self._metric, self._mode, self._warned, _NAME, trial_id)
        if loss is None:
            return
        with self._own_generators():
            self._opt.observe(pd.DataFrame([row]), np.array([[loss]]))


# ---------------------------------------------------------------------- checks
def _check_rewards(rewards: Any, points: list[dict[str, Any]]) -> list[float] | None:
    if rewards is None:
        return None
    if not isinstance(rewards, (list, tuple)) or not all(is_real(r) for r in rewards):
        raise ValueError(
            f"{_NAME}: `evaluated_rewards` must be a list of numbers, got {rewards!r}."
        )
    if len(rewards) != len(points):
        raise ValueError(
            f"{_NAME}: `evaluated_rewards` has {len(rewards)} values for {len(points)} "
            "`points_to_evaluate`; give one per point."
        )
    return [float(r) for r in rewards]
