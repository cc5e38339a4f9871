"""Trial schedulers (``ray.tune.schedulers``): decide which trial runs, pauses or stops.

The scheduler classes load on first use.

Example:
    >>> from fasttune.schedulers import FIFOScheduler
    >>> FIFOScheduler().on_trial_result(None, None, {})
    'CONTINUE'
"""

from fasttune._support.lazy_names import lazy_names
from fasttune.schedulers.trial_scheduler import ControllerView, FIFOScheduler, TrialScheduler

_LAZY = {
    "AsyncHyperBandScheduler": "fasttune.schedulers.async_hyperband",
    "ASHAScheduler": "fasttune.schedulers.async_hyperband",
    "HyperBandScheduler": "fasttune.schedulers.hyperband",
    "HyperBandForBOHB": "fasttune.schedulers.hb_bohb",
    "MedianStoppingRule": "fasttune.schedulers.median_stopping_rule",
    "PopulationBasedTraining": "fasttune.schedulers.pbt",
    "PopulationBasedTrainingReplay": "fasttune.schedulers.pbt",
    "PB2": "fasttune.schedulers.pb2",
    "ResourceChangingScheduler": "fasttune.schedulers.resource_changing_scheduler",
    "create_scheduler": "fasttune.schedulers._registry",
    "SCHEDULER_IMPORT": "fasttune.schedulers._registry",
}


__getattr__ = lazy_names(globals(), _LAZY)


__all__ = [
    "PB2",
    "SCHEDULER_IMPORT",
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "ControllerView",
    "FIFOScheduler",
    "HyperBandForBOHB",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
    "PopulationBasedTrainingReplay",
    "ResourceChangingScheduler",
    "TrialScheduler",
    "create_scheduler",
]
