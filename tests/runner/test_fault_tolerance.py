"""Trial failures: retries from checkpoints, worker deaths, fail_fast."""

from __future__ import annotations

import json
import os
import signal

import pytest

import fasttune as tune
from tests.runner._faults import killed_once


def _checkpointing_fn(config):
    """Counts to config['n'], checkpointing each step; dies once at config['die_at']."""
    import tempfile

    start = 0
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        start = json.load(open(os.path.join(ckpt.path, "state.json")))["i"] + 1
    marker = os.path.join(config["marker_dir"], f"died_{config['id']}")
    for i in range(start, config["n"]):
        if i == config["die_at"] and not os.path.exists(marker):
            open(marker, "w").close()
            if config["how"] == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"planned failure at {i}")
        d = tempfile.mkdtemp()
        json.dump({"i": i}, open(os.path.join(d, "state.json"), "w"))
        tune.report({"i": i, "resumed_from": start}, checkpoint=tune.Checkpoint.from_directory(d))


@pytest.mark.parametrize("how", ["sigkill", "raise"])
def test_failed_trial_retries_from_latest_checkpoint(run_config, tmp_path, how):
    grid = tune.Tuner(
        _checkpointing_fn,
        param_space={
            "id": tune.grid_search([0, 1]),
            "n": 6,
            "die_at": 3,
            "how": how,
            "marker_dir": str(tmp_path),
        },
        run_config=run_config(failure_config=tune.FailureConfig(max_failures=1)),
    ).fit()
    assert grid.num_errors == 0 and grid.num_terminated == 2
    for result in grid:
        assert result.metrics["i"] == 5
        assert result.metrics["resumed_from"] == 3  # restarted from checkpoint of i=2
        assert result.metrics["training_iteration"] == 6
        error_text = open(os.path.join(result.path, "error.txt")).read()
        expected = "died" if how == "sigkill" else "planned failure at 3"
        assert expected in error_text and "Failure # 1" in error_text


def test_without_retries_the_trial_errors_and_others_go_on(run_config, tmp_path):
    def fn(config):
        if config["x"] == 1:
            raise ValueError("x=1 is broken")
        tune.report({"ok": config["x"]})

    grid = tune.Tuner(
        fn, param_space={"x": tune.grid_search([0, 1, 2])}, run_config=run_config()
    ).fit()
    assert grid.num_errors == 1 and grid.num_terminated == 2
    error = grid.errors[0]
    assert "x=1 is broken" in str(error)
    errored = next(r for r in grid if r.error is not None)
    assert "ValueError: x=1 is broken" in open(os.path.join(errored.path, "error.txt")).read()


def test_max_failures_forever_eventually_succeeds(run_config, tmp_path):
    def flaky(config):
        attempts = os.path.join(config["dir"], "attempts")
        n = len(open(attempts).read()) if os.path.exists(attempts) else 0
        open(attempts, "a").write("x")
        if n < 3:
            raise RuntimeError("not yet")
        tune.report({"attempt": n})

    grid = tune.Tuner(
        flaky,
        param_space={"dir": str(tmp_path)},
        run_config=run_config(failure_config=tune.FailureConfig(max_failures=-1)),
    ).fit()
    assert grid[0].metrics["attempt"] == 3 and grid.num_errors == 0


