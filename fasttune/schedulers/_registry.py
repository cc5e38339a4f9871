"""``create_scheduler``: build a scheduler from its name (as ``ray.tune.create_scheduler``).

Scheduler classes are imported only when asked for, so naming one never imports the
others (nor their optional dependencies).
"""

from __future__ import annotations

import importlib
import inspect
import logging
from typing import Any

logger = logging.getLogger(__name__)

# name -> "module:attribute" (Ray's names, aliases included).
SCHEDULER_IMPORT: dict[str, str] = {
    "fifo": "fasttune.schedulers.trial_scheduler:FIFOScheduler",
    "async_hyperband": "fasttune.schedulers.async_hyperband:AsyncHyperBandScheduler",
    "asynchyperband": "fasttune.schedulers.async_hyperband:AsyncHyperBandScheduler",
    "median_stopping_rule": "fasttune.schedulers.median_stopping_rule:MedianStoppingRule",
    "medianstopping": "fasttune.schedulers.median_stopping_rule:MedianStoppingRule",
    "hyperband": "fasttune.schedulers.hyperband:HyperBandScheduler",
    "hb_bohb": "fasttune.schedulers.hb_bohb:HyperBandForBOHB",
    "pbt": "fasttune.schedulers.pbt:PopulationBasedTraining",
    "pbt_replay": "fasttune.schedulers.pbt:PopulationBasedTrainingReplay",
    "pb2": "fasttune.schedulers.pb2:PB2",
    "resource_changing": (
        "fasttune.schedulers.resource_changing_scheduler:ResourceChangingScheduler"
    ),
}


def scheduler_class(scheduler: str) -> type:
    """The class registered under ``scheduler`` (case-insensitive).

    Raises:
        ValueError: For an unknown name (the message lists the known ones).

    Example:
        >>> scheduler_class("FIFO").__name__
        'FIFOScheduler'
    """
    if not isinstance(scheduler, str) or scheduler.lower() not in SCHEDULER_IMPORT:
        raise ValueError(
            f"create_scheduler: unknown scheduler {scheduler!r}; the `scheduler` argument "
            f"must be one of {sorted(SCHEDULER_IMPORT)}."
        )
    module, _, attribute = SCHEDULER_IMPORT[scheduler.lower()].partition(":")
    return getattr(importlib.import_module(module), attribute)


def create_scheduler(scheduler: str, **kwargs: Any) -> Any:
    """Instantiate a scheduler from its name, e.g. to switch schedulers by a flag.

    As on Ray, keyword arguments the scheduler does not accept are left out, so one
    set of arguments can serve several schedulers.

    Args:
        scheduler: One of the names in ``SCHEDULER_IMPORT`` (case-insensitive):
            ``"fifo"``, ``"async_hyperband"``, ``"median_stopping_rule"``, ``"pbt"``...
        **kwargs: Arguments for the scheduler's constructor.

    Returns:
        The scheduler.

    Raises:
        ValueError: For an unknown name.

    Example:
        >>> asha = create_scheduler("async_hyperband", metric="loss", mode="min", max_t=10,
        ...                         perturbation_interval=5)  # a PBT argument: left out
        >>> type(asha).__name__, asha.metric
        ('AsyncHyperBandScheduler', 'loss')
    """
    cls = scheduler_class(scheduler)
    parameters = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        accepted = kwargs
    else:
        names = {p.name for p in parameters}
        accepted = {k: v for k, v in kwargs.items() if k in names}
        dropped = sorted(set(kwargs) - set(accepted))
        if dropped:
            logger.debug("create_scheduler(%r): %s accepts no %s", scheduler, cls.__name__, dropped)
    return cls(**accepted)
