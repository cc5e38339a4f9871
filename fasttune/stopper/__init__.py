"""Stoppers (``ray.tune.stopper``): decide when trials or the whole experiment stop.

Example:
    >>> from fasttune.stopper import CombinedStopper, MaximumIterationStopper, TimeoutStopper
    >>> stopper = CombinedStopper(MaximumIterationStopper(3), TimeoutStopper(60))
    >>> stopper("t1", {}), stopper.stop_all()
    (False, False)
"""

from fasttune.stopper._convert import make_stopper
from fasttune.stopper.experiment_plateau import ExperimentPlateauStopper
from fasttune.stopper.function_stopper import FunctionStopper
from fasttune.stopper.maximum_iteration import MaximumIterationStopper
from fasttune.stopper.noop import NoopStopper
from fasttune.stopper.stopper import CombinedStopper, Stopper
from fasttune.stopper.timeout import TimeoutStopper
from fasttune.stopper.trial_plateau import TrialPlateauStopper

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
