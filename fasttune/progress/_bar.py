"""The live report's progress line: trials done out of the total, with an ETA."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FINISHED = frozenset({"TERMINATED", "ERROR"})
BAR_WIDTH = 30


@dataclass(frozen=True)
class TrialProgress:
    """How far a run is: finished trials, the total when known, times in seconds."""

    done: int
    total: int | None
    elapsed: float
    eta: float | None

    @property
    def fraction(self) -> float | None:
        return min(1.0, self.done / self.total) if self.total else None


def trial_progress(
    trials: Sequence[Any], total_samples: int | None, elapsed: float
) -> TrialProgress:
    """The progress of ``trials`` out of ``total_samples`` (None or infinite: unknown).

    The ETA assumes the trials left take as long, on average, as the finished ones
    took so far (None until one trial finished, or with no known total).

    Example:
        >>> from types import SimpleNamespace as T
        >>> trial_progress([T(status="TERMINATED"), T(status="RUNNING")], 4, 10.0)
        TrialProgress(done=1, total=4, elapsed=10.0, eta=30.0)
    """
    done = sum(str(t.status) in FINISHED for t in trials)
    total = total_samples if total_samples and total_samples < sys.maxsize else None
    if total is not None:
        total = max(total, len(trials))
    eta = None
    if total is not None and done:
        eta = max(0.0, elapsed / done * (total - done))
    return TrialProgress(done=done, total=total, elapsed=max(0.0, elapsed), eta=eta)


def duration(seconds: float) -> str:
    """``H:MM:SS``.

    Example:
        >>> duration(3725.4)
        '1:02:05'
    """
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def progress_label(progress: TrialProgress) -> str:
    """``12/40 trials done (30%), ETA 0:02:10`` (``12 trials done`` without a total)."""
    if progress.total is None:
        return f"{progress.done} trials done"
    percent = int(100 * (progress.fraction or 0.0))
    label = f"{progress.done}/{progress.total} trials done ({percent}%)"
    if progress.done >= progress.total:
        return label
    return label + (f", ETA {duration(progress.eta)}" if progress.eta is not None else "")


def text_bar(progress: TrialProgress, width: int = BAR_WIDTH) -> str:
    """The progress line in plain ASCII.

    Example:
        >>> text_bar(TrialProgress(done=1, total=4, elapsed=10.0, eta=30.0), width=8)
        '[##......] 1/4 trials done (25%), ETA 0:00:30'
    """
    fraction = progress.fraction
    if fraction is None:
        return progress_label(progress)
    filled = round(fraction * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {progress_label(progress)}"
