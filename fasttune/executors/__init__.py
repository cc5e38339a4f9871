"""Executors: where and how trials run (the controller only sends commands to one).

- :class:`LocalExecutor`: each trial in a worker process forked from a server
  that has fasttune imported.
- :class:`InlineExecutor`: trials inside the driver process (tests, debugging).
- :class:`RayExecutor`: each trial in a Ray actor on a Ray cluster (needs ``ray``).
"""

import importlib
from typing import Any

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

_LAZY = {
    "InlineExecutor": "fasttune.executors.inline",
    "LocalExecutor": "fasttune.executors.local",
    "RayExecutor": "fasttune.executors.ray_executor",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fasttune.executors' has no attribute {name!r}")


__all__ = [
    "Allocation",
    "Event",
    "Executor",
    "InlineExecutor",
    "LocalExecutor",
    "RayExecutor",
    "TrialFailed",
    "TrialLaunch",
    "TrialResults",
    "TrialSaved",
    "TrialStarted",
    "TrialStopped",
]
