"""Driver crashes and interrupts: Tuner.restore continues where the run stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import fasttune as tune
from tests.runner._driver_script import make_tuner, slow_counter
from tests.runner._stoppers import StopAllAfter

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


def _start_driver(storage: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.runner._driver_script", storage, *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "started"
    return proc


def _final_lines(trial_dir: str, last_iteration: int = 8) -> list[dict]:
    lines = [json.loads(line) for line in open(os.path.join(trial_dir, "result.json"))]
    return [line for line in lines if line["training_iteration"] == last_iteration]


def _wait_for_results(storage: str, count: int, timeout: float = 60) -> None:
    exp = os.path.join(storage, "killed")
    deadline = time.time() + timeout
    while time.time() < deadline:
        total = 0
        if os.path.isdir(exp):
            for name in os.listdir(exp):
                path = os.path.join(exp, name, "result.json")
                if os.path.exists(path):
                    total += sum(1 for _ in open(path))
        if total >= count:
            return
        time.sleep(0.05)
    raise AssertionError("the experiment made no progress")


@pytest.mark.slow
@pytest.mark.parametrize("kill_after_results", [3, 25])
def test_driver_sigkill_then_restore_finishes_every_trial_once(tmp_path, kill_after_results):
    storage = str(tmp_path / "store")
    proc = _start_driver(storage)
    _wait_for_results(storage, kill_after_results)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    path = os.path.join(storage, "killed")
    assert tune.Tuner.can_restore(path)

    grid = tune.Tuner.restore(path, trainable=slow_counter).fit()
    assert len(grid) == 10 and grid.num_terminated == 10 and grid.num_errors == 0
    xs = sorted(r.config["x"] for r in grid)
    assert len(set(xs)) == 10  # no sample repeated

    # The same seeded search without a crash gives the same ten configs.
    reference = make_tuner(str(tmp_path / "reference"))
    reference._run_config.verbose = 0
    expected = sorted(r.config["x"] for r in reference.fit())
    assert xs == pytest.approx(expected)

    for result in grid:
        assert result.metrics["i"] == 7 and result.metrics["training_iteration"] == 8
        assert len(_final_lines(result.path)) == 1
    trial_dirs = [d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))]
    assert len(trial_dirs) == 10


@pytest.mark.slow
def test_sigint_stops_gracefully_and_restore_continues(tmp_path):
    storage = str(tmp_path / "store")
    proc = _start_driver(storage)
    _wait_for_results(storage, 5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Tuner.restore" in err
    path = os.path.join(storage, "killed")
    grid = tune.Tuner.restore(path, trainable=slow_counter).fit()
    assert grid.num_terminated == 10
    for result in grid:
        assert len(_final_lines(result.path)) == 1


def test_restore_flags_for_errored_trials(tmp_path, run_config):
    def fn(config):
        marker = os.path.join(config["dir"], "fixed")
        if config["x"] == 1 and not os.path.exists(marker):
            raise RuntimeError("broken until fixed")
        tune.report({"x": config["x"]})

    space = {"x": tune.grid_search([0, 1]), "dir": str(tmp_path)}
    grid = tune.Tuner(fn, param_space=space, run_config=run_config()).fit()
    assert grid.num_errors == 1
    path = grid.experiment_path

    untouched = tune.Tuner.restore(path, trainable=fn).fit()
    assert untouched.num_errors == 1  # errored trials stay errored by default

    open(os.path.join(str(tmp_path), "fixed"), "w").close()
    fixed = tune.Tuner.restore(path, trainable=fn, restart_errored=True).fit()
    assert fixed.num_errors == 0 and fixed.num_terminated == 2


def _counts(config):
    for i in range(3):
        tune.report({"i": i})


def test_a_run_stopped_on_purpose_restores_without_new_trials(run_config):
    """stop_all (as the time budget and fail_fast) ends the search, saved so: a restore
    finishes what had begun and suggests nothing more, as on Ray."""
    grid = tune.Tuner(
        _counts,
        param_space={"x": tune.grid_search([0, 1, 2])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=run_config(stop=StopAllAfter(2)),
    ).fit()
    assert len(grid) == 1
    restored = tune.Tuner.restore(grid.experiment_path, trainable=_counts).fit()
    assert len(restored) == 1 and restored[0].config["x"] == 0


def test_resume_errored_wins_over_restart_errored(tmp_path, run_config):
    """Both flags: the errored trial resumes from its checkpoint, as Ray reads them."""

    def fn(config):
        import tempfile

        fixed = os.path.exists(os.path.join(config["dir"], "fixed"))
        checkpoint = tune.get_checkpoint()
        start = 0
        if checkpoint is not None:
            with checkpoint.as_directory() as d:
                start = int(open(os.path.join(d, "i")).read()) + 1
        for i in range(start, 3):
            with tempfile.TemporaryDirectory() as d:
                open(os.path.join(d, "i"), "w").write(str(i))
                tune.report({"i": i, "start": start}, checkpoint=tune.Checkpoint.from_directory(d))
            if i == 1 and not fixed:
                raise RuntimeError("broken until fixed")

    grid = tune.Tuner(fn, param_space={"dir": str(tmp_path)}, run_config=run_config()).fit()
    assert grid.num_errors == 1
    open(os.path.join(str(tmp_path), "fixed"), "w").close()
    grid = tune.Tuner.restore(
        grid.experiment_path, trainable=fn, resume_errored=True, restart_errored=True
    ).fit()
    assert grid.num_errors == 0
    assert grid[0].metrics["start"] == 2 and grid[0].metrics["i"] == 2  # from checkpoint 1


@pytest.mark.parametrize("driver_writes", ["0", "1"], ids=["worker_writes", "driver_writes"])
def test_a_restarted_errored_trial_starts_with_empty_result_files(
    tmp_path, run_config, monkeypatch, driver_writes
):
    """restart_errored runs an errored trial again from scratch: its result files hold
    only the new run's results, so metrics_dataframe does not mix the two (as Ray)."""
    monkeypatch.setenv("FASTTUNE_DRIVER_WRITES_RESULTS", driver_writes)

    def fn(config):
        fixed = os.path.exists(os.path.join(config["dir"], "fixed"))
        for i in range(3):
            tune.report({"run": "second" if fixed else "first", "i": i})
            if i == 1 and not fixed:
                raise RuntimeError("broken until fixed")

    space = {"dir": str(tmp_path)}
    grid = tune.Tuner(fn, param_space=space, run_config=run_config()).fit()
    assert grid.num_errors == 1
    open(os.path.join(str(tmp_path), "fixed"), "w").close()
    grid = tune.Tuner.restore(grid.experiment_path, trainable=fn, restart_errored=True).fit()
    assert grid.num_errors == 0
    frame = grid[0].metrics_dataframe
    assert list(frame["run"]) == ["second"] * 3
    assert list(frame["training_iteration"]) == [1, 2, 3]
    lines = [json.loads(line) for line in open(os.path.join(grid[0].path, "result.json"))]
    assert [(line["run"], line["i"]) for line in lines] == [
        ("second", 0),
        ("second", 1),
        ("second", 2),
    ]


def test_restore_unknown_path_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no fasttune experiment there"):
        tune.Tuner.restore(str(tmp_path / "missing"), trainable=slow_counter)
