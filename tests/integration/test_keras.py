"""fasttune.integration.keras through the Tuner with real Keras 3 on torch (issue 11)."""

from __future__ import annotations

import os
from typing import Any

import pytest

# Keras 3 picks its backend once, at import: torch is the one installed here. The
# workers inherit the environment, so they use torch as well.
os.environ["KERAS_BACKEND"] = "torch"

import fasttune as tune
from fasttune import FailureConfig, RunConfig, TuneConfig, Tuner

pytest.importorskip("torch")
keras = pytest.importorskip("keras")

from fasttune.air.integrations.keras import ReportCheckpointCallback  # noqa: E402
from fasttune.integration.keras import (  # noqa: E402
    TuneReportCallback,
    TuneReportCheckpointCallback,
)

_EPOCHS = 3
_BATCH = 16
_SAMPLES = 64  # 48 to train (3 batches per epoch), 16 to validate


def _data() -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(_SAMPLES, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 1.0]) > 0).astype("float32")
    return x, y


def _model(lr: float) -> Any:
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile(
        optimizer=keras.optimizers.SGD(lr), loss="binary_crossentropy", metrics=["accuracy"]
    )
    return model


class _FailOnce(keras.callbacks.Callback):  # type: ignore[misc]
    """Fails the trial once, after the second epoch's report, to test the restore."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        if epoch == 1 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError("worker lost")


def _fit(model: Any, callbacks: list[Any], initial_epoch: int = 0) -> None:
    x, y = _data()
    model.fit(
        x,
        y,
        batch_size=_BATCH,
        epochs=_EPOCHS,
        initial_epoch=initial_epoch,
        validation_split=0.25,
        shuffle=False,
        verbose=0,
        callbacks=callbacks,
    )


def _train(config: dict[str, Any]) -> None:
    callbacks: list[Any] = [
        TuneReportCheckpointCallback({"loss": "val_loss", "acc": "val_accuracy"})
    ]
    if config.get("marker"):
        callbacks.append(_FailOnce(config["marker"]))
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        _fit(_model(config["lr"]), callbacks)
        return
    with checkpoint.as_directory() as path:
        model = keras.models.load_model(os.path.join(path, "checkpoint.keras"))
    done = int(model.optimizer.iterations) // (48 // _BATCH)  # epochs already trained
    with open(config["marker"] + ".restored", "w") as f:
        f.write(str(done))
    _fit(model, callbacks, initial_epoch=done)


def test_keras_reports_each_epoch_with_checkpoints_and_restores(tmp_path: Any) -> None:
    marker = str(tmp_path / "failed_once")
    results = Tuner(
        _train,
        param_space={"lr": tune.grid_search([0.05, 0.5]), "marker": marker},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(
            storage_path=str(tmp_path), name="keras", failure_config=FailureConfig(max_failures=1)
        ),
    ).fit()
    assert not results.errors
    # one trial failed after its second epoch and went on from that epoch's checkpoint
    with open(marker + ".restored") as f:
        assert f.read() == "2"
    for result in results:
        assert result.metrics["training_iteration"] == _EPOCHS
        assert list(result.metrics_dataframe["training_iteration"]) == [1, 2, 3]
        assert isinstance(result.metrics["loss"], float)
        assert 0.0 <= result.metrics["acc"] <= 1.0
        with result.checkpoint.as_directory() as path:
            model = keras.models.load_model(os.path.join(path, "checkpoint.keras"))
        # the last epoch's model: three epochs of three batches each
        assert int(model.optimizer.iterations) == _EPOCHS * 3
        x, y = _data()
        loss = model.evaluate(x[48:], y[48:], verbose=0, return_dict=True)["loss"]
        assert loss == pytest.approx(result.metrics["loss"], rel=1e-4)
    losses = [r.metrics["loss"] for r in results]
    assert results.get_best_result().metrics["loss"] == min(losses)


def test_report_only_callback_frequency_and_unknown_metric(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        kind, arg = config["callback"]
        if kind == "report":
            callback: Any = TuneReportCallback(metrics=arg, on="epoch_end")
        else:  # a checkpoint every second epoch, metrics every epoch
            callback = TuneReportCheckpointCallback(metrics=arg, frequency=2)
        _fit(_model(0.1), [callback])

    results = Tuner(
        train,
        param_space={
            "callback": tune.grid_search(
                [("report", ["val_loss"]), ("report", {"loss": "val_los"}), ("ckpt", "loss")]
            )
        },
        run_config=RunConfig(storage_path=str(tmp_path), name="ro"),
    ).fit()
    assert len(results.errors) == 1
    message = str(results.errors[0])
    assert "'val_los' is not a metric that Keras reported" in message
    assert "['accuracy', 'loss', 'val_accuracy', 'val_loss']" in message
    ok = [r for r in results if r.error is None]
    report_only = next(r for r in ok if r.config["callback"][0] == "report")
    assert report_only.checkpoint is None
    assert report_only.metrics["training_iteration"] == _EPOCHS
    assert "val_loss" in report_only.metrics and "val_accuracy" not in report_only.metrics
    every_second = next(r for r in ok if r.config["callback"][0] == "ckpt")
    assert every_second.metrics["training_iteration"] == _EPOCHS
    # epochs 1, 2, 3: the checkpoint is epoch 2's, the only one saved
    assert [it for _, it in _checkpoint_iterations(every_second)] == [2]


def _checkpoint_iterations(result: Any) -> list[tuple[Any, int]]:
    return [(c, int(m["training_iteration"])) for c, m in result.best_checkpoints]


def test_air_report_checkpoint_callback_saves_model_keras(tmp_path: Any) -> None:
    def train(config: dict[str, Any]) -> None:
        callback = ReportCheckpointCallback(
            checkpoint_on="train_end", report_metrics_on="epoch_end", metrics=["loss"]
        )
        _fit(_model(0.1), [callback])

    (result,) = Tuner(train, run_config=RunConfig(storage_path=str(tmp_path), name="air")).fit()
    assert result.error is None
    # one report per epoch, and one more with the checkpoint at the end of training
    assert result.metrics["training_iteration"] == _EPOCHS + 1
    assert set(result.metrics) >= {"loss"} and "val_loss" not in result.metrics
    with result.checkpoint.as_directory() as path:
        assert "model.keras" in os.listdir(path)
        model = keras.models.load_model(os.path.join(path, "model.keras"))
    assert int(model.optimizer.iterations) == _EPOCHS * 3


def test_bad_arguments_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"on='epoch_ends'.*'epoch_end'"):
        TuneReportCheckpointCallback(on="epoch_ends")
    with pytest.raises(ValueError, match=r"filename='model'.*'\.keras'"):
        TuneReportCheckpointCallback(filename="model")
    with pytest.raises(ValueError, match=r"frequency=\[1, 2\].*one per hook"):
        TuneReportCheckpointCallback(frequency=[1, 2], on="epoch_end")
    with pytest.raises(ValueError, match=r"frequency=0"):
        TuneReportCheckpointCallback(frequency=0)
    with pytest.raises(TypeError, match=r"metrics=3"):
        TuneReportCallback(metrics=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"checkpoint_on='batch_end'"):
        ReportCheckpointCallback(checkpoint_on="batch_end")


def test_a_missing_backend_says_how_to_choose_one() -> None:
    import subprocess
    import sys

    env = {**os.environ, "KERAS_BACKEND": "tensorflow"}  # not installed here
    out = subprocess.run(
        [sys.executable, "-c", "import fasttune.integration.keras"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode != 0
    assert "cannot load its backend 'tensorflow'" in out.stderr
    assert "KERAS_BACKEND=torch" in out.stderr
