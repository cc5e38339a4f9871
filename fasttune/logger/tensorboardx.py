"""TensorBoard event files in a trial directory (needs tensorboardX installed, as Ray).

The file-format logic lives in :class:`TBXResultWriter`, which only needs a
directory; :class:`TBXLogger` (and the driver-side callback) are thin users of it.
Scalars, histograms and hparams are encoded by :mod:`fasttune.logger._tb_proto`:
tensorboardX is only imported for images, because importing it imports torch
when torch is installed. Its presence is still checked (without importing it), so
fasttune writes TensorBoard files exactly when Ray Tune would.
"""

from __future__ import annotations

import importlib.util
import logging
import numbers
import operator
import re
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from math import isnan
from typing import Any

from fasttune._support.flatten import flatten_result
from fasttune._support.imports import MissingDependencyError
from fasttune.logger import _tb_proto
from fasttune.logger._tfevents import EventFileWriter
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
# Characters tensorboardX replaces with "_" in histogram and image tags.
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


_found_tensorboardx = False


def _tensorboardx_installed() -> bool:
    """Whether tensorboardX can be imported, found without importing it.

    Once found, remembered: the search walks ``sys.path`` (~0.3 ms), and every trial's
    writer asks.
    """
    global _found_tensorboardx
    if "tensorboardX" in sys.modules:  # imported already, or blocked (set to None)
        return sys.modules["tensorboardX"] is not None
    if not _found_tensorboardx:
        _found_tensorboardx = importlib.util.find_spec("tensorboardX") is not None
    return _found_tensorboardx


def require_tensorboardx(feature: str) -> None:
    """Raise the install hint for ``feature`` unless tensorboardX is installed.

    Raises:
        MissingDependencyError: tensorboardX is not installed.
    """
    if not _tensorboardx_installed():
        raise MissingDependencyError(
            f"{feature} needs the optional package 'tensorboardX', which is not installed. "
            'Install it with: pip install "fasttune[tensorboard]"'
        )


def _is_number(value: Any) -> bool:
    """True for real numbers (builtin or numpy) that are not bools.

    numpy bools are not ``numbers.Real``; builtin bools are, so they are excluded.
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _hparam_value(value: Any) -> Any:
    """``value`` as a builtin hparam value, or None if it cannot be one."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item() if getattr(value, "ndim", 0) == 0 else None
    if type(value) is int:
        try:
            float(value)
        except OverflowError:
            return None  # no double holds it
    return value if isinstance(value, _HPARAM_TYPES) else None


def _histogram_value(np: Any, tag: str, array: Any) -> bytes:
    """A histogram ``Summary.Value`` of ``array`` (bins chosen by numpy's "auto" rule).

    TensorBoard reads only the right limit of each bucket, so an empty bucket is
    put left of the first one to show its left edge (as tensorboardX does).

    Raises:
        ValueError: ``array`` holds NaN or infinite values.
    """
    values = array.reshape(-1).astype(float)
    counts, limits = np.histogram(values, bins="auto")
    nonzero = np.flatnonzero(counts)
    start, end = int(nonzero[0]), int(nonzero[-1]) + 1
    counts = counts[start - 1 : end] if start > 0 else np.concatenate([[0], counts[:end]])
    return _tb_proto.histogram_value(
        _INVALID_TAG_CHARACTERS.sub("_", tag).lstrip("/"),
        min=values.min(),
        max=values.max(),
        num=len(values),
        sum=values.sum(),
        sum_squares=values.dot(values),
        bucket_limit=limits[start : end + 1].tolist(),
        bucket=counts.tolist(),
    )


_SKIPPED_TYPES = frozenset((str, type(None)))
# Logged as scalars, as Ray logs them (a bool as 0 or 1: ``done`` among them).
_SCALAR_TYPES = frozenset((float, int, bool))


class _ScalarPlan:
    """Encodes the scalars of results of one shape with one ``struct`` call.

    Most trials report the same keys with the same types every iteration, so the
    ``Summary`` of a result is the same tag prefixes with new float32 values between
    them: a struct format of ``<len>s f`` pairs packs it in C. A whole event (framing
    and checksum included) then costs about 60% of one encoded value by value in
    Python (bench/bench_encoding.py).
    """

    __slots__ = ("_args", "_struct", "tags", "values")

    def __init__(self, keys: tuple[str, ...], tags: tuple[str, ...], prefixes: list[bytes]):
        self.tags = tags
        self.values = operator.itemgetter(*keys) if len(keys) > 1 else _single(keys[0])
        self._struct = struct.Struct("<" + "".join(f"{len(p)}sf" for p in prefixes))
        self._args: list[Any] = [None] * (2 * len(prefixes))
        self._args[0::2] = prefixes

    def encode(self, values: tuple[Any, ...]) -> bytes:
        """The ``Summary`` of ``values`` (in ``tags`` order; none NaN).

        Raises:
            OverflowError: A value does not fit in a float32.
        """
        args = self._args
        args[1::2] = values
        return self._struct.pack(*args)


