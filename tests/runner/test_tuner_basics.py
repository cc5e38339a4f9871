"""Tuner.fit end to end with real worker processes and real files."""

from __future__ import annotations

import json
import os
import time

import pytest

import fasttune as tune
from tests.processes import gone
from tests.runner._stoppers import StopAllAfter


def quadratic(config):
    for step in range(config.get("steps", 3)):
        tune.report({"loss": (config["x"] - 3) ** 2 + step, "step": step})


class Counter(tune.Trainable):
    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {"n": self.n, "done": self.n >= self.config.get("limit", 3)}

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]


def test_grid_search_function_trainable(run_config):
    grid = tune.Tuner(
        quadratic,
        param_space={"x": tune.grid_search([1, 3, 5])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=run_config(),
    ).fit()
    assert len(grid) == 3 and grid.num_errors == 0 and grid.num_terminated == 3
    best = grid.get_best_result()
    assert best.config["x"] == 3
    assert best.metrics["loss"] == 2 and best.metrics["training_iteration"] == 3
    assert best.metrics["experiment_tag"].startswith("1_x=3")
    assert os.path.exists(os.path.join(best.path, "result.json"))
    lines = [json.loads(line) for line in open(os.path.join(best.path, "result.json"))]
    assert [line["step"] for line in lines] == [0, 1, 2]
    assert os.path.exists(os.path.join(best.path, "progress.csv"))
    assert json.load(open(os.path.join(best.path, "params.json"))) == {"x": 3}
    df = grid.get_dataframe()
    assert sorted(df["config/x"]) == [1, 3, 5]


def test_class_trainable_checkpoints_at_end_and_num_samples(run_config):
    grid = tune.Tuner(
        Counter,
        param_space={"limit": tune.randint(2, 5)},
        tune_config=tune.TuneConfig(num_samples=4, seed=1),
        run_config=run_config(),
    ).fit()
    assert len(grid) == 4
    for result in grid:
        assert result.metrics["n"] == result.config["limit"]
        assert result.checkpoint is not None  # class trainables save at the end
        assert (
            os.path.basename(result.checkpoint.path) == f"checkpoint_{result.config['limit']:06d}"
        )


def test_stop_dict_and_callable(run_config):
    def forever(config):
        i = 0
        while True:
            i += 1
            tune.report({"i": i})

    grid = tune.Tuner(forever, run_config=run_config(stop={"i": 7})).fit()
    assert grid[0].metrics["i"] == 7 and grid[0].metrics["done"] is True

    grid = tune.Tuner(
        forever, run_config=run_config(name="exp2", stop=lambda trial_id, result: result["i"] >= 4)
    ).fit()
    assert grid[0].metrics["i"] == 4


def test_stopper_object_and_stop_all(run_config):
    def forever(config):
        while True:
            tune.report({"x": 1})

    grid = tune.Tuner(
        forever,
        tune_config=tune.TuneConfig(num_samples=3),
        run_config=run_config(stop=StopAllAfter(5)),
    ).fit()
    assert grid.num_terminated == 3 and grid.num_errors == 0
    # stop_all() ends the experiment at the result that made it say so, as on Ray Tune:
    # what the fast trials ran past it (their lookahead) is neither kept nor written.
    assert sum(r.metrics.get("training_iteration", 0) for r in grid) == 5
    assert not [r for r in grid if r.metrics.get("done")]
    lines = [
        line
        for r in grid
        if os.path.exists(os.path.join(r.path, "result.json"))
        for line in open(os.path.join(r.path, "result.json"))
    ]
    assert len(lines) == 5


def test_register_trainable_by_name(run_config):
    tune.register_trainable("quad_by_name", quadratic)
    grid = tune.Tuner("quad_by_name", param_space={"x": 3}, run_config=run_config()).fit()
    assert grid[0].metrics["loss"] == 2
    assert os.path.basename(grid[0].path).startswith("quad_by_name_")


def test_trial_name_and_dirname_creators(run_config):
    grid = tune.Tuner(
        quadratic,
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(
            trial_name_creator=lambda t: f"q_{t.config['x']}",
            trial_dirname_creator=lambda t: f"dir_{t.config['x']}",
        ),
        run_config=run_config(),
    ).fit()
    assert sorted(os.path.basename(r.path) for r in grid) == ["dir_1", "dir_2"]


def test_get_results_and_can_restore(run_config, tmp_path):
    tuner = tune.Tuner(quadratic, param_space={"x": 1}, run_config=run_config())
    with pytest.raises(RuntimeError, match="fit"):
        tuner.get_results()
    grid = tuner.fit()
    assert tuner.get_results() is grid
    path = grid.experiment_path
    assert tune.Tuner.can_restore(path)
    assert not tune.Tuner.can_restore(str(tmp_path / "nothing"))
    restored = tune.Tuner.restore(path, trainable=quadratic)
    assert restored.get_results()[0].metrics["loss"] == 6


def test_a_constructed_tuner_can_be_restored_before_fit(tmp_path, caplog):
    """As Ray Tune: tuner.pkl is written when the Tuner is built, so a script killed
    between Tuner(...) and fit() leaves an experiment that restore runs in full."""
    config = tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0)
    space = {"x": tune.grid_search([1, 2])}
    tune.Tuner(quadratic, param_space=space, run_config=config)
    path = str(tmp_path / "exp")
    assert tune.Tuner.can_restore(path)
    grid = tune.Tuner.restore(path, trainable=quadratic).fit()
    assert sorted(r.config["x"] for r in grid) == [1, 2] and not grid.errors

    # A folder that holds results keeps its tuner.pkl when another Tuner is built on
    # it; that Tuner's fit() moves the earlier run aside, as before.
    saved = open(os.path.join(path, "tuner.pkl"), "rb").read()
    later = tune.Tuner(quadratic, param_space={"x": 5}, run_config=config)
    assert open(os.path.join(path, "tuner.pkl"), "rb").read() == saved
    later.fit()
    assert [n for n in os.listdir(tmp_path) if n.startswith("exp_")]

    # An unnamed Tuner is named once: fit() runs in the folder written on construction,
    # without taking its own tuner.pkl for an earlier run.
    caplog.clear()
    unnamed = tune.Tuner(
        quadratic,
        param_space={"x": 3},
        run_config=tune.RunConfig(storage_path=str(tmp_path / "unnamed"), verbose=0),
    )
    (name,) = os.listdir(tmp_path / "unnamed")
    assert tune.Tuner.can_restore(str(tmp_path / "unnamed" / name))
    assert unnamed.fit().experiment_path == str(tmp_path / "unnamed" / name)
    assert os.listdir(tmp_path / "unnamed") == [name]
    assert "earlier run" not in caplog.text


