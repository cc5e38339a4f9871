"""Log every trial to MLflow: from the driver (the callback), or from inside the trainable.

The Ray Tune version of this script differs only in its imports (``ray.tune`` and
``ray.air.integrations.mlflow`` -> ``fasttune``). Needs ``pip install
"fasttune[mlflow]"``. The runs go to a local SQLite store, ``mlflow.db`` in the working
directory; see them with ``mlflow ui --backend-store-uri sqlite:///mlflow.db``.

    python examples/mlflow_example.py
"""

from __future__ import annotations

import os
import time

import mlflow

import fasttune as tune
from fasttune.air.integrations.mlflow import MLflowLoggerCallback, setup_mlflow

TRACKING_URI = f"sqlite:///{os.path.abspath('mlflow.db')}"


def objective(step: int, width: float, height: float) -> float:
    return (0.1 + width * step / 100) ** (-1) + height * 0.1


def train_function(config: dict) -> None:
    """Reports to Tune; the callback logs each result to MLflow from the driver."""
    for step in range(5):
        tune.report({"iterations": step, "mean_loss": objective(step, **config)})
        time.sleep(0.01)


def train_function_mlflow(config: dict) -> None:
    """Logs to MLflow itself, in a run started by setup_mlflow."""
    ml = setup_mlflow(
        {k: v for k, v in config.items() if k != "tracking_uri"},
        tracking_uri=config["tracking_uri"],
        experiment_name="fasttune_example_inside",
        create_experiment_if_not_exists=True,
    )
    for step in range(5):
        loss = objective(step, config["width"], config["height"])
        ml.log_metrics({"mean_loss": loss}, step=step)
        tune.report({"iterations": step, "mean_loss": loss})
    ml.end_run()


def main() -> None:
    mlflow.tracking.MlflowClient(tracking_uri=TRACKING_URI).search_experiments()  # schema
    space = {"width": tune.randint(0, 100), "height": tune.randint(0, 100)}
    tune.Tuner(
        train_function,
        tune_config=tune.TuneConfig(metric="mean_loss", mode="min", num_samples=2),
        run_config=tune.RunConfig(
            name="mlflow_example",
            verbose=1,
            callbacks=[
                MLflowLoggerCallback(
                    tracking_uri=TRACKING_URI,
                    experiment_name="fasttune_example",
                    save_artifact=True,
                )
            ],
        ),
        param_space=space,
    ).fit()
    tune.Tuner(
        train_function_mlflow,
        tune_config=tune.TuneConfig(metric="mean_loss", mode="min", num_samples=1),
        run_config=tune.RunConfig(name="mlflow_example_inside", verbose=1),
        param_space={**space, "tracking_uri": TRACKING_URI},
    ).fit()
    client = mlflow.tracking.MlflowClient(tracking_uri=TRACKING_URI)
    for name in ("fasttune_example", "fasttune_example_inside"):
        experiment = client.get_experiment_by_name(name)
        runs = client.search_runs([experiment.experiment_id])
        best = min(runs, key=lambda r: r.data.metrics["mean_loss"])
        print(
            f"MLflow experiment {name}: {len(runs)} runs, best mean_loss "
            f"{best.data.metrics['mean_loss']:.4f} with {best.data.params}"
        )


if __name__ == "__main__":
    main()
