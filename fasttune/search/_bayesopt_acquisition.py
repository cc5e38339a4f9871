"""The acquisition function of BayesOptSearch, for each bayes_opt release.

Ray's ``utility_kwargs`` (``kind``, ``kappa``, ``xi``, ``kappa_decay``,
``kappa_decay_delay``) make a ``UtilityFunction`` in bayes_opt 1.x, and the matching
``bayes_opt.acquisition`` object (``UpperConfidenceBound``, ``ExpectedImprovement``,
``ProbabilityOfImprovement``) in 2.x and 3.x.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from typing import Any

UTILITY_DEFAULTS: dict[str, Any] = {"kind": "ucb", "kappa": 2.576, "xi": 0.0}
UTILITY_KEYS = ("kind", "kappa", "xi", "kappa_decay", "kappa_decay_delay")


def check_utility_kwargs(kwargs: Any) -> dict[str, Any]:
    """``utility_kwargs`` validated and completed with Ray's defaults.

    Raises:
        TypeError: If it is not a dict.
        ValueError: For unknown keys or an unknown ``kind``.

    Example:
        >>> check_utility_kwargs({"kind": "ei", "xi": 0.1})
        {'kind': 'ei', 'kappa': 2.576, 'xi': 0.1}
    """
    if kwargs is None:
        return dict(UTILITY_DEFAULTS)
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"`utility_kwargs` must be a dict, got {kwargs!r}.")
    unknown = sorted(set(kwargs) - set(UTILITY_KEYS))
    if unknown:
        raise ValueError(
            f"`utility_kwargs` has unknown keys {unknown}; accepted: {list(UTILITY_KEYS)}."
        )
    merged = {**UTILITY_DEFAULTS, **kwargs}
    if merged["kind"] not in ("ucb", "ei", "poi"):
        raise ValueError(
            f"`utility_kwargs['kind']` must be 'ucb', 'ei' or 'poi', got {merged['kind']!r}."
        )
    return merged


def make_acquisition(byo: Any, kwargs: dict[str, Any], random_state: Any) -> tuple[Any, Any]:
    """The acquisition function ``kwargs`` describe, for the installed bayes_opt.

    Returns:
        ``(utility, None)`` for bayes_opt 1.x (``optimizer.suggest(utility)``);
        ``(None, acquisition_function)`` for 2.x/3.x (given to the optimizer).
    """
    utility_cls = getattr(byo, "UtilityFunction", None)
    if utility_cls is not None:
        return utility_cls(**kwargs), None
    import numpy as np
    from bayes_opt import acquisition

    decay = kwargs.get("kappa_decay")
    extra = {
        "exploration_decay": None if decay in (None, 1) else decay,
        "exploration_decay_delay": kwargs.get("kappa_decay_delay") or None,
    }
    if kwargs["kind"] == "ucb":
        function = acquisition.UpperConfidenceBound(kappa=kwargs["kappa"], **extra)
    elif kwargs["kind"] == "ei":
        function = acquisition.ExpectedImprovement(xi=kwargs["xi"], **extra)
    else:
        function = acquisition.ProbabilityOfImprovement(xi=kwargs["xi"], **extra)
    if hasattr(function, "random_state"):  # 2.x draws from its own, unseeded, generator
        seed = random_state if isinstance(random_state, int) else None
        if isinstance(random_state, np.random.RandomState):
            function.random_state = copy.deepcopy(random_state)
        else:
            function.random_state = np.random.RandomState(seed)
    return None, function


def one_blas_thread() -> Any:
    """Limit BLAS to one thread while the process is fitted and searched.

    The matrices are tiny (one row per trial): extra threads only add
    synchronisation, which made each suggestion several times slower.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn requires it, but do not depend on that
        return contextlib.nullcontext()
    return threadpool_limits(limits=1)
