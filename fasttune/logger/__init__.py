"""Per-trial result loggers, as ``ray.tune.logger``.

Each trial directory gets ``params.json``/``params.pkl`` and ``result.json``
(:class:`JsonLogger`), ``progress.csv`` (:class:`CSVLogger`) and TensorBoard event
files (:class:`TBXLogger`, needs ``fasttune[tensorboard]``). The ``*LoggerCallback``
classes write the same files from the driver, as experiment callbacks.
"""

from fasttune.logger._encoding import SafeFallbackEncoder
from fasttune.logger.csv import CSVLogger
from fasttune.logger.json import JsonLogger
from fasttune.logger.logger import Logger, pretty_print
from fasttune.logger.logger_callback import (
    DEFAULT_CALLBACK_CLASSES,
    CSVLoggerCallback,
    JsonLoggerCallback,
    LoggerCallback,
    TBXLoggerCallback,
    default_logger_callbacks,
    needs_default_loggers,
)
from fasttune.logger.noop import NoopLogger
from fasttune.logger.tensorboardx import TBXLogger
from fasttune.logger.unified import DEFAULT_LOGGERS, UnifiedLogger

__all__ = [
    "DEFAULT_CALLBACK_CLASSES",
    "DEFAULT_LOGGERS",
    "CSVLogger",
    "CSVLoggerCallback",
    "JsonLogger",
    "JsonLoggerCallback",
    "Logger",
    "LoggerCallback",
    "NoopLogger",
    "SafeFallbackEncoder",
    "TBXLogger",
    "TBXLoggerCallback",
    "UnifiedLogger",
    "default_logger_callbacks",
    "needs_default_loggers",
    "pretty_print",
]
