"""Tune XGBoost with ASHA, reporting each boosting round through Tune's callback.

The Ray Tune version of this script differs only in its imports (``ray.tune`` ->
``fasttune``). Needs ``pip install "fasttune[xgboost]" scikit-learn``.

    python examples/xgboost_example.py
"""

from __future__ import annotations

import xgboost as xgb
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

import fasttune as tune
from fasttune.integration.xgboost import TuneReportCheckpointCallback
from fasttune.schedulers import ASHAScheduler


def train_breast_cancer_like(config: dict) -> None:
    x, y = make_classification(n_samples=600, n_features=12, n_informative=6, random_state=0)
    x_train, x_valid, y_train, y_valid = train_test_split(x, y, test_size=0.25, random_state=0)
    train = xgb.DMatrix(x_train, label=y_train)
    valid = xgb.DMatrix(x_valid, label=y_valid)
    xgb.train(
        config,
        train,
        num_boost_round=20,
        evals=[(valid, "eval")],
        verbose_eval=False,
        # report eval-logloss and eval-error each round, with a checkpoint every 5 rounds
        callbacks=[TuneReportCheckpointCallback(frequency=5)],
    )


def main() -> None:
    search_space = {
        "objective": "binary:logistic",
        "eval_metric": ["logloss", "error"],
        "max_depth": tune.randint(1, 7),
        "min_child_weight": tune.choice([1, 2, 3]),
        "subsample": tune.uniform(0.5, 1.0),
        "eta": tune.loguniform(1e-3, 3e-1),
        "nthread": 1,
    }
    tuner = tune.Tuner(
        train_breast_cancer_like,
        tune_config=tune.TuneConfig(
            metric="eval-logloss",
            mode="min",
            scheduler=ASHAScheduler(max_t=20, grace_period=5),
            num_samples=6,
        ),
        param_space=search_space,
        run_config=tune.RunConfig(name="xgboost_example", verbose=1),
    )
    results = tuner.fit()
    best = results.get_best_result()
    model = TuneReportCheckpointCallback.get_model(best.checkpoint)
    print(f"best config: {best.config}")
    print(f"best eval-logloss: {best.metrics['eval-logloss']:.4f}")
    print(f"best model: {model.num_boosted_rounds()} rounds")


if __name__ == "__main__":
    main()
