"""The executor interface: how the controller runs trials, whatever runs them.

The controller sends commands (start, grant more iterations, save, stop, kill) and
polls for :class:`Event` records. It never touches processes; executors never make
decisions. Every executor runs the same worker-side loop
(:mod:`fasttune.executors.worker_loop`), so they differ only in where that loop
runs and how it is reached.

How far a trial may run ahead of the controller (credit, grants, the lookahead
bound, batching) is set out in :mod:`fasttune.executors.flow_control`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Protocol

from fasttune.executors.flow_control import BUFFER_TIME_S, LOOKAHEAD_S, MAX_BUFFER_LENGTH
from fasttune.logger.trial_result_files import TrialFilesSpec
from fasttune.storage.mirror import StorageMirror


@dataclass(frozen=True)
class Allocation:
    """Resources assigned to one trial on this machine."""

    cpu: float = 1.0
    gpu: float = 0.0
    gpu_ids: tuple[str, ...] = ()
    memory: float = 0.0
    custom: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu,
            "gpu": self.gpu,
            "gpu_ids": list(self.gpu_ids),
            "memory": self.memory,
            "custom": dict(self.custom),
        }


__all__ = ["LOOKAHEAD_S"]  # re-exported: executors and tests name it from here


@dataclass(frozen=True)
class TrialLaunch:
    """Everything a worker needs to start (or resume) one trial.

    Attributes:
        trial_id: The trial's id.
        trainable_key: Identifies ``trainable_blob``; workers cache the unpickled class
            per key, and a reused worker may only host the same key.
        trainable_blob: The cloudpickled Trainable class.
        config: The trial's config, with ``TRIAL_INFO`` (and stdout/stderr file names
            when captured) inserted, as ``Trainable.__init__`` expects.
        trial_dir: The trial directory: logdir of the Trainable and, unless
            ``chdir`` is False, the worker's working directory.
        restore_path: A checkpoint directory to restore before training, or None.
        allocation: The trial's resources (``CUDA_VISIBLE_DEVICES`` comes from
            ``allocation.gpu_ids``; "" when the trial has no GPU).
        initial_credit: Iterations the trial may run before its first grant (at most:
            the lookahead bound may stop it sooner; see ``flow_control``).
        max_buffer_length: At most this many results per ``TrialResults`` event.
        buffer_time_s: A worker sends buffered results at least this often.
        lookahead_s: The lookahead bound, :data:`LOOKAHEAD_S` (``math.inf`` leaves only
            the credit, as tests of the credit itself do).
        chdir: Change into ``trial_dir`` (``RAY_CHDIR_TO_TRIAL_DIR=0`` disables).
        reuse: The controller allows reusing a worker's live Trainable via
            ``Trainable.reset``.
        checkpoint_frequency: Save after every iteration divisible by this (0: never),
            and after results with ``should_checkpoint``; done by the worker, so the
            checkpoint is of exactly that iteration whatever the credit.
        stop_criteria: ``{metric: threshold}``: the worker stops training after a result
            with ``result[metric] >= threshold`` (nested keys joined with "/"), exactly
            as after a ``done`` result, so a trial never runs past its stop condition.
        storage: For an experiment in remote storage, the staging directory's mirror:
            the worker uploads each checkpoint it makes before reporting it, and
            downloads ``restore_path`` when this machine has no copy. None: local.
        result_files: The result files the worker writes itself (see
            ``logger/trial_result_files.py``), or None: the driver's loggers write them.
        last_result_only: With ``result_files``: send only the last result of each
            batch, with the statistics of the others (their lines are in the files),
            because nothing on the driver looks at every result.
        stop_when_done: The trial stops by itself after its done result (as if told
            to, ``TrialStopped`` right after the results), because the driver's only
            answer would be a stop with nothing to save: one round trip less per trial
            (on a Ray cluster too).
        report_imports: A local worker that retires after this trial names what it
            imported meanwhile (``TrialStopped.imported``, ``_learned_imports``).
    """

    trial_id: str
    trainable_key: str
    trainable_blob: bytes
    config: dict[str, Any]
    trial_dir: str
    restore_path: str | None = None
    allocation: Allocation = field(default_factory=Allocation)
    initial_credit: int = 1
    max_buffer_length: int = MAX_BUFFER_LENGTH
    buffer_time_s: float = BUFFER_TIME_S
    lookahead_s: float = LOOKAHEAD_S
    chdir: bool = True
    reuse: bool = False
    checkpoint_frequency: int = 0
    stop_criteria: dict[str, Any] = field(default_factory=dict)
    storage: StorageMirror | None = None
    result_files: TrialFilesSpec | None = None
    last_result_only: bool = False
    stop_when_done: bool = False
    report_imports: bool = False


# ---------------------------------------------------------------------- events
@dataclass(frozen=True)
class Event:
    trial_id: str


@dataclass(frozen=True)
class TrialStarted(Event):
    """The Trainable is constructed (and restored); training has begun."""

    reused: bool = False


@dataclass(frozen=True)
class TrialResults(Event):
    """Results of consecutive iterations, in order (never empty).

    Attributes:
        results: The results.
        unseen: How many results came before ``results`` that are not sent (with
            ``TrialLaunch.last_result_only``): they are in the trial's files.
        unseen_stats: Their statistics (``experiment.metric_stats.stats_of``).
    """

    results: list[dict[str, Any]] = field(default_factory=list)
    unseen: int = 0
    unseen_stats: dict[str, list[Any]] | None = None


@dataclass(frozen=True)
class TrialSaved(Event):
    """A ``save`` command finished: the checkpoint directory and its iteration."""

    checkpoint_path: str = ""
    iteration: int = 0


@dataclass(frozen=True)
class TrialFailed(Event):
    """The trial's code raised, or its worker died.

    Attributes:
        error: Human-readable traceback text (or how the worker died).
        exc_type: Name of the exception class (or ``"WorkerDied"``).
        during: What the worker was doing: start, restore, train, save, reset, stop.
        exception: The pickled exception when it could be pickled, else None.
    """

    error: str = ""
    exc_type: str = ""
    during: str = "train"
    exception: bytes | None = None


@dataclass(frozen=True)
class TrialStopped(Event):
    """A ``stop`` command finished; the trial's resources may be reused.

    Attributes:
        successor: The trial queued behind this one (:meth:`Executor.queue_trial`)
            that its worker started right after it, with its resources; None if none.
        imported: Set by a local worker that retires after the trial: the submodules
            of preloaded packages it imported meanwhile (``_learned_imports``).
        environ_changes: With ``imported``: the variables of ``os.environ`` that
            changed during the trial (name, new value or None if removed).
    """

    successor: str | None = None
    imported: tuple[str, ...] = ()
    environ_changes: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class TrialUnqueued(Event):
    """A trial queued behind another (:meth:`Executor.queue_trial`) will not start
    there: the trial ahead of it failed, or its worker died or retired."""


# ---------------------------------------------------------------------- interface
class ResourceAccounting(Protocol):
    """What the controller asks about resources: does a trial's request fit, now or ever.

    Requests are :class:`~fasttune.execution.placement_groups.PlacementGroupFactory`
    objects. Locally the controller counts this machine's resources
    (``fasttune._internal.resources.ResourceManager``); an executor whose trials run
    elsewhere answers for its cluster (:meth:`Executor.resource_manager`).
    """

    @property
    def total(self) -> dict[str, float]:
        """All resources trials could get (``CPU``, ``GPU``, ``memory`` always present)."""
        ...

    def check_fits(self, pgf: Any, trial_name: str = "") -> None:
        """Raise ``ValueError`` (saying what to change) if the request can never fit."""

    def can_allocate(self, pgf: Any) -> bool:
        """True if the request fits now."""
        ...

    def try_allocate(self, trial_id: str, pgf: Any) -> Allocation | None:
        """Reserve the request for ``trial_id`` if it fits now, else None."""

    def release(self, trial_id: str) -> Allocation | None:
        """Free what ``trial_id`` holds; returns it (None if it held nothing)."""

    def usage_string(self) -> str:
        """Usage in Ray's words: ``"Logical resource usage: 2.0/8 CPUs, 0/0 GPUs"``."""
        ...


