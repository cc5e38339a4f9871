"""``Trial``: the record of one trial (state only; the controller drives it)."""

from __future__ import annotations

import enum
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fasttune import result as R
from fasttune._support.log_once import log_once
from fasttune.experiment.trial_results import NO_FLAT_RESULT, TrialResults

MAX_DIRNAME_LENGTH = 130


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


class Trial(TrialResults):
    """One configuration being trained, and everything known about it.

    Attributes mirror Ray's ``Trial``: ``trial_id``, ``config``, ``status``,
    ``last_result``, ``experiment_tag``, ``evaluated_params``, ``local_path``/``path``,
    ``checkpoint``, ``error_file``, ``num_failures``, ``metric_analysis``.
    """

    # Slots: the driver holds every trial to the end of a run, and an instance dict of
    # more than 30 keys is not shared between instances (1.6 KB per trial; slots: 0.4).
    # ``__dict__`` keeps other attributes possible (callbacks may set their own). The
    # slots of its results and statistics are those of ``TrialResults``.
    # fmt: off
    __slots__ = (
        "__dict__", "__weakref__", "checkpoint_at_end", "checkpoint_frequency",
        "checkpoint_manager", "config", "custom_dirname", "custom_trial_name", "ending_told",
        "error_file", "error_msg", "evaluated_params", "experiment_path", "experiment_tag",
        "max_failures", "num_failures", "num_restore_failures", "pickled_error_file",
        "placement_group_factory", "relative_logdir", "restore_from_scratch",
        "restore_path", "resume_point", "saving_to", "start_time", "status",
        "stopping_criterion", "trainable_name", "trial_id",
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
        self.last_flat_result = NO_FLAT_RESULT
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

    @property
    def local_experiment_path(self) -> str | None:
        """The experiment's directory on this machine (as Ray's property)."""
        return self.experiment_path

    @property
    def experiment_dir_name(self) -> str | None:
        """The experiment directory's name (as Ray's property)."""
        return (
            os.path.basename(self.experiment_path.rstrip(os.sep)) if self.experiment_path else None
        )

    def get_error(self) -> str | None:
        """The text of the trial's last error report (``error.txt``); None if it has none."""
        if not self.error_file or not os.path.exists(self.error_file):
            return None
        with open(self.error_file, encoding="utf-8", errors="replace") as f:
            return f.read()

    def get_pickled_error(self) -> BaseException | None:
        """The exception of the trial's last error, unpickled; None if none was saved."""
        path = self.pickled_error_file
        if not path and self.error_file:  # beside the text report
            path = os.path.join(os.path.dirname(self.error_file), R.EXPR_ERROR_PICKLE_FILE)
        if not path or not os.path.exists(path):
            return None
        import cloudpickle  # here: only a failed trial's reader needs it

        with open(path, "rb") as f:
            error = cloudpickle.load(f)
        return error if isinstance(error, BaseException) else None

    # ------------------------------------------------------------------ state
    def set_status(self, status: TrialStatus) -> None:
        if status is TrialStatus.RUNNING and self.start_time is None:
            self.start_time = time.time()
        self.status = TrialStatus(status)
        if self.is_finished():
            self._finish_stats()
        elif self._packed is not None:
            self._unpack_in_place()

    def __getstate__(self) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        # A packed blob is only valid in this process: pickles and copies get it unpacked.
        slots = {name: getattr(self, name) for name in _STATE_SLOTS if hasattr(self, name)}
        if self._packed is not None:
            slots["_last_result"], slots["_stats"] = self._unpacked()
            slots["_packed"] = None
        return self.__dict__ or None, slots

    def set_config(self, config: dict[str, Any]) -> None:
        self.config = config

    def set_experiment_tag(self, experiment_tag: str) -> None:
        self.experiment_tag = experiment_tag

    def is_finished(self) -> bool:
        return self.status in (TrialStatus.TERMINATED, TrialStatus.ERROR)

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


_STATE_SLOTS = tuple(
    name
    for cls in Trial.__mro__
    for name in getattr(cls, "__slots__", ())
    if not name.startswith("__")
)
