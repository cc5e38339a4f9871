"""``Trial``: the record of one trial (state only; the controller drives it)."""

from __future__ import annotations

import enum
import logging
import numbers
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fasttune import result as R
from fasttune._support import packing
from fasttune._support.log_once import log_once
from fasttune.experiment.metric_stats import NO_STATS as _NO_STATS
from fasttune.experiment.metric_stats import NOT_NUMBERS as _NOT_NUMBERS
from fasttune.experiment.metric_stats import STATS_WINDOW as _STATS_WINDOW
from fasttune.experiment.metric_stats import final_stats as _final_stats
from fasttune.experiment.metric_stats import merge_stats, stats_of
from fasttune.experiment.metric_stats import reopened_stats as _reopened_stats

MAX_DIRNAME_LENGTH = 130
_ANALYSIS_KEYS = ("max", "min", "avg", "last", "last-5-avg", "last-10-avg")
_NOTHING = object()  # a result without a config (``None`` may be one)


@dataclass(frozen=True)
class ResumePoint:
    """Where a trial that ran before starts again.

    Attributes:
        iteration: The ``training_iteration`` it resumes after (0: from scratch).
        step: The TensorBoard step of that result (``timesteps_total`` when reported,
            else the iteration).
    """

    iteration: int
    step: int


