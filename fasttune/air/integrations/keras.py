"""Keras 3 reporting and checkpointing for Tune (``ray.air.integrations.keras``).

Example:
    >>> from fasttune.air.integrations.keras import ReportCheckpointCallback
    >>> callback = ReportCheckpointCallback(metrics={"loss": "val_loss"})
"""

from __future__ import annotations

from fasttune.integration.keras import KerasReporter, check_hooks

__all__ = ["ReportCheckpointCallback"]

MODEL_FILENAME = "model.keras"


class ReportCheckpointCallback(KerasReporter):
    """Report Keras logs to Tune, and save the model as ``model.keras`` in a checkpoint.

    Metrics go with every checkpoint, even on a hook not in ``report_metrics_on``.

    Args:
        checkpoint_on: The Keras hook(s) that save a checkpoint (the hook's name less
            ``on_``, default ``"epoch_end"``).
        report_metrics_on: The Keras hook(s) that report metrics (default
            ``"epoch_end"``).
        metrics: What to report: ``None`` (every entry of Keras' logs), one name, a
            list of names, or ``{name_in_tune: name_in_keras}`` to rename.

    Raises:
        TypeError, ValueError: On a bad argument, naming it.

    Resume with ``keras.models.load_model(os.path.join(d, "model.keras"))`` where ``d``
    is the directory of ``fasttune.get_checkpoint()``.
    """

    def __init__(
        self,
        checkpoint_on: str | list[str] = "epoch_end",
        report_metrics_on: str | list[str] = "epoch_end",
        metrics: str | list[str] | dict[str, str] | None = None,
    ) -> None:
        owner = type(self).__name__
        saves = check_hooks(owner, "checkpoint_on", checkpoint_on)
        reports = check_hooks(owner, "report_metrics_on", report_metrics_on)
        super().__init__(
            owner,
            metrics,
            report_on=reports,
            checkpoint_every=dict.fromkeys(saves, 1),
            filename=MODEL_FILENAME,
        )
