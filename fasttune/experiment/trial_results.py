"""A trial's results as the driver keeps them: the last one and per-metric statistics.

A mixin of :class:`~fasttune.experiment.trial.Trial`, which holds the attributes in
its slots. Once a trial ended and the callbacks were told, its last result and final
statistics are packed into one small blob (``_support.packing``): the driver holds
every trial to the end of a run, and these were most of what a finished one held.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from fasttune import result as R
from fasttune._support import packing
from fasttune.experiment.metric_stats import NO_STATS as _NO_STATS
from fasttune.experiment.metric_stats import NOT_NUMBERS as _NOT_NUMBERS
from fasttune.experiment.metric_stats import STATS_WINDOW as _STATS_WINDOW
from fasttune.experiment.metric_stats import final_stats as _final_stats
from fasttune.experiment.metric_stats import merge_stats, stats_of
from fasttune.experiment.metric_stats import reopened_stats as _reopened_stats

_ANALYSIS_KEYS = ("max", "min", "avg", "last", "last-5-avg", "last-10-avg")
_NOTHING = object()  # a result without a config (``None`` may be one)


class _NoFlatResult(Mapping[str, Any]):
    """The flattened result of a trial that is not reporting: one read-only empty
    mapping for all (a dict each was 64 bytes per trial, held to the end of the run);
    pickles and copies of a trial get the same one."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __reduce__(self) -> str:
        return "NO_FLAT_RESULT"

    def __repr__(self) -> str:
        return "{}"


NO_FLAT_RESULT: Mapping[str, Any] = _NoFlatResult()


