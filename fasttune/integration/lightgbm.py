"""LightGBM callbacks that report each boosting round to Tune (``ray.tune.integration.lightgbm``).

Works with ``lightgbm.train`` and with the scikit-learn API
(``LGBMClassifier().fit(..., callbacks=[...])``). Metrics are named
``<dataset>-<metric>`` as LightGBM evaluates them, e.g. ``valid-binary_logloss`` for
``valid_sets=[dvalid], valid_names=["valid"]`` or ``valid_0-binary_logloss`` for the
scikit-learn API's first ``eval_set``; under ``lightgbm.cv``, ``-mean`` and ``-stdv``.

Example:
    >>> from fasttune.integration.lightgbm import TuneReportCheckpointCallback
    >>> callback = TuneReportCheckpointCallback(metrics={"loss": "valid-binary_logloss"})
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

lgb = import_optional("lightgbm", extra="lightgbm", feature="fasttune.integration.lightgbm")

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]


def _evaluation(env: Any) -> dict[str, Any]:
    """``<dataset>-<metric>`` -> value for this round (``-mean``/``-stdv`` under cv)."""
    out: dict[str, Any] = {}
    for entry in env.evaluation_result_list or ():
        data, metric, value = entry[0], entry[1], entry[2]
        if len(entry) == 5:  # lightgbm.cv: (data, metric, mean, higher_better, stdv)
            out[f"{data}-{metric}-mean"] = value
            out[f"{data}-{metric}-stdv"] = entry[4]
        else:
            out[f"{data}-{metric}"] = value
    return out


class TuneReportCheckpointCallback:
    """Report LightGBM's evaluation metrics to Tune after each round, with checkpoints.

    Args:
        metrics: What to report: ``None`` (every ``<dataset>-<metric>`` LightGBM
            evaluates), one name, a list of names, or ``{name_in_tune: name_in_lightgbm}``.
        filename: The model file's name inside each checkpoint (``model.txt``).
        frequency: Save a checkpoint every that many rounds (0: none during training).
        checkpoint_at_end: Save a checkpoint with the last round's result.
        results_postprocessing_fn: Called with the metrics dict before it is reported;
            returns the dict to report.

    Raises:
        TypeError, ValueError: On a bad argument, naming it.
    """

    CHECKPOINT_NAME = "model.txt"
    order = 20  # LightGBM runs callbacks by this attribute, after its own (early stopping: 30)

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

    @classmethod
    def get_model(cls, checkpoint: Checkpoint, filename: str = CHECKPOINT_NAME) -> Any:
        """Load the ``lightgbm.Booster`` saved in ``checkpoint`` by this callback."""
        with checkpoint.as_directory() as path:
            model_file = os.path.join(path, filename)
            if not os.path.exists(model_file):
                raise FileNotFoundError(
                    f"get_model(checkpoint, filename={filename!r}): the checkpoint at "
                    f"{checkpoint.path} has no {filename!r} (it holds "
                    f"{sorted(os.listdir(path))}); pass the filename the callback used."
                )
            return lgb.Booster(model_file=model_file)

    @contextmanager
    def _checkpoint(self, env: Any) -> Iterator[Checkpoint]:
        with tempfile.TemporaryDirectory(prefix="lgb_ckpt_") as tmp:
            env.model.save_model(os.path.join(tmp, self._filename))
            yield Checkpoint.from_directory(tmp)

    def __call__(self, env: Any) -> None:
        owner = type(self).__name__
        chosen = select_metrics(owner, "LightGBM", _evaluation(env), self._mapping)
        metrics = postprocess(owner, self._results_postprocessing_fn, chosen)
        last = env.iteration == env.end_iteration - 1
        if (last and self._checkpoint_at_end) or (
            self._frequency and (env.iteration + 1) % self._frequency == 0
        ):
            with self._checkpoint(env) as checkpoint:
                report(metrics, checkpoint=checkpoint)
        else:
            report(metrics)


class TuneReportCallback(TuneReportCheckpointCallback):
    """Report LightGBM's metrics to Tune after each round, without checkpoints.

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
