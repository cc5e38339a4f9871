"""Per-trial result loggers, as ``ray.tune.logger``.

Each trial directory gets ``params.json``/``params.pkl`` and ``result.json``
(:class:`JsonLogger`), ``progress.csv`` (:class:`CSVLogger`) and TensorBoard event
files (:class:`TBXLogger`, needs ``fasttune[tensorboard]``). The ``*LoggerCallback``
classes write the same files from the driver, as experiment callbacks.
``fasttune.logger.aim.AimLoggerCallback`` logs to an Aim repo (``fasttune[aim]``).
"""

from fasttune._support.lazy_names import lazy_names
from fasttune.logger.logger import Logger, pretty_print
from fasttune.logger.noop import NoopLogger

# The writers and callbacks load on first use: a worker process needs only the
# ``Logger`` base and ``NoopLogger``.
_LAZY = {
    "SafeFallbackEncoder": "fasttune._support.encoding",
    "CSVLogger": "fasttune.logger.csv",
    "JsonLogger": "fasttune.logger.json",
    "TBXLogger": "fasttune.logger.tensorboardx",
    "DEFAULT_LOGGERS": "fasttune.logger.unified",
    "UnifiedLogger": "fasttune.logger.unified",
    "DEFAULT_CALLBACK_CLASSES": "fasttune.logger.logger_callback",
    "CSVLoggerCallback": "fasttune.logger.logger_callback",
    "JsonLoggerCallback": "fasttune.logger.logger_callback",
    "LoggerCallback": "fasttune.logger.logger_callback",
    "TBXLoggerCallback": "fasttune.logger.logger_callback",
    "default_logger_callbacks": "fasttune.logger.logger_callback",
    "needs_default_loggers": "fasttune.logger.logger_callback",
}


__getattr__ = lazy_names(globals(), _LAZY)


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