class TrialResults:
    """The last result and the statistics of a trial, packed once it is finished."""

    # Set by ``Trial.__init__``, as is ``config``, which a trial's own result shares.
    __slots__ = (
        "_last_result", "_packed", "_stats", "_stats_loader", "last_flat_result",
        "results_count", "stats_partial",
    )  # fmt: skip
    config: dict[str, Any]
    _last_result: dict[str, Any] | None
    _stats: dict[str, list[Any] | tuple[Any, ...]]
    _packed: bytes | None
    _stats_loader: Callable[[], Sequence[Mapping[str, Any]]] | None
    stats_partial: bool
    last_flat_result: Mapping[str, Any]
    results_count: int

    def _finish_stats(self) -> None:
        """Only the loggers read the flattened result (while the trial reports), and
        the statistics of a finished trial shrink to their final figures."""
        if self._packed is None:
            self.last_flat_result = NO_FLAT_RESULT
            self._stats = {
                key: entry if isinstance(entry, tuple) else _final_stats(entry)
                for key, entry in self._stats.items()
            }

    def compact(self) -> None:
        """Keep less of a finished trial: the driver holds every trial to the end.

        Called once the plugins and callbacks were told that the trial ended (they
        see its last result as it was reported). Its last result and final statistics
        are packed into one small blob (``_support.packing``), the config left out
        when it is the trial's own: reading :attr:`last_result` or
        :attr:`metric_analysis` then unpacks a new copy each time (a change to that
        copy is not kept: assign ``last_result`` instead). A trial that runs again is
        unpacked.
        """
        if self._packed is not None:
            return
        self._finish_stats()
        stats = self._stats
        result = self._last_result or {}
        reported = result.get(R.CONFIG, _NOTHING)
        own_config = reported is self.config
        if not own_config and reported is not _NOTHING:
            try:
                own_config = bool(reported == self.config)
            except Exception:  # values that do not compare plainly (arrays)
                own_config = False
        if own_config:
            result = dict(result)
            result[R.CONFIG] = None  # the trial's own, put back when unpacked
        try:
            blob = packing.pack((result, stats, own_config))
        except Exception:  # a value pickle refuses: kept as it is
            return
        # This order lets a reader on another thread (a dashboard) see one or the other.
        self._packed = blob
        self._last_result = None
        self._stats = None  # type: ignore[assignment]

    def _unpacked(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The packed last result and statistics (new objects)."""
        result, stats, own_config = packing.unpack(self._packed)  # type: ignore[arg-type]
        if own_config:
            result[R.CONFIG] = self.config
        return result, stats

    def _unpack_in_place(self) -> None:
        """Hold the last result and statistics as plain objects again (to change them)."""
        if self._packed is not None:
            self._last_result, self._stats = self._unpacked()
            self._packed = None

    @property
    def last_result(self) -> dict[str, Any]:
        """The latest result (a copy each time it is read once the trial is finished)."""
        result = self._last_result
        if result is None:
            if self._packed is None:  # unpacked meanwhile, by another thread
                return self._last_result or {}
            return self._unpacked()[0]
        return result

    @last_result.setter
    def last_result(self, result: dict[str, Any]) -> None:
        self._unpack_in_place()  # its statistics stay
        self._last_result = result

    def _live_stats(self) -> dict[str, Any]:
        """The statistics to update in place (unpacked first if packed)."""
        self._unpack_in_place()
        return self._stats

    def update_last_result(
        self, result: dict[str, Any], flat_result: dict[str, Any] | None = None
    ) -> None:
        """Record a new result and update the per-metric statistics.

        Args:
            result: The result as reported (nested dicts kept).
            flat_result: The same result flattened with ``/`` if already computed;
                statistics are kept per flattened key (``a/b``).
        """
        if self._packed is not None:  # a finished trial that reports again (rare)
            self._unpack_in_place()
        self._last_result = result
        self.results_count += 1
        if flat_result is None:
            from fasttune._support.flatten import flatten_result

            flat_result = flatten_result(result, (R.CONFIG,))
        self.last_flat_result = flat_result
        # Any: a tuple entry is reopened as a list below, which mypy cannot follow
        # (``type(entry) is tuple`` narrows one way only; isinstance is slower here).
        stats: dict[str, Any] = self._stats
        for key, value in flat_result.items():
            cls = type(value)
            if cls is not float and cls is not int:
                if cls in _NOT_NUMBERS or not isinstance(value, numbers.Real) or key in _NO_STATS:
                    continue
                value = float(value)
            elif key in _NO_STATS:
                continue
            entry = stats.get(key)
            if type(entry) is tuple:  # a finished trial that reports again (rare)
                entry = stats[key] = _reopened_stats(entry)
            if entry is None:
                # A plain list for the last 10 values: a deque costs ~620 bytes even
                # when empty, and every finished trial keeps its statistics.
                stats[key] = [value, value, value, 1, [value]]
            else:
                if value > entry[0]:
                    entry[0] = value
                if value < entry[1]:
                    entry[1] = value
                entry[2] += value
                entry[3] += 1
                window = entry[4]
                window.append(value)
                if len(window) > _STATS_WINDOW:
                    del window[0]

    def add_unseen_results(self, count: int, stats: Mapping[str, list[Any]]) -> None:
        """Count ``count`` results the driver was not sent (a worker wrote them to the
        trial's files and sent their statistics, ``metric_stats.stats_of``), before
        the result that followed them is recorded."""
        self.results_count += count
        merge_stats(self._live_stats(), stats)

    def load_stats_when_asked(self, results: Callable[[], Sequence[Mapping[str, Any]]]) -> None:
        """Take the statistics from ``results()`` (every result of the trial, oldest
        first, flattened with ``/``) when :attr:`metric_analysis` is first read."""
        self._stats_loader = results

    def keys_with_stats(self) -> list[str]:
        """The flattened numeric keys that some result so far reported (those with
        :attr:`metric_analysis` entries; bookkeeping keys such as ``pid`` have none)."""
        stats = self._stats if self._packed is None else self._unpacked()[1]
        return list(stats)

    @property
    def metric_analysis(self) -> dict[str, dict[str, float]]:
        """Per-metric ``max``, ``min``, ``avg``, ``last``, ``last-5-avg``, ``last-10-avg``."""
        loader = self._stats_loader
        if loader is not None:
            self._stats_loader = None
            flats = loader()
            if flats:
                packed = self._packed is not None
                self._unpack_in_place()
                self._stats = dict(stats_of(flats))
                self.stats_partial = False
                if packed:
                    self.compact()
        stats = self._stats if self._packed is None else self._unpacked()[1]
        analysis = {}
        for key, entry in stats.items():
            if not isinstance(entry, tuple):
                entry = _final_stats(entry)
            analysis[key] = dict(zip(_ANALYSIS_KEYS, entry[:6]))
        return analysis
