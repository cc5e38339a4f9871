"""HyperBand end to end: real worker processes pause, resume from checkpoints, restore.

max_t=9, eta=3 (see test_hyperband.py): bracket s=0 takes the first 3 trials and
runs them to 9; bracket s=1 takes the next 5, halves at 3 keeping ceil(5/3) = 2,
which run to 9. With ``score = x`` and mode max, of x = 3..7 the trials x = 6, 7 go
on and x = 3, 4, 5 end at iteration 3.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from typing import Any

import pytest

import fasttune as tune
from fasttune.schedulers.hb_bohb import HyperBandForBOHB
from fasttune.schedulers.hyperband import HyperBandScheduler

FINAL = {0: 9, 1: 9, 2: 9, 3: 3, 4: 3, 5: 3, 6: 9, 7: 9}


@pytest.fixture(autouse=True)
def _two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


@pytest.fixture
def run_config(tmp_path):
    def make(**kwargs: Any) -> tune.RunConfig:
        kwargs.setdefault("storage_path", str(tmp_path / "results"))
        kwargs.setdefault("name", "exp")
        kwargs.setdefault("verbose", 0)
        return tune.RunConfig(**kwargs)

    return make


class Counter(tune.Trainable):
    """Counts its steps; the count lives in its checkpoints."""

    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {"n": self.n, "score": self.config["x"]}

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]


def counting(config):
    """The function version: reports a checkpoint each step and resumes from it."""
    n = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "n.json")) as f:
            n = json.load(f)
    while True:
        n += 1
        directory = tempfile.mkdtemp()
        with open(os.path.join(directory, "n.json"), "w") as f:
            json.dump(n, f)
        tune.report(
            {"n": n, "score": config["x"]}, checkpoint=tune.Checkpoint.from_directory(directory)
        )


def lines_of(result) -> list[dict]:
    with open(os.path.join(result.path, "result.json")) as f:
        return [json.loads(line) for line in f]


def hyperband_tuner(trainable, run_config, **run_kwargs) -> tune.Tuner:
    return tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search(list(range(8)))},
        tune_config=tune.TuneConfig(
            metric="score",
            mode="max",
            scheduler=HyperBandScheduler(max_t=9, reduction_factor=3),
        ),
        run_config=run_config(**run_kwargs),
    )


def check_final_iterations(grid) -> dict[int, list[dict]]:
    assert len(grid) == 8 and grid.num_errors == 0 and grid.num_terminated == 8
    lines = {r.config["x"]: lines_of(r) for r in grid}
    assert {x: ls[-1]["training_iteration"] for x, ls in lines.items()} == FINAL
    for x, ls in lines.items():
        iterations = [line["training_iteration"] for line in ls]
        assert iterations == sorted(set(iterations)), (x, iterations)  # nothing re-run
        # The trainable's own count went on from its checkpoints.
        assert all(line["n"] == line["training_iteration"] for line in ls), x
    return lines


@pytest.mark.parametrize("trainable", [Counter, counting], ids=["class", "function"])
def test_promoted_trials_resume_from_their_checkpoints(trainable, run_config):
    grid = hyperband_tuner(trainable, run_config).fit()
    lines = check_final_iterations(grid)
    for x, ls in lines.items():
        assert [line["training_iteration"] for line in ls] == list(range(1, FINAL[x] + 1))
    # Of the two promoted trials at least one waited, paused, at 3 (only the last to
    # arrive goes straight on): it was restored from a checkpoint and went on at 4.
    resumed = [x for x in (6, 7) if lines[x][3]["iterations_since_restore"] == 1]
    assert resumed
    if trainable is Counter:
        by_x = {r.config["x"]: r for r in grid}
        for x in resumed:
            assert os.path.isdir(os.path.join(by_x[x].path, "checkpoint_000003"))


class InterruptAtTheMilestone(tune.Callback):
    """Sends Ctrl-C once, when a second bracket s=1 trial reaches its milestone (3)."""

    def __init__(self, marker: str):
        self.marker = marker
        self.arrived = 0

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result["score"] >= 3 and result["training_iteration"] == 3:
            self.arrived += 1
            if self.arrived == 2 and not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os.kill(os.getpid(), signal.SIGINT)


def test_scheduler_state_survives_tuner_restore(run_config, tmp_path):
    marker = str(tmp_path / "interrupted")
    first = hyperband_tuner(
        Counter,
        run_config,
        callbacks=[InterruptAtTheMilestone(marker)],
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
    ).fit()
    assert os.path.exists(marker) and first.num_terminated < 8
    grid = tune.Tuner.restore(first.experiment_path, trainable=Counter).fit()
    # Trials that waited at the milestone were not run again (a fresh scheduler would
    # run them on from their checkpoints), and the halving kept the same two.
    check_final_iterations(grid)


def test_missing_metric_fails_before_any_trial_runs(run_config):
    tuner = tune.Tuner(
        Counter,
        param_space={"x": 1},
        tune_config=tune.TuneConfig(scheduler=HyperBandScheduler()),
        run_config=run_config(),
    )
    with pytest.raises(ValueError, match="HyperBandScheduler has no `metric`"):
        tuner.fit()


def test_hb_bohb_halves_a_bracket_that_never_fills(run_config):
    # HyperBandForBOHB opens bracket s=2 first (n0 = 9, r0 = 1; see test_hb_bohb.py):
    # four trials never fill it, so it is halved when nothing runs: at 1 keep
    # ceil(9/3) = 3 (x = 1..3), then at 3 keep ceil(3/3) = 1 (x = 3), which ends at 9.
    grid = tune.Tuner(
        Counter,
        param_space={"x": tune.grid_search([0, 1, 2, 3])},
        tune_config=tune.TuneConfig(
            metric="score",
            mode="max",
            scheduler=HyperBandForBOHB(max_t=9, reduction_factor=3),
        ),
        run_config=run_config(),
    ).fit()
    assert grid.num_terminated == 4
    final = {r.config["x"]: r.metrics["training_iteration"] for r in grid}
    assert final == {0: 1, 1: 3, 2: 3, 3: 9}
