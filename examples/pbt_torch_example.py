"""Population Based Training of a small PyTorch network.

Each trial trains the same MLP on synthetic data and checkpoints its weights and
optimizer every epoch; every few epochs PBT copies the best trials' checkpoints into
the worst ones and perturbs their learning rate and momentum. The Ray Tune version of
this script differs only in its imports (``ray.tune`` -> ``fasttune``). Needs torch.

    python examples/pbt_torch_example.py
"""

from __future__ import annotations

import os
import tempfile

import torch

import fasttune as tune
from fasttune.schedulers import PopulationBasedTraining


def make_data(seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 10, generator=generator)
    y = (x[:, :3].sum(dim=1) - x[:, 3] * x[:, 4] > 0).float()
    return x[:384], y[:384], x[384:], y[384:]


def train_mlp(config: dict) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x_train, y_train, x_valid, y_valid = make_data()
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    epoch = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:  # PBT exploited another trial, or this one resumed
        with checkpoint.as_directory() as path:
            state = torch.load(os.path.join(path, "state.pt"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        epoch = state["epoch"]
    for group in optimizer.param_groups:  # PBT may have changed them
        group["lr"], group["momentum"] = config["lr"], config["momentum"]
    loss_fn = torch.nn.BCEWithLogitsLoss()
    while True:
        model.train()
        for start in range(0, len(x_train), 32):
            optimizer.zero_grad()
            logits = model(x_train[start : start + 32]).squeeze(-1)
            loss_fn(logits, y_train[start : start + 32]).backward()
            optimizer.step()
        epoch += 1
        model.eval()
        with torch.no_grad():
            logits = model(x_valid).squeeze(-1)
            accuracy = ((logits > 0).float() == y_valid).float().mean().item()
        with tempfile.TemporaryDirectory() as tmp:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
            torch.save({**state, "epoch": epoch}, os.path.join(tmp, "state.pt"))
            tune.report(
                {"mean_accuracy": accuracy, "epoch": epoch},
                checkpoint=tune.Checkpoint.from_directory(tmp),
            )


def main() -> None:
    scheduler = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        hyperparam_mutations={
            "lr": tune.loguniform(1e-4, 1e-1),
            "momentum": [0.0, 0.5, 0.9],
        },
    )
    results = tune.Tuner(
        train_mlp,
        param_space={"lr": tune.loguniform(1e-3, 1e-1), "momentum": tune.choice([0.0, 0.9])},
        tune_config=tune.TuneConfig(
            metric="mean_accuracy", mode="max", scheduler=scheduler, num_samples=4
        ),
        run_config=tune.RunConfig(
            name="pbt_torch_example",
            stop={"training_iteration": 6},
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
            verbose=1,
        ),
    ).fit()
    best = results.get_best_result()
    print(f"best config: {best.config}")
    print(f"best mean_accuracy: {best.metrics['mean_accuracy']:.3f}")


if __name__ == "__main__":
    main()
