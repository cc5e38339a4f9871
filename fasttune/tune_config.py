"""``TuneConfig``: how to search (as ``ray.tune.TuneConfig``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class TuneConfig:
    """Search settings for a :class:`~fasttune.Tuner`.

    Args:
        metric: Result key to optimise (passed to searcher and scheduler).
        mode: ``"min"`` or ``"max"``.
        search_alg: A ``Searcher`` or ``SearchAlgorithm`` (default: random/grid).
        scheduler: A ``TrialScheduler`` (default: FIFO).
        num_samples: Samples of the search space (-1: until stopped; 0: none, an
            empty ``ResultGrid``, as in Ray Tune).
        max_concurrent_trials: Trials running at once (None or 0: as resources allow).
        time_budget_s: Stop the experiment after this many seconds.
        reuse_actors: Reuse worker processes (and Trainables via ``reset_config``).
        trial_name_creator: ``trial -> str`` for trial names.
        trial_dirname_creator: ``trial -> str`` for trial directory names.
        seed: Seed for the default searcher, so the same configs come out (fasttune).
    """

    mode: str | None = None
    metric: str | None = None
    search_alg: Any = None
    scheduler: Any = None
    num_samples: int = 1
    max_concurrent_trials: int | None = None
    time_budget_s: float | int | None = None
    reuse_actors: bool | None = None
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None
    chdir_to_trial_dir: bool | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in (None, "min", "max"):
            raise ValueError(f"TuneConfig.mode={self.mode!r} is invalid: use 'min' or 'max'.")
        if self.metric is not None and not isinstance(self.metric, str):
            raise TypeError(
                f"TuneConfig.metric must be a result key (str), got {type(self.metric).__name__}"
            )
        if (
            not isinstance(self.num_samples, int)
            or isinstance(self.num_samples, bool)
            or self.num_samples < -1
        ):
            raise ValueError(
                f"TuneConfig.num_samples={self.num_samples!r} is invalid: use an int >= 0, "
                "or -1 to sample until stopped."
            )
        if self.max_concurrent_trials is not None and (
            not isinstance(self.max_concurrent_trials, int)
            or isinstance(self.max_concurrent_trials, bool)
            or self.max_concurrent_trials < 0
        ):
            raise ValueError(
                f"TuneConfig.max_concurrent_trials={self.max_concurrent_trials!r} is invalid: "
                "use an int >= 1, or None (or 0) for no limit."
            )
        if self.time_budget_s is not None and not (
            isinstance(self.time_budget_s, (int, float)) and self.time_budget_s > 0
        ):
            raise ValueError(
                f"TuneConfig.time_budget_s={self.time_budget_s!r} is invalid: use seconds > 0."
            )
