"""Per-trial result loggers, as ``ray.tune.logger``.

Each trial directory gets ``params.json``/``params.pkl`` and ``result.json``
(:class:`JsonLogger`), ``progress.csv`` (:class:`CSVLogger`) and TensorBoard event
files (:class:`TBXLogger`, needs ``fasttune[tensorboard]``).
"""

from fasttune.logger._encoding import SafeFallbackEncoder
from fasttune.logger.csv import CSVLogger
from fasttune.logger.json import JsonLogger
from fasttune.logger.logger import Logger, pretty_print
from fasttune.logger.noop import NoopLogger
from fasttune.logger.tensorboardx import TBXLogger
from fasttune.logger.unified import DEFAULT_LOGGERS, UnifiedLogger

__all__ = [
    "DEFAULT_LOGGERS",
    "CSVLogger",
    "JsonLogger",
    "Logger",
    "NoopLogger",
    "SafeFallbackEncoder",
    "TBXLogger",
    "UnifiedLogger",
    "pretty_print",
]
