"""Scheduler decisions reach the trials: PAUSE resumes from a checkpoint, STOP ends early."""

from __future__ import annotations

import json
import os
import shutil

import pytest

import fasttune as tune
from fasttune.schedulers import FIFOScheduler, TrialScheduler
from tests.runner._faults import killed_once


class Counter(tune.Trainable):
    def setup(self, config):
        self.n = 0
        self.pid_log = []

    def step(self):
        self.n += 1
        return {"n": self.n, "pid": os.getpid(), "done": self.n >= 6}

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]


class PauseOnceAtTwo(FIFOScheduler):
    """Pauses every trial once at n == 2; FIFO resumes paused trials later."""

    _supports_buffered_results = False  # needs a decision after every result

    def __init__(self):
        super().__init__()
        self.paused: set[str] = set()
        self.decisions: list[tuple[str, int, str]] = []

    def on_trial_result(self, tune_controller, trial, result):
        decision = TrialScheduler.CONTINUE
        if result["n"] == 2 and trial.trial_id not in self.paused:
            self.paused.add(trial.trial_id)
            decision = TrialScheduler.PAUSE
        self.decisions.append((trial.trial_id, result["n"], decision))
        return decision


def test_pause_then_resume_from_checkpoint(run_config):
    scheduler = PauseOnceAtTwo()
    grid = tune.Tuner(
        Counter,
        tune_config=tune.TuneConfig(num_samples=3, scheduler=scheduler),
        run_config=run_config(),
    ).fit()
    assert grid.num_terminated == 3
    for result in grid:
        assert result.metrics["n"] == 6 and result.metrics["training_iteration"] == 6
        # Each trial was paused at n == 2 and continued at n == 3 after a restore; the
        # done result (n == 6) ends the trial without asking the scheduler, as on Ray.
        ns = [n for tid, n, _ in scheduler.decisions if tid == result.metrics["trial_id"]]
        assert ns == [1, 2, 3, 4, 5]
        assert os.path.isdir(os.path.join(result.path, "checkpoint_000002"))


class DiesInItsFirstPause(Counter):
    def save_checkpoint(self, checkpoint_dir):
        killed_once(self.config["marker_dir"], self.trial_id)
        return super().save_checkpoint(checkpoint_dir)


class PauseOnceAtTwoNotingStarts(PauseOnceAtTwo):
    def __init__(self):
        super().__init__()
        self.chosen: list[tuple[str, str]] = []  # (trial id, status it was started from)

    def choose_trial_to_run(self, tune_controller):
        trial = super().choose_trial_to_run(tune_controller)
        if trial is not None:
            self.chosen.append((trial.trial_id, str(trial.status)))
        return trial


@pytest.mark.parametrize("max_failures", [1, 0])
def test_a_worker_killed_while_pausing_is_retried_as_paused(run_config, tmp_path, max_failures):
    """A retry leaves the trial as the pause would have (PAUSED, from its latest
    checkpoint: none here), so the scheduler that paused it decides when it goes on;
    without retries left it errors."""
    scheduler = PauseOnceAtTwoNotingStarts()
    grid = tune.Tuner(
        DiesInItsFirstPause,
        param_space={"marker_dir": str(tmp_path)},
        tune_config=tune.TuneConfig(num_samples=2, scheduler=scheduler),
        run_config=run_config(failure_config=tune.FailureConfig(max_failures=max_failures)),
    ).fit()
    if not max_failures:
        assert grid.num_errors == 2
        return
    assert grid.num_errors == 0 and grid.num_terminated == 2
    for result in grid:
        trial_id = result.metrics["trial_id"]
        assert [status for tid, status in scheduler.chosen if tid == trial_id] == [
            "PENDING",
            "PAUSED",
        ]
        # Killed in the pause's save at n == 2: no checkpoint, so from scratch.
        ns = [n for tid, n, _ in scheduler.decisions if tid == trial_id]
        assert ns == [1, 2, 1, 2, 3, 4, 5]
        lines = [json.loads(line) for line in open(os.path.join(result.path, "result.json"))]
        assert [line["n"] for line in lines] == [1, 2, 3, 4, 5, 6]
        assert "Failure # 1" in open(os.path.join(result.path, "error.txt")).read()


class StopBelow(FIFOScheduler):
    _supports_buffered_results = False

    def on_trial_result(self, tune_controller, trial, result):
        if result["n"] >= 2 and trial.config["x"] < 0.5:
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE


def test_scheduler_stop_is_applied_with_no_lookahead(run_config):
    grid = tune.Tuner(
        Counter,
        param_space={"x": tune.grid_search([0.1, 0.9])},
        tune_config=tune.TuneConfig(scheduler=StopBelow()),
        run_config=run_config(checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False)),
    ).fit()
    by_x = {r.config["x"]: r for r in grid}
    assert by_x[0.1].metrics["n"] == 2 and by_x[0.1].metrics["done"] is True
    assert by_x[0.9].metrics["n"] == 6
    # No result past the stop decision was written.
    lines = open(os.path.join(by_x[0.1].path, "result.json")).read().splitlines()
    assert len(lines) == 2


class Tracking(tune.Trainable):
    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {
            "n": self.n,
            "x": self.config["x"],
            "cpus": self.trial_resources.required_resources.get("CPU"),
            "done": self.n >= 6,
        }

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]

    def reset_config(self, new_config):
        return True


