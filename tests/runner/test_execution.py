"""Resources, concurrency, actor reuse, working directories and time budgets."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import fasttune as tune


def sleeper(config):
    start = time.time()
    time.sleep(config["sleep"])
    tune.report({"start": start, "end": time.time(), "pid": os.getpid()})


def _max_overlap(results) -> int:
    events = []
    for r in results:
        events += [(r.metrics["start"], 1), (r.metrics["end"], -1)]
    running = peak = 0
    for _, delta in sorted(events):
        running += delta
        peak = max(peak, running)
    return peak


def test_cpu_limit_is_honoured(run_config):
    grid = tune.Tuner(
        sleeper,
        param_space={"sleep": 0.2},
        tune_config=tune.TuneConfig(num_samples=6),
        run_config=run_config(),
    ).fit()
    assert _max_overlap(grid) == 2  # 2 CPUs, 1 CPU per trial


def test_with_resources_limits_concurrency(run_config):
    grid = tune.Tuner(
        tune.with_resources(sleeper, {"cpu": 2}),
        param_space={"sleep": 0.15},
        tune_config=tune.TuneConfig(num_samples=3),
        run_config=run_config(),
    ).fit()
    assert _max_overlap(grid) == 1


def test_max_concurrent_trials(run_config):
    grid = tune.Tuner(
        sleeper,
        param_space={"sleep": 0.15},
        tune_config=tune.TuneConfig(num_samples=4, max_concurrent_trials=1),
        run_config=run_config(),
    ).fit()
    assert _max_overlap(grid) == 1


def test_fractional_gpus_get_their_own_ids(run_config):
    tune.init(num_cpus=4, num_gpus=2)

    def show_gpus(config):
        tune.report(
            {
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "start": time.time(),
                "end": time.time() + 0.2,
            }
        )
        time.sleep(0.2)

    grid = tune.Tuner(
        tune.with_resources(show_gpus, {"cpu": 1, "gpu": 0.5}),
        tune_config=tune.TuneConfig(num_samples=4),
        run_config=run_config(),
    ).fit()
    visible = sorted(r.metrics["visible"] for r in grid)
    assert visible == ["0", "0", "1", "1"]

    grid = tune.Tuner(show_gpus, run_config=run_config(name="nogpu")).fit()
    assert grid[0].metrics["visible"] == ""


def test_working_directory_is_the_trial_dir(run_config, tmp_path, monkeypatch):
    def where(config):
        tune.report(
            {
                "cwd": os.getcwd(),
                "orig": os.environ.get("TUNE_ORIG_WORKING_DIR"),
                "ctx": tune.get_context().get_trial_dir(),
            }
        )

    grid = tune.Tuner(where, run_config=run_config()).fit()
    metrics = grid[0].metrics
    assert os.path.realpath(metrics["cwd"]) == os.path.realpath(grid[0].path)
    assert os.path.realpath(metrics["ctx"]) == os.path.realpath(grid[0].path)
    assert metrics["orig"] == os.getcwd()

    monkeypatch.setenv("RAY_CHDIR_TO_TRIAL_DIR", "0")
    grid = tune.Tuner(where, run_config=run_config(name="nochdir")).fit()
    assert grid[0].metrics["cwd"] == os.getcwd()


SETUPS_FILE = "setups.txt"


class QuadraticTrainable(tune.Trainable):
    """The docs' reuse example, counting setups in a file (it runs in a worker)."""

    def setup(self, config):
        self.config = config
        with open(os.path.join(os.environ["TUNE_ORIG_WORKING_DIR"], SETUPS_FILE), "a") as f:
            f.write("setup\n")
        self.max_steps = 5
        self.step_count = 0

    def step(self):
        h1, h2 = self.config["hparam1"], self.config["hparam2"]
        loss = (h1 - 3) ** 2 + (h2 - 5) ** 2
        metrics = {"loss": loss, "pid": os.getpid()}
        self.step_count += 1
        if self.step_count > self.max_steps:
            metrics["done"] = True
        return metrics

    def reset_config(self, new_config):
        self.config = new_config
        return True


