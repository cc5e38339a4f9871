"""One HyperBand bracket: successive halving over the trials placed in it; argument checks.

A bracket is plain bookkeeping keyed by trial id (it holds no ``Trial`` objects), so
a scheduler's state pickles small and survives ``Tuner.restore``. The numbers follow
Ray Tune's ``HyperBandScheduler``: for ``max_t`` and ``eta``, bracket ``s`` holds at
most ``ceil(s_max_1 / (s + 1) * eta**s)`` trials whose first milestone is
``int(max_t * eta**-s)``; each halving keeps ``ceil(n / eta)`` trials and multiplies
the milestone by ``eta`` (capped at ``max_t``).
"""

from __future__ import annotations

import collections
import math
import numbers
from collections.abc import Mapping
from typing import Any

# A trial's latest (time_attr value, metric value); None before its first result.
Observation = tuple[float, float]


def check_arguments(
    name: str,
    time_attr: Any,
    metric: Any,
    mode: Any,
    max_t: Any,
    reduction_factor: Any,
    stop_last_trials: Any,
) -> None:
    """Reject HyperBand constructor arguments out of range, naming the parameter.

    Raises:
        ValueError: Showing the parameter, its value and what it must be.
    """
    if not isinstance(time_attr, str) or not time_attr:
        raise ValueError(f"{name}: `time_attr` must be a result key, got {time_attr!r}.")
    if metric is not None and not isinstance(metric, str):
        raise ValueError(f"{name}: `metric` must be one result key (str), got {metric!r}.")
    if mode is not None and mode not in ("min", "max"):
        raise ValueError(f"{name}: `mode` must be 'min' or 'max', got {mode!r}.")
    if not _is_number(max_t) or not max_t >= 1:
        raise ValueError(
            f"{name}: `max_t` must be a number >= 1 (milestones are whole `{time_attr}` "
            f"units), got {max_t!r}."
        )
    if not _is_number(reduction_factor) or not reduction_factor > 1:
        raise ValueError(
            f"{name}: `reduction_factor` must be a number > 1, got {reduction_factor!r}."
        )
    if not isinstance(stop_last_trials, bool):
        raise ValueError(f"{name}: `stop_last_trials` must be a bool, got {stop_last_trials!r}.")


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and not math.isnan(float(value))
    )


def num_brackets(max_t: float, eta: float) -> int:
    """``s_max + 1``: how many brackets one HyperBand round ("band") has."""
    return round(math.log(max_t) / math.log(eta)) + 1


def bracket_size(s: int, s_max_1: int, eta: float) -> int:
    """How many trials bracket ``s`` takes (its ``n0``)."""
    return math.ceil(s_max_1 / (s + 1) * eta**s)


def first_milestone(s: int, max_t: float, eta: float) -> int:
    """The ``time_attr`` value bracket ``s`` first halves at (its ``r0``; 0: no bracket)."""
    return int(max_t * eta ** (-s))


def _total_work(n: int, r: int, s: int, eta: float, max_t: float) -> int:
    # Ray's progress denominator, kept as Ray computes it (later rungs are capped at
    # max_t - r0, so the percentages shown match Ray's).
    work = 0
    r0 = r
    for _ in range(s + 1):
        work += int(n) * int(r)
        n = math.ceil(n / eta)
        r = int(min(r * eta, max_t - r0))
    return work


