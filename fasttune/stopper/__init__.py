"""Stoppers (``ray.tune.stopper``): decide when trials or the whole experiment stop.

Example:
    >>> from fasttune.stopper import CombinedStopper, MaximumIterationStopper, TimeoutStopper
    >>> stopper = CombinedStopper(MaximumIterationStopper(3), TimeoutStopper(60))
    >>> stopper("t1", {}), stopper.stop_all()
    (False, False)
"""

from typing import TYPE_CHECKING

from fasttune._support.lazy_names import lazy_names

if TYPE_CHECKING:
    from fasttune.stopper._convert import make_stopper
    from fasttune.stopper.experiment_plateau import ExperimentPlateauStopper
    from fasttune.stopper.function_stopper import FunctionStopper
    from fasttune.stopper.maximum_iteration import MaximumIterationStopper
    from fasttune.stopper.noop import NoopStopper
    from fasttune.stopper.stopper import CombinedStopper, Stopper
    from fasttune.stopper.timeout import TimeoutStopper
    from fasttune.stopper.trial_plateau import TrialPlateauStopper

# Each name is imported when first used: every run converts its ``stop`` argument
# (make_stopper), few use the plateau or timeout stoppers.
_LAZY = {
    "make_stopper": "fasttune.stopper._convert",
    "ExperimentPlateauStopper": "fasttune.stopper.experiment_plateau",
    "FunctionStopper": "fasttune.stopper.function_stopper",
    "MaximumIterationStopper": "fasttune.stopper.maximum_iteration",
    "NoopStopper": "fasttune.stopper.noop",
    "CombinedStopper": "fasttune.stopper.stopper",
    "Stopper": "fasttune.stopper.stopper",
    "TimeoutStopper": "fasttune.stopper.timeout",
    "TrialPlateauStopper": "fasttune.stopper.trial_plateau",
}


__getattr__ = lazy_names(globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CombinedStopper",
    "ExperimentPlateauStopper",
    "FunctionStopper",
    "MaximumIterationStopper",
    "NoopStopper",
    "Stopper",
    "TimeoutStopper",
    "TrialPlateauStopper",
    "make_stopper",
]