class Executor(abc.ABC):
    """Runs trials; see the module docstring for the flow-control contract."""

    #: Whether its workers can write their trials' result files into the trial
    #: directory the driver names (``TrialLaunch.result_files``): true where they
    #: share the driver's disk.
    writes_result_files: bool = False

    @abc.abstractmethod
    def start_trial(self, launch: TrialLaunch) -> None:
        """Start a trial; a ``TrialStarted`` (or ``TrialFailed``) event follows."""

    @abc.abstractmethod
    def grant(self, trial_id: str, iterations: int) -> None:
        """Allow a running trial ``iterations`` more iterations, acknowledging as many results."""

    @abc.abstractmethod
    def save_trial(self, trial_id: str) -> None:
        """Checkpoint the trial after its current iteration; ``TrialSaved`` follows."""

    @abc.abstractmethod
    def stop_trial(self, trial_id: str) -> None:
        """Stop the trial (``Trainable.stop()``); ``TrialStopped`` follows.

        Results produced after the command was sent are dropped by the executor.
        """

    @abc.abstractmethod
    def kill_trial(self, trial_id: str) -> None:
        """Stop a trial at once, without waiting for its code (no event follows)."""

    @abc.abstractmethod
    def poll(self, timeout: float | None) -> list[Event]:
        """Events since the last poll, waiting up to ``timeout`` s for the first."""

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Stop every trial and release every worker."""

    #: How many trials :meth:`queue_trial` can queue behind one running trial (0: none).
    queue_depth: int = 0

    def queue_trial(self, after_trial_id: str, launch: TrialLaunch) -> bool:
        """Queue ``launch`` on the worker of running trial ``after_trial_id``, behind
        that trial and those queued there before: it starts, with that trial's
        resources, as soon as they have run, without a round trip to the controller
        (for trials much shorter than that round trip).

        Returns False when it cannot be queued there (nothing was sent). Otherwise
        exactly one of these follows: the ``TrialStopped`` of the trial it is right
        behind, naming it as ``successor`` (it has started; its ``TrialStarted`` comes
        next), or ``TrialUnqueued`` (it is waiting again and will not start).
        """
        return False

    def unqueue_trial(self, trial_id: str) -> bool:
        """Take a queued trial back, now: True if it will not start (no event follows),
        False if its worker has started it or is starting it (the ``TrialStopped``
        naming it comes, or came), or it is not queued."""
        return False

    @property
    def num_running(self) -> int:
        """Trials started and not yet stopped."""
        return 0

    def resource_manager(self) -> ResourceAccounting | None:
        """The executor's own resource accounting, or None (the default): the
        controller then counts this machine's resources itself."""
        return None
