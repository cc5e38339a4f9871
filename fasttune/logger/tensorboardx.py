"""TensorBoard event files in a trial directory, through tensorboardX (optional).

The file-format logic lives in :class:`TBXResultWriter`, which only needs a
directory; :class:`TBXLogger` (and the driver-side callback) are thin users of it.
tensorboardX is imported when a writer is created, never when this module is.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Mapping
from typing import Any

from fasttune._internal._imports import import_optional
from fasttune.logger._flatten import flatten_result
from fasttune.logger.logger import Logger
from fasttune.result import (
    CONFIG,
    PID,
    TIME_TOTAL_S,
    TIMESTAMP,
    TIMESTEPS_TOTAL,
    TRAINING_ITERATION,
)
from fasttune.utils.util import flatten_dict

logger = logging.getLogger(__name__)

TAG_PREFIX = "ray/tune/"
"""Prefix of every scalar tag, as in Ray Tune, so existing dashboards keep working."""

_NOT_LOGGED = frozenset((CONFIG, PID, TIMESTAMP, TIME_TOTAL_S, TRAINING_ITERATION))
_HPARAM_TYPES = (str, bool, int, float)


def _is_number(value: Any) -> bool:
    """True for real numbers (builtin or numpy) that are not bools.

    numpy bools are not ``numbers.Real``; builtin bools are, so they are excluded.
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _hparam_value(value: Any) -> Any:
    """``value`` as a builtin hparam value, or None if it cannot be one."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item() if getattr(value, "ndim", 0) == 0 else None
    return value if isinstance(value, _HPARAM_TYPES) else None


class TBXResultWriter:
    """Writes results and hyperparameters to a TensorBoard event file in a directory.

    Numeric metrics become scalars tagged ``ray/tune/<flattened key>`` (NaN values
    and bools skipped), at step ``timesteps_total`` if set, else
    ``training_iteration``. Non-empty numeric lists and arrays become histograms
    (3-d arrays images, 4-d arrays image batches). ``config``, ``pid``,
    ``timestamp``, ``time_total_s`` and ``training_iteration`` are not logged.

    Args:
        logdir: The trial directory.
        flush_secs: How often tensorboardX flushes its queue to the file.

    Raises:
        MissingDependencyError: tensorboardX is not installed.
    """

    def __init__(self, logdir: str, flush_secs: int = 30):
        tensorboardx = import_optional("tensorboardX", extra="tensorboard", feature="TBXLogger")
        import numpy as np  # available: tensorboardX needs it
        from tensorboardX.proto import summary_pb2

        from fasttune.logger._tfevents import EventFileWriter

        self._np = np
        self._summary = tensorboardx.summary
        self._summary_cls = summary_pb2.Summary
        self._value_cls = summary_pb2.Summary.Value
        self._writer = EventFileWriter(logdir, flush_secs=flush_secs)
        self._last_metrics: dict[str, float] = {}
        self._count = 0
        self._warned: set[str] = set()
        self._closed = False

    @property
    def last_metrics(self) -> dict[str, float]:
        """The scalar metrics of the last result, by tag."""
        return dict(self._last_metrics)

    def write_result(
        self, result: Mapping[str, Any], flat: Mapping[str, Any] | None = None
    ) -> None:
        """Log the numeric values of ``result``.

        Args:
            result: The result.
            flat: ``result`` already flattened with "/" and without ``config``, if known.
        """
        self._count += 1
        step = result.get(TIMESTEPS_TOTAL) or result.get(TRAINING_ITERATION) or self._count
        metrics: dict[str, float] = {}
        values = []
        value_cls = self._value_cls
        if flat is None:
            flat = flatten_result(result, _NOT_LOGGED)
        for key, value in flat.items():
            if key in _NOT_LOGGED:
                continue
            tag = TAG_PREFIX + key
            cls = type(value)
            if cls is float or cls is int or (cls is not str and _is_number(value)):
                number = float(value)
                if number == number:  # not NaN
                    metrics[tag] = number
                    values.append(value_cls(tag=tag, simple_value=number))
            elif isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
                self._write_array(tag, value, step)
        if values:
            self._writer.write_summary(self._summary_cls(value=values), step)
        self._last_metrics = metrics

    def _write_array(self, tag: str, value: Any, step: int) -> None:
        np = self._np
        try:
            array = np.asarray(value)
            if array.size == 0 or array.dtype.kind not in "biuf":
                return
            summary = self._summary
            if array.ndim == 3:
                proto = summary.image(tag, array, dataformats="CHW")
            elif array.ndim == 4:
                proto = summary.image(tag, array, dataformats="NCHW")
            else:
                proto = summary.histogram(tag, array, bins="auto")
            self._writer.write_summary(proto, step)
        except Exception as e:
            if tag not in self._warned:
                self._warned.add(tag)
                logger.warning("Could not log %s to TensorBoard (%s); skipping it.", tag, e)

    def write_hparams(
        self, params: Mapping[str, Any], metrics: Mapping[str, float] | None = None
    ) -> bool:
        """Record the trial's hyperparameters with the metrics to show beside them.

        Nested params are flattened; values that are not str, bool, int or float
        (numpy scalars included) are left out. Nothing is written when no param or
        no metric remains.

        Args:
            params: The hyperparameters (usually the trial's config).
            metrics: Metric values by tag; defaults to :attr:`last_metrics`.

        Returns:
            Whether the hparams were written.
        """
        from tensorboardX.summary import hparams

        metrics = self._last_metrics if metrics is None else dict(metrics)
        kept: dict[str, Any] = {}
        dropped = []
        for key, value in flatten_dict(params, delimiter="/").items():
            converted = _hparam_value(value)
            if converted is None:
                dropped.append(key)
            else:
                kept[key] = converted
        if dropped:
            logger.debug("Hyperparameters not logged to TensorBoard: %s", dropped)
        if not kept or not metrics:
            return False
        try:
            summaries = hparams(hparam_dict=kept, metric_dict=metrics)
        except Exception:
            logger.exception("tensorboardX could not log the hyperparameters %s", kept)
            return False
        for summary in summaries:
            self._writer.write_summary(summary)
        return True

    def flush(self) -> None:
        """Write buffered events to the event file."""
        if not self._closed:
            self._writer.flush()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Flush and close the event file; closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self._writer.close()


class TBXLogger(Logger):
    """Logs results to TensorBoard event files in the trial directory.

    Needs tensorboardX (``pip install "fasttune[tensorboard]"``). Nested metrics are
    flattened (``{"a": {"b": 1}}`` -> ``ray/tune/a/b``). The hyperparameters are
    written at :meth:`close`: the trial's ``evaluated_params`` when it has them,
    else the config, with the last result's metrics.

    Raises:
        MissingDependencyError: tensorboardX is not installed.
    """

    def _init(self) -> None:
        self._writer = TBXResultWriter(self.logdir)

    def on_result(self, result: dict[str, Any]) -> None:
        """Log the numeric values of ``result``."""
        self._writer.write_result(result)

    def flush(self) -> None:
        """Write queued events to the event file."""
        self._writer.flush()

    def close(self) -> None:
        """Write the hyperparameters and close the event file."""
        if self._writer.closed:
            return
        try:
            params = getattr(self.trial, "evaluated_params", None) or self.config
            if params:
                self._writer.write_hparams(params)
        finally:
            self._writer.close()
