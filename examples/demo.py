"""A small real tuning run: random + grid search over a function trainable.

Run with ``make demo``. Each configuration trains in its own Trainable, with real
checkpoints and result files under ``$FASTTUNE_STORAGE_PATH`` (default
``~/fasttune_results``).
"""

from __future__ import annotations

import json
import os
import tempfile

import fasttune as tune
from fasttune.search.variant_generator import expand_param_space
from fasttune.trainable import wrap_function


def train_quadratic(config):
    """Gradient descent on (x - 3)^2 with a tuned learning rate and momentum."""
    x, velocity = 0.0, 0.0
    for step in range(config["steps"]):
        grad = 2 * (x - 3)
        velocity = config["momentum"] * velocity - config["lr"] * grad
        x += velocity
        checkpoint = None
        if step % 10 == 9:
            tmp = tempfile.mkdtemp()
            with open(os.path.join(tmp, "state.json"), "w") as f:
                json.dump({"x": x, "velocity": velocity}, f)
            checkpoint = tune.Checkpoint.from_directory(tmp)
        tune.report({"loss": (x - 3) ** 2, "x": x}, checkpoint=checkpoint)


def main() -> None:
    space = {
        "lr": tune.loguniform(1e-3, 0.5),
        "momentum": tune.grid_search([0.0, 0.5, 0.9]),
        "steps": 30,
    }
    trainable_cls = wrap_function(train_quadratic)
    rows = []
    for tag, config in expand_param_space(space, num_samples=4, seed=7):
        trainable = trainable_cls(config=config)
        result = {}
        while not result.get("done"):
            result = trainable.train()
        trainable.stop()
        rows.append((result["loss"], tag, trainable.logdir))

    rows.sort()
    print(f"{'loss':>12}  {'trial':<32}  logdir")
    for loss, tag, logdir in rows:
        print(f"{loss:12.3e}  {tag:<32}  {logdir}")
    best_loss, best_tag, best_dir = rows[0]
    print(f"\nBest: {best_tag} with loss {best_loss:.3e}; results in {best_dir}")


if __name__ == "__main__":
    main()
