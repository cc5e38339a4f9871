"""Trial schedulers (``ray.tune.schedulers``): decide which trial runs, pauses or stops.

Example:
    >>> from fasttune.schedulers import FIFOScheduler
    >>> FIFOScheduler().on_trial_result(None, None, {})
    'CONTINUE'
"""

from fasttune.schedulers.trial_scheduler import ControllerView, FIFOScheduler, TrialScheduler

__all__ = ["ControllerView", "FIFOScheduler", "TrialScheduler"]
