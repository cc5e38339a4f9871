"""Stops decided on the driver are exact for slow iterations (the adaptive lookahead).

A callable or ``Stopper`` in ``RunConfig(stop=...)`` is evaluated on the driver; a trial
whose iterations take 20 ms or more waits for the decision on each result, so it never
starts the iteration after the deciding one. Each trial counts the iterations it starts
in a side file outside the experiment (results after a stop are dropped, so only the
trial itself can tell).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

import fasttune as tune

DECIDING = 3


def slow_counting(config: dict[str, Any]) -> None:
    """Appends each iteration it starts to its side file, sleeps 50 ms, reports."""
    path = os.path.join(config["side_dir"], f"{config['idx']}.log")
    for i in range(1, 1000):
        with open(path, "a") as side:
            side.write(f"{i}\n")
        time.sleep(0.05)
        tune.report({"i": i})


class StopAt(tune.Stopper):
    """A custom Stopper: each trial at iteration ``DECIDING``."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return result["training_iteration"] >= DECIDING

    def stop_all(self) -> bool:
        return False


def _callable_stop(trial_id: str, result: dict[str, Any]) -> bool:
    return result["training_iteration"] >= DECIDING


@pytest.mark.parametrize("stop", [_callable_stop, StopAt()], ids=["callable", "Stopper"])
def test_slow_trials_stop_right_after_the_deciding_iteration(run_config, tmp_path, stop):
    side_dir = tmp_path / "side"
    side_dir.mkdir()
    grid = tune.Tuner(
        slow_counting,
        param_space={"idx": tune.grid_search([0, 1]), "side_dir": str(side_dir)},
        run_config=run_config(stop=stop),
    ).fit()
    assert grid.num_errors == 0
    assert [r.metrics["training_iteration"] for r in grid] == [DECIDING, DECIDING]
    for idx in (0, 1):
        started = (side_dir / f"{idx}.log").read_text().split()
        assert started == [str(i) for i in range(1, DECIDING + 1)]  # not one more
