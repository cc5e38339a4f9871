"""PB2's observations and the training set its Gaussian process learns from.

Each time a trial reaches a perturbation point PB2 records a :class:`Row`: the
trial, ``time_attr``, its bounded hyperparameters and its score. What the GP
predicts is the *improvement rate*: between two rows of the same trial with the
same hyperparameters, the score change divided by the time elapsed, given the time
and the score before the change (as in the PB2 paper and Ray Tune's PB2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The GP sees at most this many of the most recent observations.
MAX_ROWS = 1000


@dataclass(frozen=True)
class Row:
    """One observation: a trial at a perturbation point."""

    trial_id: str
    time: float
    params: tuple[float, ...]
    reward: float


@dataclass
class TrainingSet:
    """Inputs ``x`` (time, reward before, params...), targets ``y``, and the donor's point.

    Attributes:
        x: One row per observed change.
        y: The reward change per unit of time of each row.
        newpoint: ``(time, reward before)`` of the donor's latest change: the fixed
            part of the point whose hyperparameters are chosen.
        donor_time: The donor's time at that change.
        donor_reward: The donor's reward at that change.
    """

    x: Any
    y: Any
    newpoint: Any
    donor_time: float
    donor_reward: float


def training_set(
    rows: Sequence[Row], donor_id: str, max_rows: int = MAX_ROWS
) -> TrainingSet | None:
    """Improvement rates observed so far, or None if the donor has none yet.

    Example:
        >>> rows = [Row("a", 1, (0.1,), 1.0), Row("a", 3, (0.1,), 5.0)]
        >>> data = training_set(rows, "a")
        >>> data.x.tolist(), data.y.tolist(), data.newpoint.tolist()
        ([[3.0, 1.0, 0.1]], [2.0], [3.0, 1.0])
        >>> training_set(rows, "b") is None
        True
    """
    import numpy as np

    previous: dict[tuple[str, tuple[float, ...]], Row] = {}
    changes: list[tuple[Row, float, float]] = []  # (row, rate, reward before)
    for row in sorted(rows, key=lambda r: r.time):  # stable: ties keep their order
        key = (row.trial_id, row.params)
        before = previous.get(key)
        previous[key] = row
        if before is None or not row.time - before.time > 0:
            continue
        rate = (row.reward - before.reward) / (row.time - before.time)
        changes.append((row, rate, before.reward))
    changes = changes[-max_rows:]
    donor = [change for change in changes if change[0].trial_id == donor_id]
    if not donor:
        return None
    x = np.array([[row.time, before, *row.params] for row, _, before in changes], dtype=float)
    y = np.array([rate for _, rate, _ in changes], dtype=float)
    last, _, last_before = donor[-1]
    return TrainingSet(
        x, y, np.array([last.time, last_before], dtype=float), last.time, last.reward
    )
