"""Tune a PyTorch Lightning classifier, reporting each validation through Tune's callback.

The Ray Tune version of this script differs only in its imports (``ray.tune`` ->
``fasttune``). Needs ``pip install "fasttune[lightning]" scikit-learn`` and torch.

    python examples/lightning_example.py
"""

from __future__ import annotations

import os

import lightning.pytorch as pl
import torch
from sklearn.datasets import make_classification
from torch.utils.data import DataLoader, TensorDataset

import fasttune as tune
from fasttune.integration.pytorch_lightning import TuneReportCheckpointCallback


def loaders(batch_size: int) -> tuple[DataLoader, DataLoader]:
    x, y = make_classification(n_samples=256, n_features=8, random_state=0)
    xs, ys = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    train = TensorDataset(xs[:192], ys[:192])
    valid = TensorDataset(xs[192:], ys[192:])
    return DataLoader(train, batch_size=batch_size), DataLoader(valid, batch_size=64)


class Classifier(pl.LightningModule):
    def __init__(self, hidden: int, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
        )

    def _step(self, batch: tuple) -> tuple:
        x, y = batch
        logits = self.net(x).squeeze(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
        return loss, ((logits > 0).float() == y).float().mean()

    def training_step(self, batch: tuple, index: int) -> torch.Tensor:
        return self._step(batch)[0]

    def validation_step(self, batch: tuple, index: int) -> None:
        loss, acc = self._step(batch)
        self.log("val_loss", loss)
        self.log("val_acc", acc)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def train_classifier(config: dict) -> None:
    torch.set_num_threads(1)
    train, valid = loaders(config["batch_size"])
    trainer = pl.Trainer(
        max_epochs=3,
        callbacks=[TuneReportCheckpointCallback({"loss": "val_loss", "acc": "val_acc"})],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Classifier(config["hidden"], config["lr"])
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        trainer.fit(model, train, valid)
    else:  # resumed after a failure: go on from the last epoch's checkpoint
        with checkpoint.as_directory() as path:
            trainer.fit(model, train, valid, ckpt_path=os.path.join(path, "checkpoint"))


def main() -> None:
    results = tune.Tuner(
        train_classifier,
        param_space={
            "hidden": tune.choice([8, 32]),
            "lr": tune.loguniform(1e-3, 1e-1),
            "batch_size": tune.choice([32, 64]),
        },
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=2),
        run_config=tune.RunConfig(name="lightning_example", verbose=1),
    ).fit()
    best = results.get_best_result()
    print(f"best config: {best.config}")
    print(f"best val loss: {best.metrics['loss']:.4f}, accuracy {best.metrics['acc']:.3f}")
    with best.checkpoint.as_directory() as path:
        model = Classifier.load_from_checkpoint(
            os.path.join(path, "checkpoint"), hidden=best.config["hidden"], lr=0.0
        )
    print(f"best model: {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()
