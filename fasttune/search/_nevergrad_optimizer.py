"""Which nevergrad optimizer ``NevergradSearch`` builds, and readying it for the search.

``optimizer`` may be a class or configured optimizer (``ng.optimizers.OnePlusOne``), a
name from ``ng.optimizers.registry`` (``"TwoPointsDE"``), or an optimizer instance.
"""

from __future__ import annotations

import difflib
import inspect
import logging
from typing import Any

logger = logging.getLogger("fasttune.search.nevergrad")

_NAME = "NevergradSearch"


def is_optimizer_instance(ng: Any, optimizer: Any) -> bool:
    """Whether ``optimizer`` is an optimizer already built on a parametrization."""
    return isinstance(optimizer, ng.optimization.base.Optimizer)


def resolve_factory(ng: Any, optimizer: Any) -> Any:
    """The optimizer class or configured optimizer to build on the space.

    None gives ``ng.optimizers.OnePlusOne`` (Ray Tune requires the argument).

    Raises:
        ValueError: For an unknown registry name (with close matches) or another type.

    Example:
        >>> import nevergrad as ng
        >>> resolve_factory(ng, "OnePlusOne") is ng.optimizers.OnePlusOne
        True
    """
    base = ng.optimization.base
    if optimizer is None:
        return ng.optimizers.OnePlusOne
    if isinstance(optimizer, str):
        registry = ng.optimizers.registry
        if optimizer in registry:
            return registry[optimizer]
        close = difflib.get_close_matches(optimizer, list(registry), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(
            f"{_NAME}: unknown nevergrad optimizer name {optimizer!r}.{hint} The names are "
            "the keys of nevergrad.optimizers.registry."
        )
    if (inspect.isclass(optimizer) and issubclass(optimizer, base.Optimizer)) or isinstance(
        optimizer, base.ConfiguredOptimizer
    ):
        return optimizer
    raise ValueError(
        f"{_NAME}: `optimizer` must be a nevergrad optimizer class or configured optimizer "
        f"(e.g. ng.optimizers.OnePlusOne), a name from ng.optimizers.registry, or an "
        f"optimizer instance; got {type(optimizer).__name__}: {optimizer!r}."
    )


def prepare(optimizer: Any) -> None:
    """Make the optimizer's state savable, and warn about optimizers run in a thread.

    Some optimizers keep the history that pickling needs only when asked to, before
    their first ``ask``; an instance already used is left as it is (if its state
    cannot be saved, the experiment says so and resumes it afresh). Optimizers
    recast from sequential code (``NelderMead``, ``Powell``...) run it in a thread
    that ends only with their budget.
    """
    if optimizer.num_ask == 0:
        optimizer.enable_pickling()
    if getattr(optimizer, "recast", False) and optimizer.budget is None:
        logger.warning(
            "%s runs in a background thread that ends only when its budget is used up "
            "(or the optimizer is deleted): pass optimizer_kwargs={'budget': num_samples} "
            "to %s, or the Python process may not exit when the experiment ends.",
            type(optimizer).__name__,
            _NAME,
        )
