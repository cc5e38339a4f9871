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


def _assert_both_stopped_right_after_deciding(grid: Any, side_dir: Any) -> None:
    assert grid.num_errors == 0
    assert [r.metrics["training_iteration"] for r in grid] == [DECIDING, DECIDING]
    for idx in (0, 1):
        started = (side_dir / f"{idx}.log").read_text().split()
        assert started == [str(i) for i in range(1, DECIDING + 1)]  # not one more


@pytest.mark.parametrize("stop", [_callable_stop, StopAt()], ids=["callable", "Stopper"])
def test_slow_trials_stop_right_after_the_deciding_iteration(run_config, tmp_path, stop):
    side_dir = tmp_path / "side"
    side_dir.mkdir()
    grid = tune.Tuner(
        slow_counting,
        param_space={"idx": tune.grid_search([0, 1]), "side_dir": str(side_dir)},
        run_config=run_config(stop=stop),
    ).fit()
    _assert_both_stopped_right_after_deciding(grid, side_dir)


def fast_counting(config: dict[str, Any]) -> None:
    """Like :func:`slow_counting`, without the sleep: iterations of microseconds."""
    path = os.path.join(config["side_dir"], f"{config['idx']}.log")
    for i in range(1, 1000):
        with open(path, "a") as side:
            side.write(f"{i}\n")
        tune.report({"i": i})


class StopsAtDeciding(tune.schedulers.FIFOScheduler):
    """A custom scheduler that decides on results and declares nothing about lookahead."""

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        return self.STOP if result["training_iteration"] >= DECIDING else self.CONTINUE


class TolerantStopsAtDeciding(StopsAtDeciding):
    _supports_buffered_results = True  # Ray's declaration: decisions may come late


def test_a_new_scheduler_gets_exact_decisions_unless_it_declares_otherwise():
    from fasttune.executors import flow_control

    assert tune.schedulers.FIFOScheduler().supports_buffered_results
    assert not StopsAtDeciding().supports_buffered_results  # overrides on_trial_result
    assert TolerantStopsAtDeciding().supports_buffered_results
    assert flow_control.for_scheduler(tune.schedulers.FIFOScheduler()).credit > 1
    assert flow_control.for_scheduler(StopsAtDeciding()) == flow_control.EXACT
    assert flow_control.for_scheduler(TolerantStopsAtDeciding()).credit > 1
    assert flow_control.for_scheduler(object()) == flow_control.EXACT  # duck-typed


def test_an_undeclared_scheduler_stops_fast_trials_right_after_its_decision(run_config, tmp_path):
    side_dir = tmp_path / "side"
    side_dir.mkdir()
    grid = tune.Tuner(
        fast_counting,
        param_space={"idx": tune.grid_search([0, 1]), "side_dir": str(side_dir)},
        tune_config=tune.TuneConfig(scheduler=StopsAtDeciding()),
        run_config=run_config(),
    ).fit()
    _assert_both_stopped_right_after_deciding(grid, side_dir)
