"""``params.json``, ``params.pkl`` and ``result.json`` in a trial directory.

The file-format logic lives in :func:`write_params` and :class:`JsonResultWriter`,
which only need a directory; :class:`JsonLogger` (and the driver-side callbacks)
are thin users of them.
"""

from __future__ import annotations

import os
from typing import Any

from fasttune._support.encoding import encode_config, encode_result_line
from fasttune.logger._appender import LineAppender
from fasttune.logger.logger import Logger
from fasttune.result import EXPR_PARAM_FILE, EXPR_PARAM_PICKLE_FILE, EXPR_RESULT_FILE
from fasttune.storage.filesystem import atomic_write_bytes, atomic_write_text


def _as_dict(config: Any) -> dict[str, Any]:
    if isinstance(config, dict):
        return config
    to_dict = getattr(config, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return dict(config)


def write_params(logdir: str, config: Any) -> dict[str, Any]:
    """Write a trial's config to ``params.json`` and ``params.pkl``, each atomically.

    ``params.json`` is indented, key-sorted JSON in which values JSON cannot hold
    are converted (see :class:`SafeFallbackEncoder`); ``params.pkl`` is the exact
    config, pickled (with cloudpickle where plain pickle cannot load it elsewhere).

    Args:
        logdir: The trial directory (created if missing).
        config: A dict, or an object with a ``to_dict()`` method.

    Returns:
        The config as a dict.
    """
    from fasttune._support.pickling import dumps  # imports cloudpickle: on first use

    config = _as_dict(config)
    # Atomic (never torn) but not fsynced: one per trial start, on the hot path of
    # short trials; the experiment state is what must survive a power loss.
    atomic_write_text(os.path.join(logdir, EXPR_PARAM_FILE), encode_config(config), durable=False)
    atomic_write_bytes(os.path.join(logdir, EXPR_PARAM_PICKLE_FILE), dumps(config), durable=False)
    return config


class JsonResultWriter:
    """Appends each result as one JSON line to ``result.json`` in a trial directory.

    Every line reaches the operating system whole, so readers never see half a
    line; unbuffered, a crash loses nothing already written, buffered, what was not
    flushed. An existing file is appended to, after dropping a partial last line.

    Args:
        logdir: The trial directory (created if missing).
        buffered: Keep lines in memory until :meth:`flush` (see ``LineAppender``).
    """

    def __init__(self, logdir: str, buffered: bool = False):
        self.path = os.path.join(logdir, EXPR_RESULT_FILE)
        self._out = LineAppender(self.path, buffered=buffered)

    def write_result(self, result: dict[str, Any]) -> bytes:
        """Append ``result`` (numpy values converted, NaN written as ``NaN``).

        Returns:
            The line written.
        """
        line = encode_result_line(result)
        self._out.append(line)
        return line

    def write_lines(self, lines: list[bytes]) -> None:
        """Append ``lines``, results already encoded as :meth:`write_result` encodes them."""
        self._out.append(b"".join(lines))

    def flush(self) -> None:
        """Hand buffered lines to the operating system."""
        self._out.flush()

    @property
    def closed(self) -> bool:
        return self._out.closed

    def close(self) -> None:
        """Close the file; closing twice is harmless."""
        self._out.close()


class JsonLogger(Logger):
    """Logs results to ``result.json`` and the config to ``params.json``/``params.pkl``.

    The config files are (re)written whenever the config is set or updated; each
    result is appended as one JSON line.

    Example:
        >>> import tempfile
        >>> log = JsonLogger({"lr": 0.1}, tempfile.mkdtemp())
        >>> log.on_result({"training_iteration": 1, "loss": 0.5})
        >>> log.close()
    """

    def _init(self) -> None:
        os.makedirs(self.logdir, exist_ok=True)
        self.update_config(self.config)
        self._writer = JsonResultWriter(self.logdir)

    def on_result(self, result: dict[str, Any]) -> None:
        """Append ``result`` to ``result.json``."""
        self._writer.write_result(result)

    def update_config(self, config: Any) -> None:
        """Store ``config`` and rewrite ``params.json`` and ``params.pkl``."""
        self.config = write_params(self.logdir, config)

    def flush(self) -> None:
        """Push pending writes to storage (every line is already handed to the OS)."""
        self._writer.flush()

    def close(self) -> None:
        """Close ``result.json``."""
        self._writer.close()


def __getattr__(name: str) -> Any:
    # Ray has ``JsonLoggerCallback`` in this module; it is defined in logger_callback, which
    # imports this module's writer, so it is looked up here on first use.
    if name == "JsonLoggerCallback":
        from fasttune.logger import logger_callback

        return logger_callback.JsonLoggerCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