class ExploitOnce(FIFOScheduler):
    _supports_buffered_results = False

    def __init__(self):
        super().__init__()
        self.done = False

    def on_trial_result(self, tune_controller, trial, result):
        if trial.config["x"] == 2 and result["n"] == 3 and not self.done:
            donor = next(t for t in tune_controller.get_trials() if t.config["x"] == 1)
            if donor.checkpoint is not None:
                self.done = True
                tune_controller.exploit_trial(trial, donor.checkpoint, {"x": 10}, "exploited")
        return TrialScheduler.CONTINUE


def test_exploit_restarts_from_another_trials_checkpoint(run_config):
    scheduler = ExploitOnce()
    grid = tune.Tuner(
        Tracking,
        param_space={"x": tune.grid_search([1, 2])},
        # One at a time: the donor (x=1) finishes at n == 6 before x=2 starts.
        tune_config=tune.TuneConfig(scheduler=scheduler, max_concurrent_trials=1),
        run_config=run_config(checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1)),
    ).fit()
    assert scheduler.done
    exploited = next(r for r in grid if r.config["x"] == 10)
    lines = [json.loads(line) for line in open(os.path.join(exploited.path, "result.json"))]
    # Three steps of its own, then one from the donor's final state (n == 6): done.
    assert [line["x"] for line in lines] == [2, 2, 2, 10]
    assert [line["n"] for line in lines] == [1, 2, 3, 7]
    assert exploited.metrics["experiment_tag"] == "exploited"


class ExploitDeletedCheckpoint(FIFOScheduler):
    """Exploits the donor's oldest checkpoint and deletes it at once: the donor's
    num_to_keep does that when the donor saves newer ones before the trial pauses."""

    _supports_buffered_results = False

    def on_trial_result(self, tune_controller, trial, result):
        if trial.config["x"] == 2 and result["n"] == 3:
            donor = next(t for t in tune_controller.get_trials() if t.config["x"] == 1)
            names = sorted(n for n in os.listdir(donor.local_path) if n.startswith("checkpoint_"))
            oldest = os.path.join(donor.local_path, names[0])
            checkpoint = tune.Checkpoint.from_directory(oldest)
            shutil.rmtree(oldest)
            tune_controller.exploit_trial(trial, checkpoint, {"x": 10}, "exploited")
        return TrialScheduler.CONTINUE


def test_an_exploit_whose_checkpoint_was_deleted_meanwhile_takes_the_donors_newest(run_config):
    """It used to end the whole run with FileNotFoundError."""
    grid = tune.Tuner(
        Tracking,
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(scheduler=ExploitDeletedCheckpoint(), max_concurrent_trials=1),
        run_config=run_config(checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1)),
    ).fit()
    exploited = next(r for r in grid if r.config["x"] == 10)
    lines = [json.loads(line) for line in open(os.path.join(exploited.path, "result.json"))]
    assert [line["n"] for line in lines] == [1, 2, 3, 7]  # from the donor's newest (n == 6)
    assert not grid.errors


class DiesWhenExploited(Tracking):
    def cleanup(self):
        if self.config["x"] == 2 and self.n == 3:  # stopped by the exploit's pause
            killed_once(self.config["marker_dir"], "exploited")


def test_a_worker_killed_while_paused_for_an_exploit_still_gets_it(run_config, tmp_path):
    scheduler = ExploitOnce()
    grid = tune.Tuner(
        DiesWhenExploited,
        param_space={"x": tune.grid_search([1, 2]), "marker_dir": str(tmp_path)},
        tune_config=tune.TuneConfig(
            scheduler=scheduler, max_concurrent_trials=1, reuse_actors=False
        ),
        run_config=run_config(
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    ).fit()
    assert scheduler.done and grid.num_errors == 0
    assert os.path.exists(os.path.join(tmp_path, "exploited"))  # it was killed
    exploited = next(r for r in grid if r.config["x"] == 10)
    lines = [json.loads(line) for line in open(os.path.join(exploited.path, "result.json"))]
    assert [line["x"] for line in lines] == [2, 2, 2, 10]
    assert [line["n"] for line in lines] == [1, 2, 3, 7]


class MoreCpus(FIFOScheduler):
    _supports_buffered_results = False

    def on_trial_result(self, tune_controller, trial, result):
        if result["n"] == 2 and result["cpus"] == 1:
            tune_controller.set_trial_resources(trial, {"cpu": 2})
        return TrialScheduler.CONTINUE


def test_set_trial_resources_restarts_with_the_new_resources(run_config):
    grid = tune.Tuner(
        Tracking,
        param_space={"x": 1},
        tune_config=tune.TuneConfig(scheduler=MoreCpus()),
        run_config=run_config(),
    ).fit()
    lines = [json.loads(line) for line in open(os.path.join(grid[0].path, "result.json"))]
    assert [line["cpus"] for line in lines] == [1, 1, 2, 2, 2, 2]
    assert [line["n"] for line in lines] == [1, 2, 3, 4, 5, 6]


def test_noop_hooks_are_marked_and_overrides_are_not():
    """The runner skips on_trial_result only where the plugin's method is the no-op."""
    from fasttune._support.noop_hooks import is_noop_hook

    class Listening(tune.schedulers.FIFOScheduler):
        def on_trial_result(self, tune_controller, trial, result):
            return self.CONTINUE

    assert is_noop_hook(tune.schedulers.FIFOScheduler(), "on_trial_result")
    assert is_noop_hook(tune.search.BasicVariantGenerator(), "on_trial_result")
    assert not is_noop_hook(Listening(), "on_trial_result")
    assert not is_noop_hook(tune.schedulers.ASHAScheduler(), "on_trial_result")
    patched = tune.schedulers.FIFOScheduler()
    patched.on_trial_result = lambda *a: "STOP"
    assert not is_noop_hook(patched, "on_trial_result")
