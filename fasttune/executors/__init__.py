"""Executors: where and how trials run (the controller only sends commands to one).

- :class:`LocalExecutor`: each trial in a worker process forked from a server
  that has fasttune imported.
- :class:`InlineExecutor`: trials inside the driver process (tests, debugging).
- :class:`RayExecutor`: each trial in a Ray actor on a Ray cluster (needs ``ray``).
"""

from typing import TYPE_CHECKING

from fasttune._support.lazy_names import lazy_names

if TYPE_CHECKING:
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
        TrialUnqueued,
    )
    from fasttune.executors.inline import InlineExecutor
    from fasttune.executors.local import LocalExecutor
    from fasttune.executors.ray_executor import RayExecutor

# Every name is imported when first used: importing this package (as the fork server's
# own start does, and start_fork_server) costs nothing (its base module: ~30 ms).
_BASE = "fasttune.executors.base"
_LAZY = {
    "Allocation": _BASE,
    "Event": _BASE,
    "Executor": _BASE,
    "TrialFailed": _BASE,
    "TrialLaunch": _BASE,
    "TrialResults": _BASE,
    "TrialSaved": _BASE,
    "TrialStarted": _BASE,
    "TrialStopped": _BASE,
    "TrialUnqueued": _BASE,
    "InlineExecutor": "fasttune.executors.inline",
    "LocalExecutor": "fasttune.executors.local",
    "RayExecutor": "fasttune.executors.ray_executor",
}


def start_fork_server() -> None:
    """Start the local workers' fork server now, without waiting for it.

    A new interpreter importing fasttune's worker side takes ~0.1-0.15 s; started
    first, it runs while the caller imports and prepares the rest.
    """
    from fasttune.executors import _forkserver

    _forkserver.default_server().start()


__getattr__ = lazy_names(globals(), _LAZY)


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
    "TrialUnqueued",
    "start_fork_server",
]
