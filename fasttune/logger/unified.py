"""``UnifiedLogger``: one logger that fans out to several (JSON, CSV, TensorBoard)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fasttune._support.imports import MissingDependencyError
from fasttune._support.log_once import log_once
from fasttune.logger.csv import CSVLogger
from fasttune.logger.json import JsonLogger
from fasttune.logger.logger import Logger
from fasttune.logger.tensorboardx import TBXLogger

logger = logging.getLogger(__name__)

DEFAULT_LOGGERS: tuple[type[Logger], ...] = (JsonLogger, CSVLogger, TBXLogger)
"""The loggers a trial gets by default, as in Ray Tune."""


def _warn_once(key: str, msg: str, *args: Any) -> None:
    if log_once(f"logger: {key}"):
        logger.warning(msg, *args)


class UnifiedLogger(Logger):
    """Sends every call to several loggers: :data:`DEFAULT_LOGGERS` unless told otherwise.

    A logger that cannot be created is skipped with a warning; with the default
    loggers, a missing tensorboardX only skips :class:`TBXLogger` (logged at debug
    level). :meth:`close` closes every logger even if one of them fails.

    Args:
        config: The trial's configuration, passed to each logger.
        logdir: The trial directory, passed to each logger.
        trial: The trial, passed to each logger.
        loggers: Logger classes to use instead of :data:`DEFAULT_LOGGERS`.

    Example:
        >>> import tempfile
        >>> log = UnifiedLogger({"lr": 0.1}, tempfile.mkdtemp(), loggers=[JsonLogger])
        >>> log.on_result({"training_iteration": 1})
        >>> log.close()
    """

    def __init__(
        self,
        config: dict[str, Any],
        logdir: str,
        trial: Any | None = None,
        loggers: Sequence[type[Logger]] | None = None,
    ):
        self._defaults = loggers is None
        self._logger_cls_list = tuple(DEFAULT_LOGGERS if loggers is None else loggers)
        if JsonLogger not in self._logger_cls_list:
            _warn_once(
                "no-json",
                "JsonLogger is not among the loggers: result.json will not be written, "
                "so analysing the experiment from its files will not work.",
            )
        super().__init__(config, logdir, trial)

    def _init(self) -> None:
        self._loggers: list[Logger] = []
        for cls in self._logger_cls_list:
            try:
                self._loggers.append(cls(self.config, self.logdir, self.trial))
            except MissingDependencyError as e:
                if self._defaults:
                    logger.debug("Skipping %s: %s", cls.__name__, e)
                else:
                    _warn_once(f"create:{cls.__name__}", "Skipping %s: %s", cls.__name__, e)
            except Exception as e:
                _warn_once(f"create:{cls.__name__}", "Could not create %s: %r", cls.__name__, e)

    @property
    def loggers(self) -> list[Logger]:
        """The loggers this one sends calls to."""
        return list(self._loggers)

    def on_result(self, result: dict[str, Any]) -> None:
        """Pass ``result`` to every logger."""
        for log in self._loggers:
            log.on_result(result)

    def update_config(self, config: dict[str, Any]) -> None:
        """Pass ``config`` to every logger."""
        self.config = config
        for log in self._loggers:
            log.update_config(config)

    def flush(self) -> None:
        """Flush every logger."""
        for log in self._loggers:
            log.flush()

    def close(self) -> None:
        """Close every logger, then raise the first error met, if any."""
        error: BaseException | None = None
        for log in self._loggers:
            try:
                log.close()
            except Exception as e:
                logger.warning("Closing %s failed: %r", type(log).__name__, e)
                error = error or e
        if error is not None:
            raise error
