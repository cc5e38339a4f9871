"""fasttune.integration.pytorch_lightning through the Tuner with real Lightning (issue 11)."""

from __future__ import annotations

import os
from typing import Any

import pytest

import fasttune as tune
from fasttune import FailureConfig, RunConfig, TuneConfig, Tuner

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning.pytorch")
pytest.importorskip("sklearn")

from fasttune.integration.pytorch_lightning import (  # noqa: E402
    TuneReportCallback,
    TuneReportCheckpointCallback,
)

_EPOCHS = 3


def _loaders() -> tuple[Any, Any]:
    from sklearn.datasets import make_classification
    from torch.utils.data import DataLoader, TensorDataset

    x, y = make_classification(n_samples=128, n_features=6, random_state=0)
    xs, ys = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    train = TensorDataset(xs[:96], ys[:96])
    valid = TensorDataset(xs[96:], ys[96:])
    return DataLoader(train, batch_size=32), DataLoader(valid, batch_size=32)


class _Classifier(L.LightningModule):  # type: ignore[misc]
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.layer = torch.nn.Linear(6, 1)

    def _loss(self, batch: Any) -> Any:
        x, y = batch
        logits = self.layer(x).squeeze(-1)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, y), logits, y

    def training_step(self, batch: Any, index: int) -> Any:
        return self._loss(batch)[0]

    def validation_step(self, batch: Any, index: int) -> None:
        loss, logits, y = self._loss(batch)
        self.log("val_loss", loss)
        self.log("val_acc", ((logits > 0).float() == y).float().mean())

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def _trainer(callbacks: list[Any], fail_marker: str | None = None) -> Any:
    extra: list[Any] = []
    if fail_marker is not None:
        extra.append(_FailOnce(fail_marker))
    return L.Trainer(
        max_epochs=_EPOCHS,
        callbacks=[*callbacks, *extra],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=1,
    )


class _FailOnce(L.Callback):  # type: ignore[misc]
    """Fails the trial once, after the second validation, to test the restore."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.sanity_checking or trainer.current_epoch != 1 or os.path.exists(self.marker):
            return
        open(self.marker, "w").close()
        raise RuntimeError("worker lost")


def _train(config: dict[str, Any]) -> None:
    train, valid = _loaders()
    model = _Classifier(config["lr"])
    trainer = _trainer(
        [TuneReportCheckpointCallback({"loss": "val_loss", "acc": "val_acc"})],
        config.get("marker"),
    )
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        trainer.fit(model, train, valid)
    else:
        with checkpoint.as_directory() as path:
            trainer.fit(model, train, valid, ckpt_path=os.path.join(path, "checkpoint"))


def test_lightning_reports_each_validation_with_checkpoints_and_restores(tmp_path: Any) -> None:
    marker = str(tmp_path / "failed_once")
    results = Tuner(
        _train,
        param_space={"lr": tune.grid_search([0.05, 0.5]), "marker": marker},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(
            storage_path=str(tmp_path), name="pl", failure_config=FailureConfig(max_failures=1)
        ),
    ).fit()
    assert not results.errors
    assert os.path.exists(marker)  # one trial failed once and was resumed
    for result in results:
        # one report per epoch's validation (the sanity check is not reported)
        assert result.metrics["training_iteration"] == _EPOCHS
        assert isinstance(result.metrics["loss"], float)
        assert 0.0 <= result.metrics["acc"] <= 1.0
        with result.checkpoint.as_directory() as path:
            saved = torch.load(os.path.join(path, "checkpoint"), weights_only=False)
        assert saved["epoch"] == _EPOCHS - 1  # the last epoch's checkpoint
        model = _Classifier.load_from_checkpoint(os.path.join(path, "checkpoint"), lr=0.1)
        assert model.layer.weight.shape == (1, 6)
    losses = [r.metrics["loss"] for r in results]
    assert results.get_best_result().metrics["loss"] == min(losses)


def test_report_only_callback_and_unknown_metric(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        train_loader, valid = _loaders()
        callback = TuneReportCallback(metrics=config["metrics"], on=config["on"])
        _trainer([callback]).fit(_Classifier(0.1), train_loader, valid)

    def run(name: str, metrics: Any, on: str = "validation_end") -> Any:
        return Tuner(
            train,
            param_space={"metrics": metrics, "on": on},
            run_config=RunConfig(storage_path=str(tmp_path), name=name, verbose=0),
        ).fit()[0]

    ok = run("known", ["val_loss"])
    assert ok.checkpoint is None and ok.metrics["training_iteration"] == _EPOCHS
    assert set(ok.metrics) >= {"val_loss"} and "val_acc" not in ok.metrics
    # A metric Lightning has not logged is left out with a warning, as on Ray Tune: the
    # trial reports the others (it used to fail).
    partly = run("typo", {"loss": "val_loss", "typo": "val_los"})
    assert partly.error is None and partly.metrics["training_iteration"] == _EPOCHS
    assert "loss" in partly.metrics and "typo" not in partly.metrics
    # A hook where none is logged yet reports nothing: val_loss exists from the first
    # validation on, so the batches of epochs 2 and 3 report (3 batches each).
    later = run("later", ["val_loss"], on="train_batch_end")
    assert later.error is None and later.metrics["training_iteration"] == 2 * 3


def test_bad_arguments_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"on='validation_ends'.*validation_end"):
        TuneReportCheckpointCallback(on="validation_ends")
    with pytest.raises(TypeError, match=r"metrics=5"):
        TuneReportCheckpointCallback(metrics=5)  # type: ignore[arg-type]


def test_lightning_module_path_is_the_same_callback() -> None:
    from fasttune.integration import lightning

    assert lightning.TuneReportCheckpointCallback is TuneReportCheckpointCallback
    pl = pytest.importorskip("pytorch_lightning")
    # a pytorch_lightning Trainer accepts it too
    trainer = pl.Trainer(
        max_epochs=1, callbacks=[TuneReportCallback()], logger=False, enable_progress_bar=False
    )
    assert any(isinstance(c, TuneReportCallback) for c in trainer.callbacks)