def test_classic_run_api(run_config, tmp_path):
    analysis = tune.run(
        quadratic,
        config={"x": tune.grid_search([2, 3])},
        metric="loss",
        mode="min",
        storage_path=str(tmp_path / "classic"),
        name="run",
        verbose=0,
        resources_per_trial={"cpu": 1},
    )
    assert isinstance(analysis, tune.ExperimentAnalysis)
    assert analysis.best_config == {"x": 3}
    assert len(analysis.dataframe()) == 2


def test_callbacks_see_every_hook(run_config):
    class Recorder(tune.Callback):
        def __init__(self):
            self.events = []

        def on_trial_start(self, iteration, trials, trial, **info):
            self.events.append(("start", trial.trial_id))

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.events.append(("result", result["training_iteration"]))

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.events.append(("complete", trial.trial_id))

        def on_experiment_end(self, trials, **info):
            self.events.append(("end", len(trials)))

    recorder = Recorder()
    tune.Tuner(quadratic, param_space={"x": 1}, run_config=run_config(callbacks=[recorder])).fit()
    kinds = [e[0] for e in recorder.events]
    assert kinds == ["start", "result", "result", "result", "complete", "end"]


def test_default_logger_callbacks_can_be_disabled(run_config, monkeypatch):
    monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    grid = tune.Tuner(quadratic, param_space={"x": 1}, run_config=run_config()).fit()
    assert not os.path.exists(os.path.join(grid[0].path, "result.json"))
    assert grid[0].metrics["loss"] == 6


