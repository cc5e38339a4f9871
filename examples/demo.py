"""A real small tuning run: logistic regression trained by SGD, tuned with fasttune.

Run with ``make demo``. Trials run in parallel worker processes; the live table
shows their progress; results, checkpoints and TensorBoard files land under
``$FASTTUNE_STORAGE_PATH`` (default ``~/fasttune_results``).
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

import fasttune as tune


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two noisy Gaussian blobs in 20 dimensions, split into train and validation."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(24000, 20))
    w = rng.normal(size=20)
    y = (x @ w + rng.normal(scale=2.0, size=24000) > 0).astype(float)
    return x[:20000], y[:20000], x[20000:], y[20000:]


def train_logreg(config):
    """SGD with momentum and L2 on the logistic loss; reports validation accuracy."""
    x_train, y_train, x_val, y_val = make_data()
    w, velocity, start = np.zeros(x_train.shape[1]), np.zeros(x_train.shape[1]), 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:  # resume after a failure or a restored experiment
        with checkpoint.as_directory() as d:
            state = np.load(os.path.join(d, "state.npz"))
            w, velocity, start = state["w"], state["velocity"], int(state["epoch"]) + 1
    rng = np.random.default_rng(start)
    for epoch in range(start, config["epochs"]):
        order = rng.permutation(len(x_train))
        for batch in np.array_split(order, len(order) // config["batch_size"]):
            p = 1 / (1 + np.exp(-x_train[batch] @ w))
            grad = x_train[batch].T @ (p - y_train[batch]) / len(batch) + config["l2"] * w
            velocity = config["momentum"] * velocity - config["lr"] * grad
            w = w + velocity
        p_val = 1 / (1 + np.exp(-x_val @ w))
        loss = -np.mean(y_val * np.log(p_val + 1e-9) + (1 - y_val) * np.log(1 - p_val + 1e-9))
        accuracy = float(np.mean((p_val > 0.5) == y_val))
        with tempfile.TemporaryDirectory() as d:
            np.savez(os.path.join(d, "state.npz"), w=w, velocity=velocity, epoch=epoch)
            tune.report(
                {"val_loss": float(loss), "val_accuracy": accuracy},
                checkpoint=tune.Checkpoint.from_directory(d),
            )


def main() -> None:
    tuner = tune.Tuner(
        train_logreg,
        param_space={
            "lr": tune.loguniform(1e-3, 1.0),
            "momentum": tune.grid_search([0.0, 0.9]),
            "batch_size": tune.choice([32, 128]),
            "l2": tune.loguniform(1e-5, 1e-2),
            "epochs": 30,
        },
        tune_config=tune.TuneConfig(metric="val_accuracy", mode="max", num_samples=8, seed=0),
        run_config=tune.RunConfig(
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="val_accuracy"
            ),
            failure_config=tune.FailureConfig(max_failures=2),
        ),
    )
    results = tuner.fit()
    best = results.get_best_result()
    print(f"\nBest config: {best.config}")
    print(f"Best validation accuracy: {best.metrics['val_accuracy']:.4f}")
    print(f"Best checkpoint: {best.checkpoint}")
    print(f"All results: {results.experiment_path}")


if __name__ == "__main__":
    main()
