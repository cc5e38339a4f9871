"""Short trials queued behind running ones (controller._queue_successors): each starts
on the worker of the trial ahead the moment it stops; the run is the same otherwise."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

import fasttune as tune
from fasttune._internal.trial_queue import QUEUED_WORK_S, TrialQueues, depth_for
from fasttune.executors import LocalExecutor, TrialStopped
from fasttune.stopper import Stopper
from tests.runner import _short_trials_killed as short_killed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


class CountingExecutor(LocalExecutor):
    """The local executor, counting the trials that started behind another."""

    def __init__(self) -> None:
        super().__init__()
        self.handed_over = 0

    def poll(self, timeout):
        events = super().poll(timeout)
        self.handed_over += sum(
            1 for e in events if isinstance(e, TrialStopped) and e.successor is not None
        )
        return events


def _fit(trainable, trials: int, run_config, **tune_config):
    """Run ``trials`` trials (config ``i`` = 0, 1, ...) on a counting local executor."""
    executor = CountingExecutor()
    grid = tune.Tuner(
        trainable,
        param_space={"i": tune.grid_search(list(range(trials)))},
        tune_config=tune.TuneConfig(reuse_actors=True, **tune_config),
        run_config=run_config,
        _executor=executor,
    ).fit()
    return grid, executor


def short(config):
    start = time.monotonic()
    for step in range(3):
        tune.report({"i": config["i"], "step": step, "start": start, "pid": os.getpid()})


def test_short_trials_start_behind_running_ones(run_config):
    grid, executor = _fit(short, 80, run_config())
    assert len(grid) == 80 and not grid.errors
    assert all(r.metrics["training_iteration"] == 3 for r in grid)
    for result in grid:  # each trial's own files, whole
        with open(os.path.join(result.path, "result.json")) as f:
            lines = f.read().splitlines()
        assert [json.loads(line)["step"] for line in lines] == [0, 1, 2]
    # Most trials started where the trial ahead stopped, without a round trip.
    assert executor.handed_over >= 40
    assert len({r.metrics["pid"] for r in grid}) == 2  # on the two reused workers


def test_the_queue_behind_a_trial_holds_a_few_milliseconds_of_trials():
    assert depth_for(0.0004, 16) == math.ceil(QUEUED_WORK_S / 0.0004)
    assert depth_for(0.0, 16) == 16  # capped by the executor
    assert depth_for(QUEUED_WORK_S, 16) == 1
    assert depth_for(0.04, 16) == 1  # never less than one
    assert depth_for(0.0004, 2) == 2


def test_a_trials_run_time_counts_from_its_start_on_its_worker():
    # A run's first trials are launched while their workers' processes are starting:
    # the time from launch to start is not the trial's.
    now = [0.0]
    queues = TrialQueues(16, lifecycle=None, executor=None, clock=lambda: now[0])
    queues.launched("first", allocation=None)
    now[0] = 0.050  # the worker starts it
    queues.started("first")
    now[0] = 0.0505
    queues.left("first")
    assert queues.average_run_s == pytest.approx(0.0005)
    queues.launched("queued", allocation=None)  # taken over where "first" stopped
    now[0] = 0.0515
    queues.left("queued")
    assert 0.0005 < queues.average_run_s < 0.001  # a moving average of the two


def test_trials_of_a_fraction_of_a_millisecond_queue_deeper_than_two(run_config):
    class DeepestQueue(CountingExecutor):
        deepest = 0

        def queue_trial(self, after_trial_id, launch):
            queued = super().queue_trial(after_trial_id, launch)
            if queued:
                behind = sum(1 for w in self._queued.values() if w is self._trials[after_trial_id])
                self.deepest = max(self.deepest, behind)
            return queued

    executor = DeepestQueue()
    grid = tune.Tuner(
        lambda config: tune.report({"i": config["i"]}),
        param_space={"i": tune.grid_search(list(range(300)))},
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=run_config(),
        _executor=executor,
    ).fit()
    assert len(grid) == 300 and not grid.errors
    assert executor.deepest > 2


def test_trials_queued_behind_one_that_runs_long_run_elsewhere_meanwhile(run_config):
    def one_is_slow(config):
        start = time.monotonic()
        if config["i"] == 12:
            time.sleep(4.0)
        tune.report({"i": config["i"], "start": start, "end": time.monotonic()})

    grid, executor = _fit(one_is_slow, 40, run_config())
    assert not grid.errors and executor.handed_over > 0
    slow = next(r for r in grid if r.config["i"] == 12)
    # Those queued behind the slow trial were asked back and ran on the other worker:
    # every trial started long before the slow one ended.
    late = [r.config["i"] for r in grid if r.metrics["start"] > slow.metrics["end"] - 2.5]
    assert late == []


def test_a_failing_short_trial_leaves_those_queued_behind_it_to_run(run_config):
    def sometimes_fails(config):
        if config["i"] % 7 == 3:
            raise ValueError(f"trial {config['i']} fails")
        for step in range(3):
            tune.report({"i": config["i"], "step": step})

    grid, executor = _fit(sometimes_fails, 60, run_config())
    failed = sorted(r.config["i"] for r in grid if r.error is not None)
    assert failed == [i for i in range(60) if i % 7 == 3]
    ran = [r for r in grid if r.error is None]
    assert len(ran) == 60 - len(failed)
    assert all(r.metrics["training_iteration"] == 3 for r in ran)
    assert executor.handed_over > 0


class StopAllAfter(Stopper):
    """Ends the whole run once ``n`` results have come in."""

    def __init__(self, n: int):
        self.n, self.seen = n, 0

    def __call__(self, trial_id, result):
        self.seen += 1
        return False

    def stop_all(self):
        return self.seen >= self.n


def test_a_run_stopped_while_trials_are_queued_ends_every_trial(run_config):
    grid, executor = _fit(short, 400, run_config(stop=StopAllAfter(150)))
    ran = [r for r in grid if r.metrics.get("training_iteration")]
    assert 50 <= len(ran) < 400  # trials ran, then the stop came
    assert executor.handed_over > 0
    # Every trial created ended (none is left waiting, queued or running), on disk too.
    analysis = tune.ExperimentAnalysis(grid.experiment_path)
    assert len(analysis.trials) == len(grid)
    assert {t.status for t in analysis.trials} == {"TERMINATED"}


def test_a_time_budget_ends_a_run_of_queued_trials(run_config):
    started = time.monotonic()
    grid, executor = _fit(short, 100_000, run_config(), time_budget_s=2)
    assert time.monotonic() - started < 60
    assert executor.handed_over > 0
    ran = [r for r in grid if r.metrics.get("training_iteration") == 3]
    assert len(ran) >= 20
    assert not [r for r in grid if r.error is not None]


@pytest.mark.parametrize("after_trials", [50, 400, 1000])
def test_a_driver_killed_while_trials_are_queued_restores_every_trial_whole(tmp_path, after_trials):
    # Trials start behind others before the driver journals them RUNNING: killed in
    # between, such a trial is PENDING on disk with files of its own, which the
    # restored run must cut back (not append to) when it runs it again.
    storage = str(tmp_path / "store")
    path = os.path.join(storage, "short")
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.runner._short_trials_killed", storage],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while _trial_folders(path) < after_trials:
            assert driver.poll() is None, "the driver ended before it was killed"
            assert time.monotonic() < deadline
            time.sleep(0.005)
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait()
    grid = tune.Tuner.restore(path, trainable=short_killed.short).fit()
    assert len(grid) == short_killed.TRIALS and not grid.errors
    assert sorted(r.config["i"] for r in grid) == list(range(short_killed.TRIALS))
    for result in grid:
        with open(os.path.join(result.path, "result.json")) as f:
            lines = [json.loads(line) for line in f.read().splitlines()]
        assert [line["step"] for line in lines] == list(range(short_killed.REPORTS)), result.path
        assert [line["training_iteration"] for line in lines] == [1, 2, 3, 4, 5]


def _trial_folders(path: str) -> int:
    try:
        return sum(1 for entry in os.scandir(path) if entry.is_dir())
    except FileNotFoundError:
        return 0
