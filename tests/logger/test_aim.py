"""AimLoggerCallback writing a real local Aim repo, read back with Aim's API (issue 11)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import fasttune as tune
from fasttune import RunConfig, Tuner

aim = pytest.importorskip("aim")

from fasttune.logger.aim import AimLoggerCallback  # noqa: E402

# No per-run system-usage thread or package listing: the test reads only what Tune logged.
_QUIET = {"system_tracking_interval": None, "log_system_params": False}


def _trainable(config: dict[str, Any]) -> None:
    for i in range(3):
        if config.get("fail") and i == 1:
            raise RuntimeError("boom")
        tune.report(
            {
                "loss": np.float32(config["lr"] / (i + 1)),
                "nested": {"acc": 0.1 * i},
                "s": "not a number",
                "inf": float("inf"),
            }
        )


def _read_runs(repo_path: str) -> dict[str, dict[str, Any]]:
    """Every run of the repo: its trial id, experiment, hparams and metric series by step."""
    repo = aim.Repo.from_path(repo_path)
    runs: dict[str, dict[str, Any]] = {}
    for run_hash in repo.list_all_runs():
        run = aim.Run(run_hash=run_hash, repo=repo, **_QUIET)
        series = {}
        for metric in run.metrics():
            steps, (values, _epochs, _timestamps) = metric.data.items_list()
            series[metric.name] = dict(zip(steps, values))
        runs[run["trial_id"]] = {
            "experiment": run.experiment,
            "hparams": run.get("hparams"),
            "trial_log_dir": run["trial_log_dir"],
            "metrics": series,
        }
        run.close()
    return runs


def test_one_run_per_trial_in_the_experiment_directory(tmp_path: Any) -> None:
    results = Tuner(
        _trainable,
        param_space={"lr": tune.grid_search([0.1, 0.2]), "opt": {"name": "sgd"}},
        run_config=RunConfig(
            storage_path=str(tmp_path), name="aim_exp", callbacks=[AimLoggerCallback(**_QUIET)]
        ),
    ).fit()
    assert not results.errors
    runs = _read_runs(str(tmp_path / "aim_exp"))  # the default repo: the experiment dir
    assert sorted(runs) == sorted(r.metrics["trial_id"] for r in results)
    for result in results:
        run = runs[result.metrics["trial_id"]]
        assert run["experiment"] == "aim_exp"
        assert run["hparams"] == {"lr": result.config["lr"]}  # the sampled params only
        assert os.path.samefile(run["trial_log_dir"], result.path)
        metrics = run["metrics"]
        lr = result.config["lr"]
        assert metrics["ray/tune/loss"] == pytest.approx({1: lr, 2: lr / 2, 3: lr / 3})
        assert metrics["ray/tune/nested/acc"] == pytest.approx({1: 0.0, 2: 0.1, 3: 0.2})
        # strings, infinities and the keys Ray leaves out are not tracked
        for absent in ("s", "inf", "config/lr", "pid", "timestamp", "training_iteration"):
            assert "ray/tune/" + absent not in metrics


def test_repo_experiment_metrics_and_a_failed_trial(tmp_path: Any) -> None:
    repo = str(tmp_path / "my_repo")
    callback = AimLoggerCallback(repo=repo, experiment_name="named", metrics=["loss"], **_QUIET)
    results = Tuner(
        _trainable,
        param_space={"lr": tune.grid_search([0.1, 0.3]), "fail": tune.grid_search([False, True])},
        run_config=RunConfig(storage_path=str(tmp_path), name="e", callbacks=[callback]),
    ).fit()
    assert len(results.errors) == 2
    runs = _read_runs(repo)
    assert len(runs) == 4
    for result in results:
        run = runs[result.metrics["trial_id"]]
        assert run["experiment"] == "named"
        assert set(run["metrics"]) == {"ray/tune/loss"}  # only the metrics named
        steps = sorted(run["metrics"]["ray/tune/loss"])
        assert steps == ([1] if result.config["fail"] else [1, 2, 3])


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"metrics=\[\].*non-empty list"):
        AimLoggerCallback(metrics=[])
    with pytest.raises(ValueError, match=r"metrics='loss'"):
        AimLoggerCallback(metrics="loss")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"repo=5"):
        AimLoggerCallback(repo=5)
    with pytest.raises(TypeError, match=r"experiment_name=1"):
        AimLoggerCallback(experiment_name=1)  # type: ignore[arg-type]


def test_missing_aim_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "aim.sdk", None)  # as if not installed
    with pytest.raises(ImportError, match=r'pip install "fasttune\[aim\]"'):
        AimLoggerCallback()