class Bracket:
    """The trials of one bracket, their latest observations and the current milestone.

    Attributes:
        s: The bracket's index in its band (number of halvings it starts with).
        size: Trials the bracket takes now (shrinks by ``eta`` at each halving).
        milestone: The ``time_attr`` value trials run to before the next halving.
        halvings_left: Halvings still to come.
        live: Trial id -> latest observation, for trials still in the bracket.
        members: Every trial id ever placed here, in order.
        to_unpause: Paused trials promoted by a halving, waiting to be resumed.
    """

    def __init__(
        self,
        s: int,
        size: int,
        milestone: int,
        max_t: float,
        eta: float,
        stop_last_trials: bool = True,
    ):
        self.s = s
        self.size = size
        self.milestone = milestone
        self.halvings_left = s
        self.max_t = max_t
        self.eta = eta
        self.stop_last_trials = stop_last_trials
        self.live: dict[str, Observation | None] = {}
        self.members: list[str] = []
        self.to_unpause: set[str] = set()
        self.progress = 0.0
        self.total_work = _total_work(size, milestone, s, eta, max_t)

    # ------------------------------------------------------------------ membership
    def filled(self) -> bool:
        """True when the bracket takes no more trials."""
        return len(self.live) >= self.size

    def add(self, trial_id: str) -> None:
        """Place a trial (or take back one that left, e.g. an errored trial resumed)."""
        self.live.setdefault(trial_id, None)
        if trial_id not in self.members:
            self.members.append(trial_id)

    def remove(self, trial_id: str) -> None:
        """Forget a trial that finished, failed or was stopped (no-op if unknown)."""
        self.live.pop(trial_id, None)
        self.to_unpause.discard(trial_id)

    # ------------------------------------------------------------------ progress
    def record(self, trial_id: str, time: float, value: float) -> float:
        """Store a trial's latest result; returns how far its time moved (may be < 0)."""
        previous = self.live[trial_id]
        delta = time - (previous[0] if previous is not None else 0)
        self.progress += delta
        self.live[trial_id] = (time, value)
        self.to_unpause.discard(trial_id)
        return delta

    def time_of(self, trial_id: str) -> float:
        observed = self.live.get(trial_id)
        return observed[0] if observed is not None else 0

    def should_continue(self, trial_id: str) -> bool:
        """True while the trial has not reached the milestone (or runs on past max_t)."""
        if not self.stop_last_trials and self.halvings_left == 0:
            return True
        return self.time_of(trial_id) < self.milestone

    def all_reached(self) -> bool:
        """True when every live trial has reached the current milestone."""
        return all(self.time_of(tid) >= self.milestone for tid in self.live)

    def finished(self) -> bool:
        """True when the last rung is done and its trials are to stop."""
        return self.stop_last_trials and self.halvings_left == 0 and self.all_reached()

    def halve(self, sign: float) -> tuple[list[str], list[str]]:
        """Keep the best ``ceil(size / eta)`` live trials; drop the rest from the bracket.

        Args:
            sign: 1.0 to keep the highest metric values, -1.0 the lowest. NaN ranks last.

        Returns:
            ``(kept, dropped)`` trial ids; the milestone has moved to the next rung.
        """
        if self.halvings_left == 0 and not self.stop_last_trials:
            return list(self.live), []
        self.halvings_left -= 1
        self.size = math.ceil(self.size / self.eta)
        self.milestone = int(min(self.milestone * self.eta, self.max_t))

        def rank(tid: str) -> float:
            observed = self.live[tid]
            value = sign * observed[1] if observed is not None else -math.inf
            return -math.inf if math.isnan(value) else value

        ordered = sorted(self.live, key=rank)  # stable: ties keep arrival order
        cut = max(len(ordered) - self.size, 0)
        dropped, kept = ordered[:cut], ordered[cut:]
        for tid in dropped:
            self.remove(tid)
        return kept, dropped

    def completion(self) -> float:
        """Rough progress in [0, 1] (Ray's ``completion_percentage``)."""
        if self.finished():
            return 1.0
        return min(self.progress / self.total_work, 1.0)

    def describe(self, statuses: Mapping[str, str]) -> str:
        """One line as Ray prints it, counting ``statuses`` (trial id -> status) of members."""
        counts = collections.Counter(statuses[tid] for tid in self.members if tid in statuses)
        status_text = ", ".join(sorted(f"{k}: {v}" for k, v in counts.items()))
        return (
            f"Bracket(Max Size (n)={self.size}, Milestone (r)={self.milestone}, "
            f"completed={self.completion():.1%}): {{{status_text}}} "
        )
