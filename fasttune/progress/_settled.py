"""What a reporter has read of the leading trials that had finished: read once.

During a run, trials keep their creation order and a finished trial does not run
again, so what a report learns from their last results stays true and the next
report reads only the trials after them. This matters because a finished trial's
last result is unpacked at each read (``Trial.compact``): at 100,000 trials, reading
them all at each report took 0.7-1.0 s. Should a settled trial run again (an experiment
resumed with its errored trials restarted), all are read anew.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fasttune.progress._bar import FINISHED
from fasttune.progress._tables import metric_value


class SettledTrials:
    """The leading run of finished trials, as last read, and their best by a metric."""

    def __init__(self) -> None:
        self.count = 0
        self.metric: str | None = None
        self.mode: str | None = None
        # The best settled trial and its score (higher is better): None when none has
        # a value for the metric.
        self.best: tuple[Any, float] | None = None

    def read(
        self,
        trials: Sequence[Any],
        metric: str | None,
        mode: str | None,
        learn: Callable[[Mapping[str, Any]], None],
    ) -> None:
        """Read the trials that joined the leading finished run since the last call:
        ``learn`` gets each one's last result, and the best is kept by ``metric``."""
        count = self.count
        if (
            (metric, mode) != (self.metric, self.mode)
            or count > len(trials)
            or not all(str(t.status) in FINISHED for t in trials[:count])
        ):
            count, self.best, self.metric, self.mode = 0, None, metric, mode
        sign = 1.0 if mode == "max" else -1.0
        ranked = metric is not None and mode in ("min", "max")
        while count < len(trials) and str(trials[count].status) in FINISHED:
            trial = trials[count]
            result = trial.last_result or {}
            learn(result)
            if ranked:
                value = metric_value(result, metric)  # type: ignore[arg-type]
                if value is not None and (self.best is None or value * sign > self.best[1]):
                    self.best = (trial, value * sign)
            count += 1
        self.count = count
