"""One driver per experiment, and a new run never overwrites an earlier one.

A second driver on a running experiment (a restore, or a fresh fit with the same
name) is refused with a message naming the one that runs it; once that driver is
killed, its lock is taken over. A fresh fit into a folder holding an earlier run moves
that run to a dated sibling, where it stays restorable.
"""

from __future__ import annotations

import os
import signal

import pytest

import fasttune as tune
from fasttune.storage.experiment_lock import ExperimentInUseError
from tests.runner._driver_script import make_tuner, slow_counter
from tests.runner.test_resume import _start_driver, _wait_for_results


def test_a_second_driver_is_refused_until_the_first_dies(tmp_path):
    storage = str(tmp_path / "store")
    proc = _start_driver(storage)
    try:
        _wait_for_results(storage, 3)
        path = os.path.join(storage, "killed")
        with pytest.raises(ExperimentInUseError, match=rf"pid {proc.pid} on host"):
            tune.Tuner.restore(path, trainable=slow_counter).fit()
        with pytest.raises(ExperimentInUseError, match=r"RunConfig\(name=\.\.\.\)"):
            make_tuner(storage).fit()  # a fresh fit with the same name
        assert proc.poll() is None  # the running driver was not disturbed
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    # Its lock died with it: a restore takes over and finishes every trial once.
    grid = tune.Tuner.restore(path, trainable=slow_counter).fit()
    assert len(grid) == 10 and grid.num_errors == 0
    assert sorted(os.listdir(storage)) == ["killed"]


def _one_report(config):
    tune.report({"score": config["x"]})


def test_a_fresh_fit_keeps_the_earlier_run_with_the_same_name_restorable(tmp_path):
    def tuner(xs):
        return tune.Tuner(
            _one_report,
            param_space={"x": tune.grid_search(xs)},
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="same", verbose=0),
        )

    first = tuner([1, 2]).fit()
    second = tuner([3]).fit()
    assert sorted(r.metrics["score"] for r in second) == [3]
    [moved] = [p for p in os.listdir(tmp_path) if p != "same"]
    assert moved.startswith("same_")
    earlier = os.path.join(tmp_path, moved)
    assert tune.Tuner.can_restore(earlier)
    restored = tune.Tuner.restore(earlier, trainable=_one_report).get_results()
    assert (
        sorted(r.metrics["score"] for r in restored)
        == [1, 2]
        == sorted(r.metrics["score"] for r in first)
    )


def test_fit_twice_on_one_tuner_keeps_the_first_run(tmp_path):
    tuner = tune.Tuner(
        _one_report,
        param_space={"x": tune.grid_search([5])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="twice", verbose=0),
    )
    tuner.fit()
    tuner.fit()
    assert len(os.listdir(tmp_path)) == 2  # "twice" and the first run beside it