# Typed, not Any: mypy 2.x crashes on itemgetter(*keys) if the other branch is Any.
def _single(key: str) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    def values(flat: Mapping[str, Any]) -> tuple[Any, ...]:
        return (flat[key],)

    return values


# Per flattened key: its tag and the encoded start of its scalar entry; per result
# shape (keys, value types): how to encode it in one call, or None. Shared by the
# writers of a process: a worker writes one trial after another, and each trial's
# results have the shape of the last one's (bounded: cleared when full).
_SCALAR_PREFIXES: dict[str, tuple[str, bytes]] = {}
_PLANS: dict[tuple[tuple[str, ...], tuple[type, ...]], _ScalarPlan | None] = {}
_MAX_SHARED = 4096


class TBXResultWriter:
    """Writes results and hyperparameters to a TensorBoard event file in a directory.

    Numeric and bool metrics become scalars tagged ``ray/tune/<flattened key>`` (NaN
    values skipped; a bool as 0 or 1), at step ``timesteps_total`` if set, else
    ``training_iteration``. Non-empty numeric lists and arrays become histograms
    (3-d arrays images, 4-d arrays image batches); tuples are left out, as by Ray.
    ``config``, ``pid``,
    ``timestamp``, ``time_total_s`` and ``training_iteration`` are not logged.

    Args:
        logdir: The trial directory.
        flush_secs: How often buffered events are flushed to the file.

    Raises:
        MissingDependencyError: tensorboardX is not installed.
    """

    def __init__(self, logdir: str, flush_secs: int = 30):
        require_tensorboardx("TBXLogger")
        self._writer = EventFileWriter(logdir, flush_secs=flush_secs)
        # Per flattened key: its tag and the encoded start of its scalar entry.
        self._scalar_prefixes = _SCALAR_PREFIXES
        # Per result shape (keys, value types): how to encode it in one call, or None.
        self._plans = _PLANS
        self._last_metrics: dict[str, float] = {}
        # The last finite_shape token given to write_result, and the plan of its shape.
        self._shape_token: object = None
        self._token_plan: _ScalarPlan | None = None
        self._last_scalars: tuple[_ScalarPlan, tuple[Any, ...]] | None = None
        self._count = 0
        self._warned: set[str] = set()
        self._closed = False

    @property
    def last_metrics(self) -> dict[str, float]:
        """The scalar metrics of the last result, by tag."""
        return dict(self._current_metrics())

    def _current_metrics(self) -> dict[str, float]:
        if self._last_scalars is not None:  # built on demand: the fast path skips it
            plan, values = self._last_scalars
            self._last_metrics = dict(zip(plan.tags, map(float, values)))
            self._last_scalars = None
        return self._last_metrics

    def write_result(
        self,
        result: Mapping[str, Any],
        flat: Mapping[str, Any] | None = None,
        finite_shape: object = None,
    ) -> None:
        """Log the numeric values of ``result``.

        Args:
            result: The result.
            flat: ``result`` already flattened with "/" and without ``config``, if known.
            finite_shape: A token the caller gives every result of one shape (keys
                and value types) whose numbers are all finite: the shape is then
                looked up once, not for each result.
        """
        if flat is None:
            flat = flatten_result(result, _NOT_LOGGED)
        plan = self._plan_for(flat, finite_shape)
        if plan is not None:
            self._write_planned(plan, [result], [flat], nan_possible=finite_shape is None)
        else:
            self._count += 1
            self._write_general(flat, self._step(result))

    def write_results(
        self,
        results: list[dict[str, Any]],
        flats: list[dict[str, Any]],
        finite_shape: object,
    ) -> None:
        """Log results of one shape whose numbers are all finite, as
        :meth:`write_result` with ``finite_shape`` logs each, in one write."""
        plan = self._plan_for(flats[0], finite_shape)
        if plan is None:
            for result, flat in zip(results, flats):
                self.write_result(result, flat, finite_shape)
        else:
            self._write_planned(plan, results, flats)

    def _step(self, result: Mapping[str, Any]) -> int:
        step = result.get(TIMESTEPS_TOTAL) or result.get(TRAINING_ITERATION) or self._count
        return step if type(step) is int else int(step)

    def _plan_for(self, flat: Mapping[str, Any], finite_shape: object) -> _ScalarPlan | None:
        """The plan of ``flat``'s shape; looked up once per ``finite_shape`` token."""
        if finite_shape is not None and finite_shape is self._shape_token:
            return self._token_plan
        plan = self._plan_of(flat)
        if finite_shape is not None:
            self._shape_token, self._token_plan = finite_shape, plan
        return plan

    def _write_planned(
        self,
        plan: _ScalarPlan,
        results: Sequence[Mapping[str, Any]],
        flats: Sequence[Any],
        nan_possible: bool = False,
    ) -> None:
        """Write results of ``plan``'s shape in one write: each as one ``struct`` call,
        or by the general path if a value is NaN (looked for with ``nan_possible``,
        which skips it) or does not fit a float32 (written as +-inf)."""
        summaries: list[tuple[bytes, int]] = []
        encode, values_of = plan.encode, plan.values
        values: tuple[Any, ...] = ()
        for result, flat in zip(results, flats):
            self._count += 1
            step = self._step(result)
            values = values_of(flat)
            summary = None
            if not (nan_possible and any(map(isnan, values))):
                try:
                    summary = encode(values)
                except OverflowError:
                    pass
            if summary is None:  # NaN (skipped) or beyond float32 (+-inf): the general path
                if summaries:
                    self._writer.write_summaries(summaries)
                    summaries = []
                self._write_general(flat, step)
            else:
                summaries.append((summary, step))
        if summaries:
            self._writer.write_summaries(summaries)
            self._last_scalars = (plan, values)

    def _plan_of(self, flat: Mapping[str, Any]) -> _ScalarPlan | None:
        """The plan of ``flat``'s shape (None: the general path), made once per shape."""
        shape = (tuple(flat), tuple(map(type, flat.values())))
        try:
            return self._plans[shape]
        except KeyError:
            if len(self._plans) >= _MAX_SHARED:
                self._plans.clear()
            plan = self._plans[shape] = self._plan(*shape)
            return plan

    def _plan(self, keys: tuple[str, ...], types: tuple[type, ...]) -> _ScalarPlan | None:
        """The one-call encoding of results of this shape: every value a plain number
        or bool (logged) or a str or None (skipped); None for any other shape."""
        scalar_keys = []
        for key, cls in zip(keys, types):
            if key in _NOT_LOGGED or cls in _SKIPPED_TYPES:
                continue
            if cls not in _SCALAR_TYPES:
                return None  # numpy scalars, arrays, lists...: the general path
            scalar_keys.append(key)
        if not scalar_keys:
            return None
        prefixes = [self._scalar_prefix(key)[1] for key in scalar_keys]
        return _ScalarPlan(
            keys=tuple(scalar_keys),
            tags=tuple(TAG_PREFIX + key for key in scalar_keys),
            prefixes=prefixes,
        )

    def _scalar_prefix(self, key: str) -> tuple[str, bytes]:
        cached = self._scalar_prefixes.get(key)
        if cached is None:
            if len(self._scalar_prefixes) >= _MAX_SHARED:
                self._scalar_prefixes.clear()
            tag = TAG_PREFIX + key
            cached = self._scalar_prefixes[key] = (tag, _tb_proto.scalar_entry_prefix(tag))
        return cached

    def _write_general(self, flat: Mapping[str, Any], step: int) -> None:
        """Any result: numbers and bools one by one (NaN skipped), lists and arrays as
        histograms or images (not tuples, as Ray leaves them out)."""
        metrics: dict[str, float] = {}
        entries = []
        prefixes = self._scalar_prefixes
        float32 = _tb_proto.float32
        for key, value in flat.items():
            if key in _NOT_LOGGED:
                continue
            cls = type(value)
            if cls is float or cls is int or cls is bool or (cls is not str and _is_number(value)):
                try:
                    number = float(value)
                except OverflowError:  # an int beyond any double
                    number = float("inf") if value > 0 else float("-inf")
                if number == number:  # not NaN
                    cached = prefixes.get(key)
                    if cached is None:
                        tag = TAG_PREFIX + key
                        cached = prefixes[key] = (tag, _tb_proto.scalar_entry_prefix(tag))
                    metrics[cached[0]] = number
                    entries.append(cached[1] + float32(number))
            elif isinstance(value, list) or type(value).__name__ == "ndarray":
                self._write_array(TAG_PREFIX + key, value, step)
        if entries:
            self._writer.write_summary(b"".join(entries), step)
        self._last_metrics = metrics
        self._last_scalars = None

    def _write_array(self, tag: str, value: Any, step: int) -> None:
        import numpy as np

        try:
            array = np.asarray(value)
            if array.size == 0 or array.dtype.kind not in "biuf":
                return
            if array.ndim in (3, 4):
                summary = self._image_summary(tag, array)
            else:
                summary = _tb_proto.summary([_histogram_value(np, tag, array)])
            self._writer.write_summary(summary, step)
        except Exception as e:
            if tag not in self._warned:
                self._warned.add(tag)
                logger.warning("Could not log %s to TensorBoard (%s); skipping it.", tag, e)

    @staticmethod
    def _image_summary(tag: str, array: Any) -> bytes:
        """An image (3-d, CHW) or image batch (4-d, NCHW) summary, made by tensorboardX.

        The only use of tensorboardX (imported here, so only when images are logged).
        """
        from tensorboardX import summary

        dataformats = "CHW" if array.ndim == 3 else "NCHW"
        return summary.image(tag, array, dataformats=dataformats).SerializeToString()

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
        metrics = self._current_metrics() if metrics is None else dict(metrics)
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
            summaries = _tb_proto.hparams_summaries(kept, metrics)
        except Exception:  # e.g. a name that is not valid UTF-8
            logger.exception("Could not log the hyperparameters %s to TensorBoard", kept)
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


def __getattr__(name: str) -> Any:
    # Ray has ``TBXLoggerCallback`` in this module; it is defined in logger_callback, which
    # imports this module's writer, so it is looked up here on first use.
    if name == "TBXLoggerCallback":
        from fasttune.logger import logger_callback

        return logger_callback.TBXLoggerCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
