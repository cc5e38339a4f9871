"""XGBoost callbacks that report each boosting round to Tune (``ray.tune.integration.xgboost``).

Works with ``xgboost.train`` and with the scikit-learn API (``XGBClassifier(callbacks=
[...])``). Metrics are named ``<dataset>-<metric>`` as XGBoost logs them, e.g.
``eval-logloss`` for ``evals=[(dvalid, "eval")]`` or ``validation_0-logloss`` for the
scikit-learn API's first ``eval_set``.

Example:
    >>> from fasttune.integration.xgboost import TuneReportCheckpointCallback
    >>> callback = TuneReportCheckpointCallback(
    ...     metrics={"loss": "eval-logloss"}, frequency=2, checkpoint_at_end=True
    ... )
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.checkpoint import Checkpoint
from fasttune.integration._metrics import (
    MetricsArg,
    PostprocessFn,
    check_callback_args,
    metrics_mapping,
    postprocess,
    select_metrics,
)
from fasttune.trainable.session import report

xgb = import_optional("xgboost", extra="xgboost", feature="fasttune.integration.xgboost")

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]

_TrainingCallback: Any = xgb.callback.TrainingCallback


def _latest(evals_log: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    """The last value of each ``<dataset>-<metric>`` in XGBoost's evaluation log."""
    out: dict[str, Any] = {}
    for data, by_metric in evals_log.items():
        for metric, values in by_metric.items():
            if values:
                last = values[-1]
                # xgboost.cv logs (mean, std) per round
                out[f"{data}-{metric}"] = list(last) if isinstance(last, tuple) else last
    return out


class TuneReportCheckpointCallback(_TrainingCallback):
    """Report XGBoost's evaluation metrics to Tune after each round, with checkpoints.

    Args:
        metrics: What to report: ``None`` (every ``<dataset>-<metric>`` XGBoost logs),
            one name, a list of names, or ``{name_in_tune: name_in_xgboost}`` to rename.
        filename: The model file's name inside each checkpoint (``model.ubj``).
        frequency: Save a checkpoint every that many rounds (0: none during training).
        checkpoint_at_end: Save a checkpoint after the last round.
        results_postprocessing_fn: Called with the metrics dict before it is reported;
            returns the dict to report (e.g. to average ``xgboost.cv`` folds).

    Raises:
        TypeError, ValueError: On a bad argument, naming it.
    """

    CHECKPOINT_NAME = "model.ubj"

    def __init__(
        self,
        metrics: MetricsArg = None,
        filename: str = CHECKPOINT_NAME,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: PostprocessFn | None = None,
    ) -> None:
        owner = type(self).__name__
        self._mapping = metrics_mapping(owner, metrics)
        check_callback_args(owner, filename, frequency, results_postprocessing_fn)
        self._filename = filename
        self._frequency = frequency
        self._checkpoint_at_end = bool(checkpoint_at_end)
        self._results_postprocessing_fn = results_postprocessing_fn
        self._evals_log: dict[str, Any] | None = None
        self._checkpointed_rounds: int | None = None  # the model's rounds when last saved

    @classmethod
    def get_model(cls, checkpoint: Checkpoint, filename: str = CHECKPOINT_NAME) -> Any:
        """Load the ``xgboost.Booster`` saved in ``checkpoint`` by this callback."""
        booster = xgb.Booster()
        with checkpoint.as_directory() as path:
            model_file = os.path.join(path, filename)
            if not os.path.exists(model_file):
                raise FileNotFoundError(
                    f"get_model(checkpoint, filename={filename!r}): the checkpoint at "
                    f"{checkpoint.path} has no {filename!r} (it holds "
                    f"{sorted(os.listdir(path))}); pass the filename the callback used."
                )
            booster.load_model(model_file)
        return booster

    def _metrics(self) -> dict[str, Any]:
        owner = type(self).__name__
        available = _latest(self._evals_log or {})
        chosen = select_metrics(owner, "XGBoost", available, self._mapping)
        return postprocess(owner, self._results_postprocessing_fn, chosen)

    @contextmanager
    def _checkpoint(self, model: Any) -> Iterator[Checkpoint]:
        with tempfile.TemporaryDirectory(prefix="xgb_ckpt_") as tmp:
            model.save_model(os.path.join(tmp, self._filename))
            yield Checkpoint.from_directory(tmp)

    def _save_and_report(self, model: Any, metrics: dict[str, Any]) -> None:
        with self._checkpoint(model) as checkpoint:
            # epochs restart at 0 when training continues from a model: count rounds
            self._checkpointed_rounds = model.num_boosted_rounds()
            report(metrics, checkpoint=checkpoint)

    def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, Any]) -> bool:
        """Report this round's metrics (and a checkpoint every ``frequency`` rounds)."""
        self._evals_log = evals_log
        metrics = self._metrics()
        if self._frequency and (epoch + 1) % self._frequency == 0:
            self._save_and_report(model, metrics)
        else:
            report(metrics)
        return False  # never asks XGBoost to stop: Tune stops the trial itself

    def after_training(self, model: Any) -> Any:
        """Report a final checkpoint if ``checkpoint_at_end`` and the last round has none."""
        if not self._checkpoint_at_end:
            return model
        if self._checkpointed_rounds == model.num_boosted_rounds():
            return model
        self._save_and_report(model, self._metrics() if self._evals_log else {})
        return model


class TuneReportCallback(TuneReportCheckpointCallback):
    """Report XGBoost's metrics to Tune after each round, without checkpoints.

    Args:
        metrics: As for :class:`TuneReportCheckpointCallback`.
        results_postprocessing_fn: As for :class:`TuneReportCheckpointCallback`.
    """

    def __init__(
        self,
        metrics: MetricsArg = None,
        results_postprocessing_fn: PostprocessFn | None = None,
    ) -> None:
        super().__init__(
            metrics=metrics,
            frequency=0,
            checkpoint_at_end=False,
            results_postprocessing_fn=results_postprocessing_fn,
        )
