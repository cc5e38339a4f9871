"""fasttune.integration.lightgbm through the Tuner with the real LightGBM (issue 11)."""

from __future__ import annotations

import os
from typing import Any

import pytest

import fasttune as tune
from fasttune import FailureConfig, RunConfig, TuneConfig, Tuner

lgb = pytest.importorskip("lightgbm")
pytest.importorskip("sklearn")

from fasttune.integration.lightgbm import (  # noqa: E402
    TuneReportCallback,
    TuneReportCheckpointCallback,
)

_PARAMS = {"objective": "binary", "metric": ["binary_logloss", "binary_error"], "verbose": -1}


def _data() -> tuple[Any, Any, Any, Any]:
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=300, n_features=6, random_state=0)
    return x[:200], y[:200], x[200:], y[200:]


def _logloss(booster: Any) -> float:
    from sklearn.metrics import log_loss

    _, _, xv, yv = _data()
    return float(log_loss(yv, booster.predict(xv)))


def test_lightgbm_train_reports_metrics_and_checkpoints(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        x, y, xv, yv = _data()
        dtrain = lgb.Dataset(x, label=y)
        dvalid = lgb.Dataset(xv, label=yv, reference=dtrain)
        lgb.train(
            {**_PARAMS, "num_leaves": config["num_leaves"]},
            dtrain,
            num_boost_round=5,
            valid_sets=[dvalid],
            valid_names=["valid"],
            callbacks=[
                TuneReportCheckpointCallback(
                    metrics={"loss": "valid-binary_logloss", "error": "valid-binary_error"},
                    frequency=2,
                )
            ],
        )

    results = Tuner(
        train,
        param_space={"num_leaves": tune.grid_search([4, 8])},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(storage_path=str(tmp_path), name="lgb"),
    ).fit()
    assert not results.errors
    for result in results:
        # one report per round; checkpoints at rounds 2, 4 and with the last one
        assert result.metrics["training_iteration"] == 5
        assert isinstance(result.metrics["loss"], float) and "error" in result.metrics
        assert "valid-binary_logloss" not in result.metrics
        assert len(result.best_checkpoints) == 3
        booster = TuneReportCheckpointCallback.get_model(result.checkpoint)
        assert booster.current_iteration() == 5
        assert _logloss(booster) == pytest.approx(result.metrics["loss"], abs=1e-6)
    best = results.get_best_result()
    assert best.metrics["loss"] == min(r.metrics["loss"] for r in results)


def test_scikit_learn_api(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        x, y, xv, yv = _data()
        model = lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1)
        model.fit(x, y, eval_set=[(xv, yv)], callbacks=[TuneReportCheckpointCallback()])

    results = Tuner(train, run_config=RunConfig(storage_path=str(tmp_path), name="sk")).fit()
    assert not results.errors
    result = results[0]
    assert result.metrics["training_iteration"] == 4
    assert isinstance(result.metrics["valid_0-binary_logloss"], float)
    assert TuneReportCheckpointCallback.get_model(result.checkpoint).current_iteration() == 4


def test_report_only_callback_and_postprocessing(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        x, y, xv, yv = _data()
        dtrain = lgb.Dataset(x, label=y)
        lgb.train(
            _PARAMS,
            dtrain,
            num_boost_round=3,
            valid_sets=[lgb.Dataset(xv, label=yv, reference=dtrain)],
            callbacks=[
                TuneReportCallback(
                    metrics=["valid_0-binary_error"],
                    results_postprocessing_fn=lambda m: {"acc": 1 - m["valid_0-binary_error"]},
                )
            ],
        )

    results = Tuner(train, run_config=RunConfig(storage_path=str(tmp_path), name="ro")).fit()
    assert not results.errors
    result = results[0]
    assert result.checkpoint is None
    assert 0.0 <= result.metrics["acc"] <= 1.0 and "valid_0-binary_error" not in result.metrics


def test_restore_continues_from_the_checkpoint(tmp_path: Any) -> None:
    marker = str(tmp_path / "failed_once")

    def fail_once(env: Any) -> None:
        if env.iteration + 1 == 3 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("worker lost")

    fail_once.order = 30  # type: ignore[attr-defined]  # after the Tune callback

    def train(config: dict[str, Any]) -> None:
        x, y, xv, yv = _data()
        checkpoint = tune.get_checkpoint()
        start = None if checkpoint is None else TuneReportCheckpointCallback.get_model(checkpoint)
        done = 0 if start is None else start.current_iteration()
        dtrain = lgb.Dataset(x, label=y, free_raw_data=False)
        lgb.train(
            _PARAMS,
            dtrain,
            num_boost_round=6 - done,
            init_model=start,
            valid_sets=[lgb.Dataset(xv, label=yv, reference=dtrain)],
            valid_names=["valid"],
            callbacks=[
                TuneReportCheckpointCallback(metrics={"loss": "valid-binary_logloss"}, frequency=1),
                fail_once,
            ],
        )

    results = Tuner(
        train,
        run_config=RunConfig(
            storage_path=str(tmp_path), name="restore", failure_config=FailureConfig(max_failures=1)
        ),
    ).fit()
    assert not results.errors
    assert os.path.exists(marker)
    result = results[0]
    booster = TuneReportCheckpointCallback.get_model(result.checkpoint)
    assert booster.current_iteration() == 6
    assert result.metrics["training_iteration"] == 6
    assert _logloss(booster) == pytest.approx(result.metrics["loss"], abs=1e-6)


def test_unknown_metric_name_fails_the_trial_naming_the_available_ones(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        x, y, _, _ = _data()
        dtrain = lgb.Dataset(x, label=y)
        lgb.train(
            {"objective": "binary", "verbose": -1},
            dtrain,
            num_boost_round=2,
            valid_sets=[dtrain],
            valid_names=["train"],
            callbacks=[TuneReportCheckpointCallback(metrics={"loss": "valid-auc"})],
        )

    results = Tuner(train, run_config=RunConfig(storage_path=str(tmp_path), name="bad")).fit()
    assert len(results.errors) == 1
    message = str(results.errors[0])
    assert "'valid-auc' is not a metric that LightGBM reported" in message
    assert "['train-binary_logloss']" in message


def test_bad_arguments_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"frequency=1.5"):
        TuneReportCheckpointCallback(frequency=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"metrics=\{'a': 1\}"):
        TuneReportCheckpointCallback(metrics={"a": 1})  # type: ignore[dict-item]
