"""Checkpoints as Ray Tune 2.60 makes them: asked for by a callback, flagged in results
(``should_checkpoint``), readable as a plain ``mkdir`` leaves them."""

from __future__ import annotations

import json
import os
import stat
import time

import fasttune as tune
from fasttune.logger import NoopLogger
from fasttune.result import SHOULD_CHECKPOINT


class Stepper(tune.Trainable):
    """Iterations of 30 ms: longer than the lookahead bound, so each waits for the
    driver's answer, as a real training step would."""

    def setup(self, config):
        self.n = 0

    def step(self):
        time.sleep(0.03)
        self.n += 1
        return {"n": self.n}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n.json"), "w") as f:
            json.dump({"n": self.n}, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n.json")) as f:
            self.n = json.load(f)["n"]


class AskAt(tune.Callback):
    """Asks for a checkpoint in the results of the given iterations, as Ray's
    custom_checkpointing_with_callback example does."""

    def __init__(self, *iterations):
        self.iterations = set(iterations)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result["training_iteration"] in self.iterations:
            result[SHOULD_CHECKPOINT] = True


def _standalone(logdir):
    """A Stepper outside any run, logging into ``logdir``."""
    os.makedirs(logdir, exist_ok=True)
    return Stepper(config={}, logger_creator=lambda config: NoopLogger(config, str(logdir)))


def _checkpoints(result):
    names = sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_"))
    saved_n = []
    for name in names:
        with open(os.path.join(result.path, name, "n.json")) as f:
            saved_n.append(json.load(f)["n"])
    return names, saved_n


def test_a_callback_asks_for_a_checkpoint_and_gets_it_at_that_iteration(run_config):
    grid = tune.Tuner(
        Stepper,
        run_config=run_config(stop={"training_iteration": 8}, callbacks=[AskAt(2, 5)]),
    ).fit()
    result = grid[0]
    names, saved_n = _checkpoints(result)
    # each holds the state of the iteration that asked, registered with that iteration's
    # metrics; the last one is checkpoint_at_end's (a class trainable's folders are
    # named by iteration: README, differences from Ray)
    assert names == ["checkpoint_000002", "checkpoint_000005", "checkpoint_000008"]
    assert saved_n == [2, 5, 8]
    assert [m["training_iteration"] for _, m in result.best_checkpoints] == [2, 5, 8]
    assert result.metrics["training_iteration"] == 8


def test_a_requested_checkpoint_restores_the_trial(run_config, tmp_path):
    grid = tune.Tuner(
        Stepper,
        run_config=run_config(stop={"training_iteration": 4}, callbacks=[AskAt(3)]),
    ).fit()
    checkpoint, metrics = grid[0].best_checkpoints[0]  # the one asked for, then the end's
    assert os.path.basename(checkpoint.path) == "checkpoint_000003"
    assert metrics["training_iteration"] == 3
    restored = _standalone(tmp_path / "standalone")
    restored.restore(checkpoint)
    assert restored.n == 3 and restored.iteration == 3


def test_class_checkpoints_go_on_after_a_restore(run_config, tmp_path):
    grid = tune.Tuner(
        Stepper,
        run_config=run_config(
            stop={"training_iteration": 6},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=3),
        ),
    ).fit()
    names, saved_n = _checkpoints(grid[0])
    assert names == ["checkpoint_000003", "checkpoint_000006"]
    assert saved_n == [3, 6]

    restored = _standalone(tmp_path / "standalone")
    restored.restore(grid[0].checkpoint)
    for _ in range(2):
        restored.train()
    # the next one is numbered after the checkpoint it restored, never over it
    assert os.path.basename(restored.save()) == "checkpoint_000008"


def _report_twice_with_one_checkpoint(config):
    import tempfile

    tune.report({"score": 1})
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "w"), "w") as f:
            f.write("1")
        tune.report({"score": 2}, checkpoint=tune.Checkpoint.from_directory(d))


class Seen(tune.Callback):
    def __init__(self):
        self.flags = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.flags.append(result.get(SHOULD_CHECKPOINT, "absent"))


def test_a_function_result_that_carries_a_checkpoint_says_so(run_config):
    seen = Seen()
    grid = tune.Tuner(
        _report_twice_with_one_checkpoint, run_config=run_config(callbacks=[seen])
    ).fit()
    result = grid[0]
    assert seen.flags == ["absent", True]  # as Ray's function trainable marks them
    with open(os.path.join(result.path, "result.json")) as f:
        lines = [json.loads(line) for line in f]
    assert [line.get(SHOULD_CHECKPOINT, "absent") for line in lines] == ["absent", True]
    assert result.metrics[SHOULD_CHECKPOINT] is True
    # the flag asks for nothing more: one checkpoint, the one reported
    names = sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_"))
    assert names == ["checkpoint_000000"]


def test_checkpoint_folders_get_the_permissions_mkdir_gives(run_config):
    old = os.umask(0o022)
    try:
        grid = tune.Tuner(
            Stepper,
            run_config=run_config(stop={"training_iteration": 2}, callbacks=[AskAt(1)]),
        ).fit()
        function_grid = tune.Tuner(
            _report_twice_with_one_checkpoint, run_config=run_config(name="functions")
        ).fit()
    finally:
        os.umask(old)
    for result in (grid[0], function_grid[0]):
        folder = result.checkpoint.path
        # 0700 was mkdtemp's, kept by the folder: others sharing the results could not read it
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o755, folder
