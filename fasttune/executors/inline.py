"""``InlineExecutor``: trials run inside the driver process, for tests and debugging.

It drives the same worker loop as the local executor, cooperatively: commands are
queued, and each :meth:`InlineExecutor.poll` applies them and lets every trial that
may train run one batch (up to its credit, lookahead, buffer length or buffer time).
Nothing runs between polls. It never changes the driver's working directory or
``CUDA_VISIBLE_DEVICES``, so a trainable sees the driver's environment.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import replace

from fasttune.executors.base import (
    Event,
    Executor,
    TrialFailed,
    TrialLaunch,
    TrialResults,
    TrialStarted,
    TrialStopped,
)
from fasttune.executors.worker_commands import (
    GRANT,
    SAVE,
    START,
    STOP,
    Command,
    TransportClosed,
    warn_reset_once,
)
from fasttune.executors.worker_loop import WorkerLoop

logger = logging.getLogger(__name__)


class _QueueTransport:
    """Commands in a deque; events appended to the executor's list."""

    def __init__(self, sink: list[Event]):
        self.commands: deque[Command] = deque()
        self._sink = sink

    def send(self, event: Event) -> None:
        self._sink.append(event)

    def pack(self, event: Event) -> Event:
        return event

    def send_packed(self, packed: list[Event]) -> None:
        self._sink.extend(packed)

    def poll(self) -> bool:
        return bool(self.commands)

    def recv(self) -> Command:
        if not self.commands:
            raise TransportClosed("no command queued")
        return self.commands.popleft()


class _InlineWorker:
    def __init__(self, classes: dict[str, type], gpu_ids: tuple[str, ...]):
        self.outbox: list[Event] = []
        self.transport = _QueueTransport(self.outbox)
        self.loop = WorkerLoop(self.transport, isolated=False, class_cache=classes)
        self.gpu_ids = gpu_ids
        self.launch: TrialLaunch | None = None
        self.stopping = False
        self.reuse_attempt = False
        self.idle_key: str | None = None


class InlineExecutor(Executor):
    """Runs trials in this process, one batch per trial per :meth:`poll`.

    Example:
        >>> executor = InlineExecutor()
        >>> executor.poll(timeout=0)
        []
        >>> executor.shutdown()
    """

    # Trials share the driver's memory (a memory:// storage is visible to them).
    runs_in_driver_process = True
    writes_result_files = True

    def __init__(self) -> None:
        self._classes: dict[str, type] = {}
        self._trials: dict[str, _InlineWorker] = {}
        self._idle: list[_InlineWorker] = []
        self._warned_reset: set[str] = set()
        self._closed = False

    # ------------------------------------------------------------------ commands
    def start_trial(self, launch: TrialLaunch) -> None:
        if self._closed:
            raise RuntimeError("start_trial() was called after shutdown()")
        if launch.trial_id in self._trials:
            raise ValueError(f"trial {launch.trial_id!r} is already running")
        gpu_ids = tuple(launch.allocation.gpu_ids)
        worker = None
        if launch.reuse:
            for candidate in reversed(self._idle):
                if candidate.idle_key == launch.trainable_key and candidate.gpu_ids == gpu_ids:
                    worker = candidate
                    self._idle.remove(candidate)
                    break
        if worker is None:
            worker = _InlineWorker(self._classes, gpu_ids)
        worker.reuse_attempt = worker.idle_key is not None
        worker.idle_key = None
        worker.launch = launch
        worker.stopping = False
        self._trials[launch.trial_id] = worker
        worker.transport.commands.append((START, replace(launch, chdir=False)))

    def grant(self, trial_id: str, iterations: int) -> None:
        self._queue(trial_id, (GRANT, iterations))

    def save_trial(self, trial_id: str) -> None:
        self._queue(trial_id, (SAVE, None))

    def stop_trial(self, trial_id: str) -> None:
        worker = self._trials.get(trial_id)
        if worker is not None and not worker.stopping:
            worker.stopping = True
            worker.transport.commands.append((STOP, None))

    def kill_trial(self, trial_id: str) -> None:
        worker = self._trials.pop(trial_id, None)
        if worker is not None:
            worker.launch = None
            worker.loop.close()

    @property
    def num_running(self) -> int:
        return len(self._trials)

    def _queue(self, trial_id: str, command: Command) -> None:
        worker = self._trials.get(trial_id)
        if worker is not None and not worker.stopping:
            worker.transport.commands.append(command)

    # ------------------------------------------------------------------ events
    def poll(self, timeout: float | None) -> list[Event]:
        """Apply queued commands and train each trial one batch; never sleeps."""
        events: list[Event] = []
        for worker in list(self._trials.values()):
            if worker.launch is None:
                continue  # killed by an earlier step of this poll
            commands = worker.transport.commands
            while commands and worker.launch is not None:
                worker.loop.handle(commands.popleft())
                self._collect(worker, events)
            if worker.launch is not None and worker.loop.can_train:
                worker.loop.train_batch()
                self._collect(worker, events)
        return events

    def _collect(self, worker: _InlineWorker, events: list[Event]) -> None:
        outbox = worker.outbox
        for event in outbox:
            launch = worker.launch
            if launch is None:
                break
            if isinstance(event, TrialResults) and worker.stopping:
                continue
            if isinstance(event, TrialStarted) and worker.reuse_attempt and not event.reused:
                warn_reset_once(logger, self._warned_reset, launch.trainable_key)
            if isinstance(event, (TrialStopped, TrialFailed)):
                del self._trials[launch.trial_id]
                worker.launch = None
                if isinstance(event, TrialStopped) and launch.reuse and not worker.loop.retired:
                    worker.idle_key = launch.trainable_key
                    self._idle.append(worker)
            events.append(event)
        outbox.clear()

    def shutdown(self) -> None:
        """Stop every Trainable, running or idle."""
        self._closed = True
        for worker in [*self._trials.values(), *self._idle]:
            worker.loop.close()
        self._trials.clear()
        self._idle.clear()