def test_reuse_actors_runs_setup_once(run_config, tmp_path):
    grid = tune.Tuner(
        QuadraticTrainable,
        param_space={"hparam1": tune.uniform(-10, 10), "hparam2": tune.uniform(-10, 10)},
        tune_config=tune.TuneConfig(num_samples=10, max_concurrent_trials=1, reuse_actors=True),
        run_config=run_config(checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False)),
    ).fit()
    assert grid.num_terminated == 10
    assert open(tmp_path / SETUPS_FILE).read().count("setup") == 1
    assert len({r.metrics["pid"] for r in grid}) == 1


def test_without_reuse_each_class_trial_gets_a_fresh_process(run_config, tmp_path):
    grid = tune.Tuner(
        QuadraticTrainable,
        param_space={"hparam1": 1.0, "hparam2": 2.0},
        tune_config=tune.TuneConfig(num_samples=3, max_concurrent_trials=1),
        run_config=run_config(),
    ).fit()
    assert open(tmp_path / SETUPS_FILE).read().count("setup") == 3
    assert len({r.metrics["pid"] for r in grid}) == 3


def test_time_budget_stops_the_experiment(run_config):
    def slow(config):
        for i in range(1000):
            time.sleep(0.02)
            tune.report({"i": i})

    start = time.time()
    grid = tune.Tuner(
        slow,
        tune_config=tune.TuneConfig(num_samples=5, time_budget_s=0.5),
        run_config=run_config(),
    ).fit()
    assert time.time() - start < 10
    assert grid.num_terminated == 5
    never_started = [r for r in grid if not r.metrics]
    assert len(never_started) == 3  # 2 ran (2 CPUs); the others count as TERMINATED, empty


def test_log_to_file_captures_output(run_config):
    def chatty(config):
        print("hello from the trial")
        tune.report({"x": 1})

    grid = tune.Tuner(chatty, run_config=run_config(log_to_file=True)).fit()
    assert "hello from the trial" in open(os.path.join(grid[0].path, "stdout")).read()


def test_log_to_file_output_still_reaches_the_console(tmp_path):
    """As Ray Tune's log_to_file: a trial's lines go to its files and, as without it,
    to the console the driver shows (before, only to the files)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = tmp_path / "chatty.py"
    script.write_text(
        "import sys\n"
        "import fasttune as tune\n"
        "def chatty(config):\n"
        "    print('out line of the trial')\n"
        "    print('err line of the trial', file=sys.stderr)\n"
        "    tune.report({'x': 1})\n"
        "run_config = tune.RunConfig(\n"
        f"    storage_path={str(tmp_path)!r}, name='exp', log_to_file=True, verbose=0\n"
        ")\n"
        "grid = tune.Tuner(chatty, run_config=run_config).fit()\n"
        "print('TRIAL', grid[0].path)\n"
    )
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "out line of the trial" in done.stdout
    assert "err line of the trial" in done.stderr
    trial_dir = done.stdout.split("TRIAL ", 1)[1].strip()
    assert open(os.path.join(trial_dir, "stdout")).read() == "out line of the trial\n"
    assert open(os.path.join(trial_dir, "stderr")).read() == "err line of the trial\n"


@pytest.mark.parametrize("executor", ["inline"])
def test_inline_executor_runs_in_process(run_config, monkeypatch, executor):
    monkeypatch.setenv("FASTTUNE_EXECUTOR", executor)

    def pid(config):
        tune.report({"pid": os.getpid()})

    grid = tune.Tuner(
        pid, tune_config=tune.TuneConfig(num_samples=2), run_config=run_config()
    ).fit()
    assert {r.metrics["pid"] for r in grid} == {os.getpid()}


def test_a_function_that_returns_marks_its_last_result_done_in_place(run_config):
    """As Ray: the final result of a function that returns is its last reported one,
    the same dict, with ``done`` set (no copy kept beside it)."""

    class Capture(tune.Callback):
        def __init__(self) -> None:
            self.reported: list = []
            self.final = None

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.reported.append(result)

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.final = trial.last_result

    def trainable(config):
        for i in range(3):
            tune.report({"score": i})

    capture = Capture()
    grid = tune.Tuner(trainable, run_config=run_config(callbacks=[capture])).fit()
    assert [r["score"] for r in capture.reported] == [0, 1, 2]
    assert capture.final is capture.reported[-1]
    assert capture.final["done"] is True and "__duplicate__" not in capture.final
    assert grid[0].metrics["done"] is True and grid[0].metrics["score"] == 2
