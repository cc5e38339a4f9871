"""WandbLoggerCallback and setup_wandb in W&B's offline mode, reading the run files."""

from __future__ import annotations

import glob
import json
import os
import time
from typing import Any

import numpy as np
import pytest

import fasttune as tune
from fasttune import RunConfig, Tuner

pytest.importorskip("wandb")

from fasttune.air.integrations.wandb import WandbLoggerCallback, setup_wandb
from tests.air._wandb_records import summarize


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_default"))
    os.makedirs(tmp_path / "wandb_default", exist_ok=True)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def _run_file(trial_dir: str, trial_id: str) -> str:
    (path,) = glob.glob(os.path.join(trial_dir, "wandb", f"*-{trial_id}", f"run-{trial_id}.wandb"))
    return path


def _summary(trial_dir: str, trial_id: str) -> dict[str, Any]:
    """The run file's summary, once W&B's service has written all of it (its own process
    may still be flushing the file when ``finish()`` returns)."""
    deadline = time.monotonic() + 20
    while True:
        run = summarize(_run_file(trial_dir, trial_id))
        if ("run" in run["kinds"] and "exit" in run["kinds"]) or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def _trainable(config: dict[str, Any]) -> None:
    for i in range(3):
        if config.get("fail") and i == 2:
            raise RuntimeError("boom")
        tune.report({"loss": np.float32(config["lr"] / (i + 1)), "tag": "x", "acc": 0.1 * i})


def test_callback_writes_one_offline_run_per_trial(tmp_path: Any) -> None:
    callback = WandbLoggerCallback(project="proj", excludes=["time_this_iter_s"])
    results = Tuner(
        _trainable,
        param_space={"lr": tune.grid_search([0.1, 0.2]), "fail": tune.grid_search([False])},
        run_config=RunConfig(storage_path=str(tmp_path), name="wb", callbacks=[callback]),
    ).fit()
    assert not results.errors
    for result in results:
        trial_id = result.metrics["trial_id"]
        run = _summary(result.path, trial_id)
        assert run.get("run_id") == trial_id, run
        assert run["name"].endswith(trial_id)
        assert run["project"] == "proj" and run["group"] == "wb"
        assert json.loads(run["config"]["lr"]) == result.config["lr"]
        rows = run["history"]
        assert [json.loads(r["loss"]) for r in rows] == pytest.approx(
            [result.config["lr"] / (i + 1) for i in range(3)], rel=1e-6
        )
        assert [json.loads(r["training_iteration"]) for r in rows] == [1, 2, 3]
        assert [json.loads(r["_step"]) for r in rows] == [1, 2, 3]  # as Ray logs it
        assert all("time_this_iter_s" not in r and "tag" not in r for r in rows)
        assert all("trial_id" not in r and "config/lr" not in r for r in rows)
        assert run["exit_code"] == 0


def test_failed_trial_run_exits_with_an_error_code(tmp_path: Any) -> None:
    callback = WandbLoggerCallback(project="proj", group="g")
    results = Tuner(
        _trainable,
        param_space={"lr": 0.1, "fail": True},
        run_config=RunConfig(storage_path=str(tmp_path), name="f", callbacks=[callback]),
    ).fit()
    assert len(results.errors) == 1
    result = results[0]
    run = _summary(result.path, result.metrics["trial_id"])
    assert run["group"] == "g" and len(run["history"]) == 2 and run["exit_code"] == 1


def test_setup_wandb_inside_the_trainable(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        run = setup_wandb(config, project="inside", mode="offline", dir=os.getcwd())
        for i in range(2):
            run.log({"score": config["lr"] * i})
            tune.report({"score": config["lr"] * i})
        run.finish()

    results = Tuner(
        train,
        param_space={"lr": 0.5},
        run_config=RunConfig(storage_path=str(tmp_path), name="inside"),
    ).fit()
    assert not results.errors
    result = results[0]
    trial_id = result.metrics["trial_id"]
    run = _summary(result.path, trial_id)
    assert run["run_id"] == trial_id and run["project"] == "inside" and run["group"] == "inside"
    assert [json.loads(r["score"]) for r in run["history"]] == [0.0, 0.5]


def test_setup_wandb_runs_go_to_each_trials_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Trials one after another on one reused worker: each run in its own trial's folder
    (W&B kept the first run's directory for the whole process)."""
    monkeypatch.delenv("WANDB_DIR")

    def train(config: dict[str, Any]) -> None:
        run = setup_wandb(config, project="inside", mode="offline")
        run.log({"score": config["lr"]})
        tune.report({"score": config["lr"], "pid": os.getpid()})
        run.finish()

    results = Tuner(
        train,
        param_space={"lr": tune.grid_search([0.1, 0.2])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=RunConfig(storage_path=str(tmp_path), name="reused"),
    ).fit()
    assert not results.errors
    assert len({r.metrics["pid"] for r in results}) == 1  # one worker hosted both
    for result in results:
        trial_id = result.metrics["trial_id"]
        run = _summary(result.path, trial_id)  # found under the trial's own folder
        assert [json.loads(r["score"]) for r in run["history"]] == [result.config["lr"]]


def test_bad_input(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    monkeypatch.delenv("WANDB_PROJECT_NAME", raising=False)
    with pytest.raises(ValueError, match=r"project=None"):
        WandbLoggerCallback().setup()
    with pytest.raises(ValueError, match=r"api_key_file='.*nokey'"):
        WandbLoggerCallback(project="p", api_key_file=str(tmp_path / "nokey")).setup()
    with pytest.raises(TypeError, match=r"excludes='loss'"):
        WandbLoggerCallback(project="p", excludes="loss")  # type: ignore[arg-type]
