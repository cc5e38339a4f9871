"""The PyTorch Lightning callbacks, for scripts that ``import lightning``.

The same classes as :mod:`fasttune.integration.pytorch_lightning`, which accept both
``lightning.pytorch.Trainer`` and ``pytorch_lightning.Trainer``.

Example:
    >>> from fasttune.integration.lightning import TuneReportCheckpointCallback
"""

from fasttune.integration.pytorch_lightning import TuneReportCallback, TuneReportCheckpointCallback

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]
