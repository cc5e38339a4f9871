"""fasttune.integration.xgboost through the Tuner with the real XGBoost (issue 11)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import fasttune as tune
from fasttune import FailureConfig, RunConfig, TuneConfig, Tuner

xgb = pytest.importorskip("xgboost")
pytest.importorskip("sklearn")

from fasttune.integration.xgboost import (  # noqa: E402
    TuneReportCallback,
    TuneReportCheckpointCallback,
)


def _data() -> tuple[Any, Any, Any, Any]:
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=300, n_features=6, random_state=0)
    return x[:200], y[:200], x[200:], y[200:]


def _train_native(config: dict[str, Any]) -> None:
    x, y, xv, yv = _data()
    dtrain, dvalid = xgb.DMatrix(x, label=y), xgb.DMatrix(xv, label=yv)
    params = {"objective": "binary:logistic", "eval_metric": ["logloss", "error"]}
    params["max_depth"] = config["max_depth"]
    xgb.train(
        params,
        dtrain,
        num_boost_round=5,
        evals=[(dtrain, "train"), (dvalid, "eval")],
        verbose_eval=False,
        callbacks=[
            TuneReportCheckpointCallback(
                metrics={"loss": "eval-logloss", "error": "eval-error"},
                frequency=2,
                results_postprocessing_fn=config.get("post"),
            )
        ],
    )


def _logloss(booster: Any) -> float:
    _, _, xv, yv = _data()
    text = booster.eval(xgb.DMatrix(xv, label=yv), "eval")
    return float(text.split("eval-logloss:")[1].split()[0])


def test_xgboost_train_reports_metrics_and_checkpoints(tmp_path: Any) -> None:
    results = Tuner(
        _train_native,
        param_space={"max_depth": tune.grid_search([2, 3])},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(storage_path=str(tmp_path), name="xgb"),
    ).fit()
    assert not results.errors
    for result in results:
        # 5 rounds, then the checkpoint at the end (rounds 2 and 4 had theirs)
        assert result.metrics["training_iteration"] == 6
        assert set(result.metrics) >= {"loss", "error"}
        assert "eval-logloss" not in result.metrics  # only the mapped names
        with open(os.path.join(result.path, "result.json")) as f:
            lines = [json.loads(line) for line in f]
        assert [type(line["loss"]) for line in lines] == [float] * 6
        assert len(result.best_checkpoints) == 3
        booster = TuneReportCheckpointCallback.get_model(result.checkpoint)
        assert booster.num_boosted_rounds() == 5
        assert _logloss(booster) == pytest.approx(result.metrics["loss"], abs=1e-5)
        first = TuneReportCheckpointCallback.get_model(result.best_checkpoints[0][0])
        assert first.num_boosted_rounds() == 2
    best = results.get_best_result()
    assert best.metrics["loss"] == min(r.metrics["loss"] for r in results)


def test_results_postprocessing_fn_changes_what_is_reported(tmp_path: Any) -> None:
    def post(metrics: dict[str, Any]) -> dict[str, Any]:
        return {**metrics, "accuracy": 1.0 - metrics["error"]}

    results = Tuner(
        _train_native,
        param_space={"max_depth": 2, "post": post},
        run_config=RunConfig(storage_path=str(tmp_path), name="post"),
    ).fit()
    assert not results.errors
    metrics = results[0].metrics
    assert metrics["accuracy"] == pytest.approx(1.0 - metrics["error"])


def test_scikit_learn_api_with_report_only_callback(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        x, y, xv, yv = _data()
        model = xgb.XGBClassifier(
            n_estimators=4,
            max_depth=config["max_depth"],
            eval_metric="logloss",
            callbacks=[TuneReportCallback()],
        )
        model.fit(x, y, eval_set=[(xv, yv)], verbose=False)

    results = Tuner(
        train,
        param_space={"max_depth": 2},
        tune_config=TuneConfig(metric="validation_0-logloss", mode="min"),
        run_config=RunConfig(storage_path=str(tmp_path), name="sk"),
    ).fit()
    assert not results.errors
    result = results[0]
    assert result.metrics["training_iteration"] == 4
    assert isinstance(result.metrics["validation_0-logloss"], float)
    assert result.checkpoint is None  # report only


def test_scikit_learn_api_checkpoint_loads_back(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        x, y, xv, yv = _data()
        model = xgb.XGBClassifier(
            n_estimators=3,
            eval_metric="logloss",
            callbacks=[TuneReportCheckpointCallback(metrics="validation_0-logloss")],
        )
        model.fit(x, y, eval_set=[(xv, yv)], verbose=False)

    results = Tuner(train, run_config=RunConfig(storage_path=str(tmp_path), name="ck")).fit()
    assert not results.errors
    result = results[0]
    assert result.metrics["training_iteration"] == 4
    booster = TuneReportCheckpointCallback.get_model(result.checkpoint)
    assert booster.num_boosted_rounds() == 3


class _FailOnce(xgb.callback.TrainingCallback):  # type: ignore[misc]
    """Fails the trial once, after round ``at``, to test the restore."""

    def __init__(self, marker: str, at: int) -> None:
        self.marker, self.at = marker, at

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if epoch + 1 == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError("worker lost")
        return False


def test_restore_continues_boosting_from_the_checkpoint(tmp_path: Any) -> None:
    marker = str(tmp_path / "failed_once")

    def train(config: dict[str, Any]) -> None:
        x, y, xv, yv = _data()
        dtrain, dvalid = xgb.DMatrix(x, label=y), xgb.DMatrix(xv, label=yv)
        checkpoint = tune.get_checkpoint()
        start = None
        if checkpoint is not None:
            start = TuneReportCheckpointCallback.get_model(checkpoint)
        done = 0 if start is None else start.num_boosted_rounds()
        xgb.train(
            {"objective": "binary:logistic", "eval_metric": "logloss"},
            dtrain,
            num_boost_round=6 - done,
            xgb_model=start,
            evals=[(dvalid, "eval")],
            verbose_eval=False,
            callbacks=[
                TuneReportCheckpointCallback(metrics={"loss": "eval-logloss"}, frequency=1),
                _FailOnce(marker, at=3),
            ],
        )

    results = Tuner(
        train,
        run_config=RunConfig(
            storage_path=str(tmp_path), name="restore", failure_config=FailureConfig(max_failures=1)
        ),
    ).fit()
    assert not results.errors
    assert os.path.exists(marker)  # it did fail once
    result = results[0]
    booster = TuneReportCheckpointCallback.get_model(result.checkpoint)
    assert booster.num_boosted_rounds() == 6
    assert result.metrics["training_iteration"] == 6
    assert _logloss(booster) == pytest.approx(result.metrics["loss"], abs=1e-5)


def test_unknown_metric_name_fails_the_trial_naming_the_available_ones(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        x, y, _, _ = _data()
        dtrain = xgb.DMatrix(x, label=y)
        xgb.train(
            {"objective": "binary:logistic", "eval_metric": "logloss"},
            dtrain,
            num_boost_round=2,
            evals=[(dtrain, "train")],
            verbose_eval=False,
            callbacks=[TuneReportCheckpointCallback(metrics={"loss": "eval-logloss"})],
        )

    results = Tuner(train, run_config=RunConfig(storage_path=str(tmp_path), name="bad")).fit()
    assert len(results.errors) == 1
    message = str(results.errors[0])
    assert "'eval-logloss' is not a metric that XGBoost reported" in message
    assert "['train-logloss']" in message


def test_bad_arguments_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"frequency=-1"):
        TuneReportCheckpointCallback(frequency=-1)
    with pytest.raises(TypeError, match=r"metrics=3"):
        TuneReportCheckpointCallback(metrics=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"filename=''"):
        TuneReportCheckpointCallback(filename="")
    with pytest.raises(TypeError, match=r"results_postprocessing_fn"):
        TuneReportCallback(results_postprocessing_fn="avg")  # type: ignore[arg-type]