def test_checkpoint_config_keeps_best(run_config):
    def reporting(config):
        import tempfile

        for i, score in enumerate([5, 9, 1, 7, 3]):
            d = tempfile.mkdtemp()
            open(os.path.join(d, "i"), "w").write(str(i))
            tune.report({"score": score}, checkpoint=tune.Checkpoint.from_directory(d))

    grid = tune.Tuner(
        reporting,
        run_config=run_config(
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="score", checkpoint_score_order="max"
            )
        ),
    ).fit()
    result = grid[0]
    kept = sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_"))
    # the two best (9 at #1, 7 at #3) plus the latest (#4)
    assert kept == ["checkpoint_000001", "checkpoint_000003", "checkpoint_000004"]
    assert [m["score"] for _, m in result.best_checkpoints] == [7, 9]  # best last, as Ray
    assert os.path.basename(result.checkpoint.path) == "checkpoint_000004"


def test_checkpoint_frequency_is_exact_whatever_the_lookahead(run_config):
    class Slowish(Counter):
        def step(self):
            self.n += 1
            return {"n": self.n}

    grid = tune.Tuner(
        Slowish,
        run_config=run_config(
            stop={"n": 10},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=3),
        ),
    ).fit()
    result = grid[0]
    assert result.metrics["n"] == 10 and result.metrics["training_iteration"] == 10
    names = sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_"))
    # every 3rd iteration, plus the final one (checkpoint_at_end), nothing past iteration 10
    assert names == [
        "checkpoint_000003", "checkpoint_000006", "checkpoint_000009", "checkpoint_000010"
    ]  # fmt: skip
    assert [m["n"] for _, m in result.best_checkpoints] == [3, 6, 9, 10]


def _workers(timeout: float = 0.0) -> set[int]:
    """Pids of worker processes (children of this process's fork server), waiting up
    to ``timeout`` s for one to appear."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        pids = {w.pid for server in psutil.Process().children() for w in server.children()}
        if pids or time.monotonic() >= deadline:
            return pids
        time.sleep(0.02)


_BUILT_THEN_FIT = """
import sys, tempfile, psutil, fasttune as tune
tune.init(num_cpus=2)
tuner = tune.Tuner(lambda config: tune.report({"x": 1}),
                   run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0))
print(len(psutil.Process().children()), flush=True)  # the fork server, started by Tuner()
grid = tuner.fit()
print(grid[0].metrics["x"])
"""


def test_a_tuner_starts_its_workers_fork_server_when_built():
    # The fork server's start (an interpreter importing the worker side) overlaps the
    # Tuner's own set-up, before fit().
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _BUILT_THEN_FIT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]


def test_a_tuner_never_fit_leaves_no_worker(run_config):
    import gc

    tuner = tune.Tuner(lambda config: tune.report({"x": 1}), run_config=run_config())
    spare = _workers(timeout=10)
    assert spare
    del tuner
    gc.collect()
    assert all(gone(pid, timeout=10) for pid in spare)


def test_a_tuner_built_before_init_address_runs_where_fit_is_told(run_config, monkeypatch):
    # Built for local workers, then told (before fit) to run inline: the warm local
    # executor is shut down, and the run goes where fit() is told.
    tuner = tune.Tuner(lambda config: tune.report({"pid": os.getpid()}), run_config=run_config())
    spare = _workers(timeout=10)
    monkeypatch.setenv("FASTTUNE_EXECUTOR", "inline")
    grid = tuner.fit()
    assert grid[0].metrics["pid"] == os.getpid()
    assert all(gone(pid, timeout=10) for pid in spare)


def test_a_built_tuner_can_still_be_pickled(run_config):
    # e.g. to run it in a Ray task; the executor it started stays with the original.
    import cloudpickle

    tuner = tune.Tuner(lambda config: tune.report({"x": 1}), run_config=run_config())
    copy = cloudpickle.loads(cloudpickle.dumps(tuner))
    assert copy.fit()[0].metrics["x"] == 1
