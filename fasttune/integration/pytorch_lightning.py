"""PyTorch Lightning callbacks reporting to Tune (``ray.tune.integration.pytorch_lightning``).

Built on ``lightning.pytorch.Callback`` when ``lightning`` is installed, else on
``pytorch_lightning.Callback``; either Trainer (``lightning.pytorch.Trainer`` or
``pytorch_lightning.Trainer``) accepts it.

Example:
    >>> from fasttune.integration.pytorch_lightning import TuneReportCheckpointCallback
    >>> callback = TuneReportCheckpointCallback(
    ...     metrics={"loss": "val_loss"}, filename="trainer.ckpt", on="validation_end"
    ... )
"""

from __future__ import annotations

import inspect
import logging
import os
import tempfile
from typing import Any

from fasttune._support.imports import MissingDependencyError, import_optional
from fasttune.checkpoint import Checkpoint
from fasttune.integration._metrics import MetricsArg, metrics_mapping
from fasttune.trainable.session import report

logger = logging.getLogger(__name__)

try:
    pl = import_optional("lightning.pytorch", extra="lightning")
except MissingDependencyError:
    pl = import_optional(
        "pytorch_lightning", extra="lightning", feature="fasttune.integration.pytorch_lightning"
    )

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]

_Callback: Any = pl.Callback

# Lightning's callback hooks, less the ``on_`` (``validation_end``, ``train_epoch_end``...).
_HOOKS = frozenset(
    name[3:]
    for name, _ in inspect.getmembers(pl.Callback, predicate=inspect.isfunction)
    if name.startswith("on_")
)


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "numel", lambda: 0)() == 1:
        return item()
    return value


class TuneReportCheckpointCallback(_Callback):
    """Report ``trainer.callback_metrics`` to Tune on a Lightning hook, with a checkpoint.

    Args:
        metrics: What to report: ``None`` (every entry of ``trainer.callback_metrics``),
            one name, a list of names, or ``{name_in_tune: name_in_lightning}``.
        filename: The Lightning checkpoint's file name inside each Tune checkpoint.
        save_checkpoints: Save a checkpoint with each report (False: metrics only).
        on: The hook(s) to report on, Lightning's hook names less the ``on_``
            (default ``"validation_end"``: once per validation run).

    Raises:
        TypeError, ValueError: On a bad argument, naming it.

    Resume from a Tune checkpoint with ``trainer.fit(model, ckpt_path=...)``::

        checkpoint = fasttune.get_checkpoint()
        if checkpoint:
            with checkpoint.as_directory() as d:
                trainer.fit(model, ckpt_path=os.path.join(d, "checkpoint"))
    """

    def __init__(
        self,
        metrics: MetricsArg = None,
        filename: str = "checkpoint",
        save_checkpoints: bool = True,
        on: str | list[str] = "validation_end",
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        self._mapping = metrics_mapping(owner, metrics)
        if not isinstance(filename, str) or not filename or "/" in filename:
            raise ValueError(
                f"{owner}(filename={filename!r}): filename must be a non-empty file name "
                "(no '/'), e.g. 'checkpoint'."
            )
        hooks = [on] if isinstance(on, str) else on
        if not isinstance(hooks, (list, tuple)) or not hooks:
            raise TypeError(f"{owner}(on={on!r}): on must be a hook name or a list of them.")
        for hook in hooks:
            if hook not in _HOOKS:
                raise ValueError(
                    f"{owner}(on={on!r}): {hook!r} is not a Lightning callback hook; use "
                    f"one of {sorted(_HOOKS)} (the hook's name less 'on_')."
                )
        self._filename = filename
        self._warned: set[str] = set()
        self._save_checkpoints = bool(save_checkpoints)
        self._on = tuple(hooks)
        for hook in self._on:  # Lightning looks each hook up on the instance
            setattr(self, "on_" + hook, self._handle)

    def _metrics(self, trainer: Any) -> dict[str, Any]:
        """The metrics to report, renamed. One Lightning has not logged (yet: at this
        hook, say ``val_loss`` at ``train_batch_end``) is left out with a warning, once
        per name, as Ray Tune leaves it out."""
        available = {k: _plain(v) for k, v in trainer.callback_metrics.items()}
        if self._mapping is None:
            return available
        chosen: dict[str, Any] = {}
        for tune_name, name in self._mapping.items():
            if name in available:
                chosen[tune_name] = available[name]
            elif name not in self._warned:
                self._warned.add(name)
                logger.warning(
                    "%s(metrics=...): Lightning has no metric %r in trainer.callback_metrics "
                    "at this hook (it has %s); it is left out of the report. Log it with "
                    "self.log(%r, ...) before the hook runs, or name one of those.",
                    type(self).__name__,
                    name,
                    sorted(available),
                    name,
                )
        return chosen

    def _handle(self, trainer: Any, pl_module: Any = None, *args: Any, **kwargs: Any) -> None:
        if trainer.sanity_checking:
            return
        metrics = self._metrics(trainer)
        if not metrics:
            return  # nothing to report at this hook, as on Ray
        if not self._save_checkpoints:
            report(metrics)
            return
        with tempfile.TemporaryDirectory(prefix="pl_ckpt_") as tmp:
            trainer.save_checkpoint(os.path.join(tmp, self._filename))
            report(metrics, checkpoint=Checkpoint.from_directory(tmp))


class TuneReportCallback(TuneReportCheckpointCallback):
    """Report ``trainer.callback_metrics`` to Tune on a Lightning hook, without checkpoints.

    Args:
        metrics: As for :class:`TuneReportCheckpointCallback`.
        on: As for :class:`TuneReportCheckpointCallback`.
    """

    def __init__(self, metrics: MetricsArg = None, on: str | list[str] = "validation_end") -> None:
        super().__init__(metrics=metrics, save_checkpoints=False, on=on)
