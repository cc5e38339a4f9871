"""``NoopStopper``: never stops anything."""

from __future__ import annotations

from typing import Any

from fasttune.stopper.stopper import Stopper


class NoopStopper(Stopper):
    """A stopper that never stops a trial or the experiment.

    Example:
        >>> NoopStopper()("t1", {"loss": 0.0}), NoopStopper().stop_all()
        (False, False)
    """

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return False
