"""Executors: where and how trials run (the controller only sends commands to one).

- :class:`LocalExecutor`: each trial in a worker process forked from a server
  that has fasttune imported.
- :class:`InlineExecutor`: trials inside the driver process (tests, debugging).
"""

from fasttune.executors.base import (
    Allocation,
    Event,
    Executor,
    TrialFailed,
    TrialLaunch,
    TrialResults,
    TrialSaved,
    TrialStarted,
    TrialStopped,
)
from fasttune.executors.inline import InlineExecutor
from fasttune.executors.local import LocalExecutor

__all__ = [
    "Allocation",
    "Event",
    "Executor",
    "InlineExecutor",
    "LocalExecutor",
    "TrialFailed",
    "TrialLaunch",
    "TrialResults",
    "TrialSaved",
    "TrialStarted",
    "TrialStopped",
]