class TrialStatus(str, enum.Enum):
    """Lifecycle states; the values equal Ray's status strings."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    def __str__(self) -> str:
        return self.value


def new_experiment_hash() -> str:
    """Five hex characters shared by the trial ids of one experiment (as Ray)."""
    return uuid.uuid4().hex[:5]


def _warn_missing_criterion(key: str, result: Mapping[str, Any]) -> None:
    if log_once(f"stop criterion not in a result: {key}"):
        logging.getLogger(__name__).warning(
            "Stopping criterion %r was not found in a result (reported keys: %s). If %r "
            "is never reported, trials run until they end by themselves: report it from "
            "the trainable or change RunConfig(stop=...).",
            key,
            sorted(result),
            key,
        )


class Trial:
    """One configuration being trained, and everything known about it.

    Attributes mirror Ray's ``Trial``: ``trial_id``, ``config``, ``status``,
    ``last_result``, ``experiment_tag``, ``evaluated_params``, ``local_path``/``path``,
    ``checkpoint``, ``error_file``, ``num_failures``, ``metric_analysis``.
    """

    # Slots: the driver holds every trial to the end of a run, and an instance dict of
    # more than 30 keys is not shared between instances (1.6 KB per trial; slots: 0.4).
    # ``__dict__`` keeps other attributes possible (callbacks may set their own).
    # fmt: off
    __slots__ = (
        "__dict__", "__weakref__", "_last_result", "_packed", "_stats", "_stats_loader",
        "checkpoint_at_end", "checkpoint_frequency", "checkpoint_manager", "config",
        "custom_dirname", "custom_trial_name", "ending_told", "error_file", "error_msg",
        "evaluated_params", "experiment_path", "experiment_tag", "last_flat_result",
        "max_failures", "num_failures", "num_restore_failures", "pickled_error_file",
        "placement_group_factory", "relative_logdir", "restore_from_scratch",
        "restore_path", "results_count", "resume_point", "saving_to", "start_time",
        "stats_partial", "status", "stopping_criterion", "trainable_name", "trial_id",
    )
    # fmt: on

    PENDING = TrialStatus.PENDING
    RUNNING = TrialStatus.RUNNING
    PAUSED = TrialStatus.PAUSED
    TERMINATED = TrialStatus.TERMINATED
    ERROR = TrialStatus.ERROR

    def __init__(
        self,
        trainable_name: str,
        *,
        config: dict[str, Any] | None = None,
        trial_id: str | None = None,
        experiment_tag: str = "",
        evaluated_params: dict[str, Any] | None = None,
        experiment_path: str | None = None,
        placement_group_factory: Any = None,
        stopping_criterion: Mapping[str, Any] | None = None,
        max_failures: int = 0,
        checkpoint_frequency: int = 0,
        checkpoint_at_end: bool = False,
        custom_trial_name: str | None = None,
        custom_dirname: str | None = None,
    ):
        self.trainable_name = trainable_name
        self.config: dict[str, Any] = config if config is not None else {}
        self.trial_id = trial_id or f"{new_experiment_hash()}_00000"
        self.experiment_tag = experiment_tag
        self.evaluated_params = evaluated_params or {}
        self.experiment_path = experiment_path
        self.placement_group_factory = placement_group_factory
        self.stopping_criterion = dict(stopping_criterion or {})
        self.max_failures = max_failures
        self.checkpoint_frequency = checkpoint_frequency
        self.checkpoint_at_end = checkpoint_at_end
        self.custom_trial_name = custom_trial_name
        self.custom_dirname = custom_dirname

        self.status = TrialStatus.PENDING
        self._last_result: dict[str, Any] | None = {}
        # key -> running statistics (a list), or final figures once finished (a tuple)
        self._stats: dict[str, list[Any] | tuple[Any, ...]] = {}
        # A finished trial's last result and statistics, packed (``_support.packing``;
        # both fields above are then None): see :meth:`compact`.
        self._packed: bytes | None = None
        # A trial rebuilt from its saved state knows its last result only: its
        # statistics are partial until taken from all its results (its files), which
        # a reader of the experiment arranges with ``load_stats_when_asked``.
        self.stats_partial = False
        self._stats_loader: Callable[[], Sequence[Mapping[str, Any]]] | None = None
        # ``last_result`` flattened with "/" (config left out), shared by the loggers.
        self.last_flat_result: dict[str, Any] = {}
        self.num_failures = 0
        self.num_restore_failures = 0
        self.restore_from_scratch = False  # its checkpoint failed to restore too often
        self.error_file: str | None = None
        self.pickled_error_file: str | None = None
        self.error_msg: str | None = None
        self.start_time: float | None = None
        self.results_count = 0
        # Whether the callbacks were told this trial ended (a restore tells them if not).
        self.ending_told = False
        # Checkpoints: managed by the controller's checkpoint bookkeeping.
        self.checkpoint_manager: Any = None
        self.restore_path: str | None = None
        # Set by the runner at each launch of a trial that ran before: where it resumes
        # from, so its result files are cut back to that point (None: a first start).
        self.resume_point: ResumePoint | None = None
        self.saving_to: str | None = None
        self.relative_logdir: str | None = None

    # ------------------------------------------------------------------ names, paths
    def __str__(self) -> str:
        if self.custom_trial_name:
            return self.custom_trial_name
        return f"{self.trainable_name}_{self.trial_id}"

    def __repr__(self) -> str:
        return str(self)

    def create_dirname(self) -> str:
        """The trial directory's name: ``<str(trial)>_<experiment_tag>``, made safe."""
        if self.custom_dirname:
            name = self.custom_dirname
        else:
            name = f"{self.trainable_name}_{self.trial_id}"
            if self.experiment_tag:
                name = f"{name}_{self.experiment_tag}"
        name = re.sub(r"[^\w.=,+-]", "_", name)[:MAX_DIRNAME_LENGTH]
        return name

    def init_local_path(self) -> str:
        """Choose (once) and return the trial directory under the experiment path."""
        if self.relative_logdir is None:
            self.relative_logdir = self.create_dirname()
        return self.local_path  # type: ignore[return-value]

    @property
    def local_path(self) -> str | None:
        if self.experiment_path is None or self.relative_logdir is None:
            return None
        return os.path.join(self.experiment_path, self.relative_logdir)

    @property
    def path(self) -> str | None:
        return self.local_path

    @property
    def logdir(self) -> str | None:
        return self.local_path

    # ------------------------------------------------------------------ state
    def set_status(self, status: TrialStatus) -> None:
        if status is TrialStatus.RUNNING and self.start_time is None:
            self.start_time = time.time()
        self.status = TrialStatus(status)
        if self.is_finished():
            self._finish_stats()
        elif self._packed is not None:
            self._unpack_in_place()

    def _finish_stats(self) -> None:
        """Only the loggers read the flattened result (while the trial reports), and
        the statistics of a finished trial shrink to their final figures."""
        if self._packed is None:
            self.last_flat_result = {}
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

    def __getstate__(self) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        # A packed blob is only valid in this process: pickles and copies get it unpacked.
        slots = {name: getattr(self, name) for name in _STATE_SLOTS if hasattr(self, name)}
        if self._packed is not None:
            slots["_last_result"], slots["_stats"] = self._unpacked()
            slots["_packed"] = None
        return self.__dict__ or None, slots

    def _live_stats(self) -> dict[str, Any]:
        """The statistics to update in place (unpacked first if packed)."""
        self._unpack_in_place()
        return self._stats

    def set_config(self, config: dict[str, Any]) -> None:
        self.config = config

    def set_experiment_tag(self, experiment_tag: str) -> None:
        self.experiment_tag = experiment_tag

    def is_finished(self) -> bool:
        return self.status in (TrialStatus.TERMINATED, TrialStatus.ERROR)

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

    def should_stop(self, result: Mapping[str, Any]) -> bool:
        """True when the result meets the stopping criterion (or says it is done).

        A criterion whose key the result lacks does not stop it (a metric reported
        every few iterations, say); the first such miss is logged, once per key, as
        Ray Tune does.
        """
        if result.get(R.DONE):
            return True
        for key, threshold in self.stopping_criterion.items():
            if key not in result:
                _warn_missing_criterion(key, result)
                continue
            value = result[key]
            if callable(threshold):
                if threshold(value):
                    return True
            elif value >= threshold:
                return True
        return False

    def should_checkpoint(self) -> bool:
        """True when ``checkpoint_frequency`` says this iteration saves a checkpoint."""
        iteration = self.last_result.get(R.TRAINING_ITERATION, 0)
        return bool(self.checkpoint_frequency) and iteration % self.checkpoint_frequency == 0

    def should_recover(self) -> bool:
        """True if the trial may be retried after a failure."""
        return self.max_failures < 0 or self.num_failures <= self.max_failures

    @property
    def checkpoint(self) -> Any:
        """The latest persisted checkpoint (a ``Checkpoint``), or None."""
        if self.checkpoint_manager is None:
            return None
        return self.checkpoint_manager.latest_checkpoint

    def has_checkpoint(self) -> bool:
        """Whether the trial has a persisted checkpoint (as Ray's ``Trial.has_checkpoint``)."""
        return self.checkpoint is not None

    def get_trial_checkpoints(self) -> list[Any]:
        if self.checkpoint_manager is None:
            return []
        return self.checkpoint_manager.checkpoints

    # ------------------------------------------------------------------ serialisation
    def to_json(self) -> dict[str, Any]:
        """JSON-safe state (the config travels separately, pickled)."""
        return {
            "trainable_name": self.trainable_name,
            "trial_id": self.trial_id,
            "experiment_tag": self.experiment_tag,
            "status": self.status.value,
            "relative_logdir": self.relative_logdir,
            "custom_trial_name": self.custom_trial_name,
            "custom_dirname": self.custom_dirname,
            "num_failures": self.num_failures,
            "error_file": os.path.basename(self.error_file) if self.error_file else None,
            "error_msg": self.error_msg,
            "max_failures": self.max_failures,
            "checkpoint_frequency": self.checkpoint_frequency,
            "checkpoint_at_end": self.checkpoint_at_end,
            "results_count": self.results_count,
            "ending_told": self.ending_told,
            "start_time": self.start_time,
            "resources": (
                self.placement_group_factory.to_json()
                if hasattr(self.placement_group_factory, "to_json")
                else None
            ),
            "checkpoints": (
                self.checkpoint_manager.to_json() if self.checkpoint_manager is not None else None
            ),
        }


_STATE_SLOTS = tuple(name for name in Trial.__slots__ if not name.startswith("__"))