def test_fail_fast_stops_the_experiment(run_config):
    def fn(config):
        import time

        if config["x"] == 0:
            raise ValueError("first fails")
        for i in range(1000):
            time.sleep(0.01)
            tune.report({"i": i})

    grid = tune.Tuner(
        fn,
        param_space={"x": tune.grid_search([0, 1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=run_config(failure_config=tune.FailureConfig(fail_fast=True)),
    ).fit()
    assert grid.num_errors == 1
    assert all(r.metrics.get("i", 0) < 999 for r in grid)


def test_fail_fast_raise_reraises(run_config):
    def fn(config):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        tune.Tuner(
            fn, run_config=run_config(failure_config=tune.FailureConfig(fail_fast="raise"))
        ).fit()


class _RestoresFailing(tune.Trainable):
    """Fails once in training at step 3, then fails its first ``restore_fails`` restores
    (attempts counted in a file, as they run in new workers)."""

    def setup(self, config):
        self.idx = 0

    def step(self):
        self.idx += 1
        marker = os.path.join(self.config["dir"], "trained_failure")
        if self.idx == 3 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("a failure in training")
        return {"idx": self.idx}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "idx"), "w") as f:
            f.write(str(self.idx))

    def load_checkpoint(self, checkpoint_dir):
        attempts = os.path.join(self.config["dir"], "restores")
        with open(attempts, "a") as f:
            f.write("x")
        if os.path.getsize(attempts) <= self.config["restore_fails"]:
            raise RuntimeError("a failure in restore")
        with open(os.path.join(checkpoint_dir, "idx")) as f:
            self.idx = int(f.read())


@pytest.mark.parametrize(
    "retries, restore_fails, max_failures, outcome",
    [
        (2, 2, 1, "restored"),  # two restore failures not counted, the third restores
        (0, 1, 1, "error"),  # no retry: the failed restore is the second failure
        (1, 5, 3, "from scratch"),  # one retry, then a counted failure and a fresh start
    ],
)
def test_restore_retries_as_tune_restore_retry_num_says(
    tmp_path, monkeypatch, retries, restore_fails, max_failures, outcome
):
    monkeypatch.setenv("TUNE_RESTORE_RETRY_NUM", str(retries))
    grid = tune.Tuner(
        _RestoresFailing,
        param_space={"dir": str(tmp_path), "restore_fails": restore_fails},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="retry", verbose=0,
            stop={"training_iteration": 5},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
            failure_config=tune.FailureConfig(max_failures=max_failures),
        ),
    ).fit()  # fmt: skip
    attempts = os.path.getsize(tmp_path / "restores")
    if outcome == "error":
        assert grid.num_errors == 1 and attempts == 1
        return
    assert grid.num_errors == 0
    assert grid[0].metrics["training_iteration"] == 5 and grid[0].metrics["idx"] == 5
    if outcome == "restored":
        assert attempts == 3  # counted on from the checkpoint of step 2
        assert grid[0].metrics["iterations_since_restore"] == 3
    else:
        assert attempts == 2  # then no restore: it ran again from step 1
        assert grid[0].metrics["iterations_since_restore"] == 5


class _DiesAsItEnds(tune.Trainable):
    """Three steps; its process is SIGKILLed once, in ``cleanup()`` (the trial is being
    stopped after its last result) or, with ``in_save``, in the save made at the end."""

    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {"n": self.n, "done": self.n >= 3}

    def save_checkpoint(self, checkpoint_dir):
        if self.config["in_save"]:
            killed_once(self.config["dir"], "killed")
        with open(os.path.join(checkpoint_dir, "n"), "w") as f:
            f.write(str(self.n))

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n")) as f:
            self.n = int(f.read())

    def cleanup(self):
        if not self.config["in_save"] and self.n == 3:
            killed_once(self.config["dir"], "killed")


def _run_dies_as_it_ends(run_config, tmp_path, *, in_save, max_failures):
    grid = tune.Tuner(
        _DiesAsItEnds,
        param_space={"dir": str(tmp_path), "in_save": in_save},
        tune_config=tune.TuneConfig(reuse_actors=False),  # cleanup() runs at each stop
        run_config=run_config(
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=in_save),
            failure_config=tune.FailureConfig(max_failures=max_failures),
        ),
    ).fit()
    assert os.path.exists(os.path.join(tmp_path, "killed"))
    return grid


def test_a_worker_dying_as_its_trial_ends_loses_nothing(run_config, tmp_path, caplog):
    """Its last result is in and nothing was to be saved: TERMINATED, even without
    retries (it was an ERROR), as on Ray, where the trial ends before its actor stops."""
    grid = _run_dies_as_it_ends(run_config, tmp_path, in_save=False, max_failures=0)
    assert grid.num_errors == 0 and grid.num_terminated == 1
    assert grid[0].metrics["n"] == 3 and grid[0].metrics["training_iteration"] == 3
    assert "failed while being stopped after its last result" in caplog.text


@pytest.mark.parametrize("max_failures", [1, 0])
def test_a_worker_dying_in_its_final_save_is_retried(run_config, tmp_path, max_failures):
    """The checkpoint at the end was not made: a failure like any other, retried (from
    scratch: no earlier checkpoint) while FailureConfig allows."""
    grid = _run_dies_as_it_ends(run_config, tmp_path, in_save=True, max_failures=max_failures)
    if not max_failures:
        assert grid.num_errors == 1
        return
    result = grid[0]
    assert result.error is None and result.metrics["n"] == 3
    assert result.checkpoint is not None
    assert open(os.path.join(result.checkpoint.path, "n")).read() == "3"
    lines = [json.loads(line) for line in open(os.path.join(result.path, "result.json"))]
    assert [line["n"] for line in lines] == [1, 2, 3]
