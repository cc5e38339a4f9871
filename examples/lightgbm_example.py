"""Tune LightGBM, reporting each boosting round through Tune's callback.

The Ray Tune version of this script differs only in its imports (``ray.tune`` ->
``fasttune``). Needs ``pip install "fasttune[lightgbm]" scikit-learn``.

    python examples/lightgbm_example.py
"""

from __future__ import annotations

import lightgbm as lgb
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

import fasttune as tune
from fasttune.integration.lightgbm import TuneReportCheckpointCallback


def train_lgbm(config: dict) -> None:
    x, y = make_classification(n_samples=600, n_features=12, n_informative=6, random_state=0)
    x_train, x_valid, y_train, y_valid = train_test_split(x, y, test_size=0.25, random_state=0)
    train = lgb.Dataset(x_train, label=y_train)
    valid = lgb.Dataset(x_valid, label=y_valid, reference=train)
    lgb.train(
        config,
        train,
        num_boost_round=20,
        valid_sets=[valid],
        valid_names=["eval"],
        # report eval-binary_logloss and eval-binary_error, a checkpoint at the end
        callbacks=[TuneReportCheckpointCallback({"loss": "eval-binary_logloss"})],
    )


def main() -> None:
    search_space = {
        "objective": "binary",
        "metric": ["binary_logloss", "binary_error"],
        "verbose": -1,
        "num_threads": 1,
        "boosting_type": tune.grid_search(["gbdt", "dart"]),
        "num_leaves": tune.randint(4, 32),
        "learning_rate": tune.loguniform(1e-3, 2e-1),
    }
    results = tune.Tuner(
        train_lgbm,
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=2),
        param_space=search_space,
        run_config=tune.RunConfig(name="lightgbm_example", verbose=1),
    ).fit()
    best = results.get_best_result()
    booster = TuneReportCheckpointCallback.get_model(best.checkpoint)
    print(f"best config: {best.config}")
    print(f"best loss: {best.metrics['loss']:.4f}")
    print(f"best model: {booster.current_iteration()} rounds")


if __name__ == "__main__":
    main()
