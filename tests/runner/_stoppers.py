"""A stopper shared by runner tests."""

from __future__ import annotations

from typing import Any

import fasttune as tune


class StopAllAfter(tune.Stopper):
    """Stops the whole experiment once it has seen ``results`` results (any trial's)."""

    def __init__(self, results: int):
        self.results = results
        self.seen = 0

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.seen += 1
        return False

    def stop_all(self) -> bool:
        return self.seen >= self.results
