"""``LocalExecutor``: each trial in a worker process of this machine.

Workers are forked from a fork server that has fasttune imported, so a new one is
ready in milliseconds. Each runs the shared worker loop over a pipe; :meth:`poll`
waits on every pipe and every worker's exit sentinel at once, so a worker that
dies (signal, segfault, OOM, ``os._exit``) becomes a ``TrialFailed`` event with
``exc_type="WorkerDied"``, never a hang.

Without reuse a worker hosts exactly one trial and exits after it. When a trial
that allowed reuse stops, its worker keeps the live Trainable and waits; a later
trial with the same ``trainable_key`` and the same GPU ids takes it over through
``Trainable.reset``.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import sys
import time
import weakref
from dataclasses import replace

from fasttune._support.pickling import dumps
from fasttune.executors import _forkserver
from fasttune.executors._claims import ClaimDirectory, claim
from fasttune.executors._worker_process import TARGET
from fasttune.executors._workers import Worker, describe_exit, shutdown_workers
from fasttune.executors.base import (
    Event,
    Executor,
    TrialFailed,
    TrialLaunch,
    TrialResults,
    TrialStarted,
    TrialStopped,
    TrialUnqueued,
)
from fasttune.executors.worker_commands import (
    EXIT,
    GRANT,
    QUEUE,
    SAVE,
    START,
    STOP,
    Command,
    split_events,
    warn_reset_once,
)
from fasttune.result import DONE

logger = logging.getLogger(__name__)


class LocalExecutor(Executor):
    """Runs trials in local worker processes.

    Args:
        max_workers: Processes kept at most: idle workers are shut down rather than
            exceed it (running trials are never refused). Defaults to the CPU count.
        start_method: How workers start; only ``"forkserver"`` is supported.
        prestart: Keep one fresh worker forked ahead (not counted in ``max_workers``),
            so that a trial needing a new process does not wait for the fork.

    Example:
        >>> executor = LocalExecutor(max_workers=2)
        >>> executor.num_running
        0
        >>> executor.shutdown()
    """

    writes_result_files = True  # the workers share this machine's disk
    queue_depth = 16  # at most: the controller queues what covers a few ms (trial_queue)

    def __init__(
        self,
        max_workers: int | None = None,
        start_method: str = "forkserver",
        prestart: bool = True,
    ):
        if max_workers is not None and (not isinstance(max_workers, int) or max_workers < 1):
            raise ValueError(f"max_workers must be a positive int or None, got {max_workers!r}")
        if start_method != "forkserver":
            raise ValueError(
                f"start_method must be 'forkserver', got {start_method!r}; workers are "
                "forked from a server process that has fasttune imported."
            )
        self._max_workers = max_workers or os.cpu_count() or 1
        self._server = _forkserver.default_server()
        self._selector = selectors.DefaultSelector()
        self._workers: set[Worker] = set()
        self._trials: dict[str, Worker] = {}
        self._queued: dict[str, Worker] = {}  # queued trial -> the worker it waits on
        self._unqueued: list[Event] = []  # TrialUnqueued for workers killed here
        self._claims = ClaimDirectory()
        self._claim_of: dict[str, str] = {}  # queued trial -> its claim file
        self._idle: list[Worker] = []  # least recently used first
        self._prestart = prestart
        self._spare: Worker | None = None  # forked ahead, never hosted a trial
        self._warned_reset: set[str] = set()
        # What retiring workers imported under these packages is imported ahead too
        # (_learned_imports): those preload_modules(..., learn=True) named; once each.
        self._learns_from: set[str] = set()
        self._learned: set[str] = set()
        self._closed = False
        self._finalizer = weakref.finalize(self, shutdown_workers, self._workers, self._selector)

    # ------------------------------------------------------------------ commands
    def start_trial(self, launch: TrialLaunch) -> None:
        if self._closed:
            raise RuntimeError("start_trial() was called after shutdown()")
        if launch.trial_id in self._trials:
            raise ValueError(f"trial {launch.trial_id!r} is already running")
        worker = self._take_idle(launch) if launch.reuse else None
        if worker is None:
            self._make_room(launch.allocation.gpu_ids)
            worker = self._take_spare() or self._spawn()
            worker.gpu_ids = tuple(launch.allocation.gpu_ids)
        worker.reuse_attempt = worker.idle_key is not None
        worker.idle_key = None
        if self._learns_from and not launch.reuse:
            launch = replace(launch, report_imports=True)
        worker.launch = launch
        worker.started = worker.stopping = worker.stops_itself = False
        launch = self._without_known_blob(worker, launch)
        self._trials[launch.trial_id] = worker
        self._send(worker, (START, launch), dumps((START, launch)))
        if self._prestart and self._spare is None:
            self._spare = self._spawn()

    def queue_trial(self, after_trial_id: str, launch: TrialLaunch) -> bool:
        worker = self._trials.get(after_trial_id)
        hosted = worker.launch if worker is not None else None
        if (
            worker is None
            or hosted is None
            or worker.stopping
            or len(worker.queued) >= self.queue_depth
            or not (launch.reuse and hosted.reuse)
            or launch.trainable_key != hosted.trainable_key
            or tuple(launch.allocation.gpu_ids) != worker.gpu_ids
            or launch.trial_id in self._trials
            or launch.trial_id in self._queued
        ):
            return False
        launch = self._without_known_blob(worker, launch)
        worker.queued.append(launch)
        self._queued[launch.trial_id] = worker
        claim_path = self._claim_of[launch.trial_id] = self._claims.new_claim(launch.trial_id)
        command = (QUEUE, (launch, claim_path))
        self._send(worker, command, dumps(command))
        return True

    def unqueue_trial(self, trial_id: str) -> bool:
        worker = self._queued.get(trial_id)
        if worker is None or not claim(self._claim_of[trial_id]):
            return False  # its worker has it (or it is not queued)
        del self._queued[trial_id], self._claim_of[trial_id]
        worker.queued = [q for q in worker.queued if q.trial_id != trial_id]
        return True

    @staticmethod
    def _without_known_blob(worker: Worker, launch: TrialLaunch) -> TrialLaunch:
        """The launch without its trainable when the worker has that class already."""
        if launch.trainable_key in worker.keys:
            return replace(launch, trainable_blob=b"")
        worker.keys.add(launch.trainable_key)
        return launch

    def grant(self, trial_id: str, iterations: int) -> None:
        worker = self._trials.get(trial_id)
        if worker is not None and not worker.stopping:
            self._send(worker, (GRANT, iterations))

    def save_trial(self, trial_id: str) -> None:
        worker = self._trials.get(trial_id)
        if worker is not None and not worker.stopping:
            self._send(worker, (SAVE, None))

    def stop_trial(self, trial_id: str) -> None:
        worker = self._trials.get(trial_id)
        if worker is not None and not worker.stopping:
            worker.stopping = True
            if not worker.stops_itself:  # else its TrialStopped is already on its way
                self._send(worker, (STOP, None))

    def kill_trial(self, trial_id: str) -> None:
        worker = self._trials.pop(trial_id, None)
        if worker is None:
            return
        worker.launch = None
        worker.retiring = True
        worker.child.kill(signal.SIGKILL)
        self._close_conn(worker)
        self._drop_queued(worker, self._unqueued)

    def warm_up(self) -> None:
        """Start the fork server and fork the spare worker now, without waiting.

        Call it early (the Tuner does, before resolving its inputs) so that the
        first trial finds a worker ready.
        """
        if self._prestart and self._spare is None and not self._closed:
            self._spare = self._spawn()

    def preload_modules(self, *modules: str, learn: bool = False) -> None:
        """Import ``modules`` in the fork server, so that new workers start with them.

        Worth it for heavy imports (a deep-learning framework, the trainable's own
        module) when trials do not reuse workers. Only preload modules that are safe
        to import before a fork: no threads started and no GPU initialised on import.
        Import errors are ignored (a worker then imports the module itself).

        With ``learn``, the server also imports, from then on, what each retiring
        worker imported under the packages it was forked with (``_learned_imports``):
        what a library imports at its first use, such as ``torch._dynamo``.
        """
        if learn:
            self._learns_from.update(name.partition(".")[0] for name in modules)
        self._server.preload(tuple(modules))
        if self._spare is not None:  # forked before the import: replace it
            self._retire(self._spare)
            self._spare = None

    @property
    def num_running(self) -> int:
        return len(self._trials)

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the worker processes alive or not yet reaped (for tests and tools)."""
        return [w.child.pid for w in self._workers]

    # ------------------------------------------------------------------ events
    def poll(self, timeout: float | None) -> list[Event]:
        if self._closed:
            return []
        deadline = None if timeout is None else time.monotonic() + timeout
        events: list[Event] = self._unqueued
        self._unqueued = []
        wait: float | None = 0.0
        while True:
            for key, _ in self._selector.select(wait):
                worker, is_sentinel = key.data
                if is_sentinel:
                    if worker.child.sentinel == key.fd:
                        self._on_exit(worker, events)
                elif worker.child.conn is key.fileobj:
                    self._on_readable(worker, events)
            if events or not self._trials:
                return events
            if deadline is None:
                wait = None
            else:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    return events

    def _on_readable(self, worker: Worker, events: list[Event]) -> None:
        try:
            data = worker.child.conn.recv_bytes()
        except (EOFError, OSError):
            self._close_conn(worker)
            if worker.status_lost:
                self._on_death(worker, None, events)
            return
        for event in split_events(data):
            self._accept(worker, event, events)

    def _accept(self, worker: Worker, event: Event, events: list[Event]) -> None:
        if isinstance(event, TrialUnqueued):
            if self._queued.get(event.trial_id) is worker:
                del self._queued[event.trial_id], self._claim_of[event.trial_id]
                worker.queued = [q for q in worker.queued if q.trial_id != event.trial_id]
                events.append(event)
            return
        launch = worker.launch
        if launch is None or event.trial_id != launch.trial_id:
            return  # killed, or already ended
        if isinstance(event, TrialResults):
            if worker.stopping:
                return
            if launch.stop_when_done and event.results and event.results[-1].get(DONE):
                worker.stops_itself = True
        elif isinstance(event, TrialStarted):
            worker.started = True
            if worker.reuse_attempt and not event.reused:
                warn_reset_once(logger, self._warned_reset, launch.trainable_key)
        elif isinstance(event, (TrialStopped, TrialFailed)):
            del self._trials[launch.trial_id]
            worker.launch = None
            if isinstance(event, TrialStopped) and worker.queued and launch.reuse:
                # The worker goes straight on with the first trial queued behind this
                # one: it started it already, or does when its queue command arrives.
                queued = worker.queued.pop(0)
                del self._queued[queued.trial_id]
                self._claims.forget(self._claim_of.pop(queued.trial_id))  # the worker's now
                worker.launch = queued
                worker.started = worker.stopping = worker.stops_itself = False
                worker.reuse_attempt = True
                self._trials[queued.trial_id] = worker
                if event.successor != queued.trial_id:  # the worker names it (as a rule)
                    event = replace(event, successor=queued.trial_id)
                events.append(event)
                return
            self._drop_queued(worker, events)  # failed: it retires without starting it
            if isinstance(event, TrialStopped) and event.imported:
                self._learn_imports(event.imported, event.environ_changes)
            if isinstance(event, TrialStopped) and launch.reuse:
                worker.idle_key = launch.trainable_key
                self._idle.append(worker)
            else:
                worker.retiring = True  # the worker exits by itself
        events.append(event)

    def _learn_imports(
        self, imported: tuple[str, ...], environ_changes: tuple[tuple[str, str | None], ...]
    ) -> None:
        """Have the fork server import what a retiring worker imported under the
        packages preloading chose (once each, after its check in a throwaway child,
        which must make the trial's changes to the environment by itself)."""
        learns_from = self._learns_from
        new = [
            name
            for name in imported
            if name.partition(".")[0] in learns_from and name not in self._learned
        ]
        if new:
            self._learned.update(new)
            self._server.learn(tuple(new), environ_changes)

    def _on_exit(self, worker: Worker, events: list[Event]) -> None:
        self._selector.unregister(worker.child.sentinel)
        code = worker.child.read_exit_code()
        if code is None and worker.child.conn is not None:
            worker.status_lost = True  # no exit code: the fork server is gone
            return
        conn = worker.child.conn
        if conn is not None:  # results sent just before dying still count
            while not conn.closed and conn.poll(0):
                self._on_readable(worker, events)
        self._on_death(worker, code, events)

    def _on_death(self, worker: Worker, code: int | None, events: list[Event]) -> None:
        self._forget(worker)
        self._drop_queued(worker, events)
        launch = worker.launch
        if launch is None or worker.retiring:
            return
        del self._trials[launch.trial_id]
        worker.launch = None
        during = "stop" if worker.stopping else "train" if worker.started else "start"
        pid = worker.child.pid
        error = f"worker process {pid} died: {describe_exit(code)}"
        if worker.status_lost or pid < 0:
            error += " (the fork server that started it had died)"
        events.append(
            TrialFailed(launch.trial_id, error=error, exc_type="WorkerDied", during=during)
        )

    def _drop_queued(self, worker: Worker, events: list[Event]) -> None:
        """The trials queued on ``worker`` will not start there: they wait again."""
        queued, worker.queued = worker.queued, []
        for launch in queued:
            del self._queued[launch.trial_id], self._claim_of[launch.trial_id]
            events.append(TrialUnqueued(launch.trial_id))

    # ------------------------------------------------------------------ workers
    def _spawn(self) -> Worker:
        worker = Worker(self._server.spawn(TARGET), (), origin=_origin())
        self._workers.add(worker)
        self._selector.register(worker.child.conn, selectors.EVENT_READ, (worker, False))
        self._selector.register(worker.child.sentinel, selectors.EVENT_READ, (worker, True))
        return worker

    def _take_spare(self) -> Worker | None:
        spare, self._spare = self._spare, None
        if spare is not None and spare.origin != _origin():
            self._retire(spare)  # the driver changed its sys.path, cwd or environment
            return None
        return spare

    def _take_idle(self, launch: TrialLaunch) -> Worker | None:
        gpu_ids = tuple(launch.allocation.gpu_ids)
        for index in range(len(self._idle) - 1, -1, -1):
            worker = self._idle[index]
            if worker.idle_key == launch.trainable_key and worker.gpu_ids == gpu_ids:
                del self._idle[index]
                return worker
        return None

    def _make_room(self, gpu_ids: tuple[str, ...]) -> None:
        """Retire idle workers holding the GPUs wanted, or above ``max_workers``."""
        wanted = set(gpu_ids)
        for worker in [w for w in self._idle if wanted & set(w.gpu_ids)]:
            self._retire(worker)
        live = sum(1 for w in self._workers if not w.retiring and w is not self._spare)
        while self._idle and live + 1 > self._max_workers:
            self._retire(self._idle[0])
            live -= 1

    def _retire(self, worker: Worker) -> None:
        if worker in self._idle:
            self._idle.remove(worker)
        worker.idle_key = None
        worker.retiring = True
        self._send(worker, (EXIT, None))
        self._close_conn(worker)
        self._drop_queued(worker, self._unqueued)

    def _send(self, worker: Worker, command: Command, data: bytes | None = None) -> None:
        conn = worker.child.conn
        if conn is None or conn.closed:
            return
        try:
            conn.send_bytes(dumps(command) if data is None else data)
        except OSError:
            pass  # the worker died: its sentinel reports it

    def _close_conn(self, worker: Worker) -> None:
        conn = worker.child.conn
        if conn is None:
            return
        if not conn.closed:
            self._selector.unregister(conn)
            conn.close()
        worker.child.conn = None  # type: ignore[assignment]

    def _forget(self, worker: Worker) -> None:
        self._close_conn(worker)
        if worker.child.sentinel >= 0:
            self._selector.unregister(worker.child.sentinel)
            worker.child.close_sentinel()
        self._workers.discard(worker)
        if worker in self._idle:
            self._idle.remove(worker)
        if worker is self._spare:
            self._spare = None

    # ------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Stop every worker: ask them to exit, then terminate, then kill."""
        self._closed = True
        self._trials.clear()
        self._queued.clear()
        self._claim_of.clear()
        self._idle.clear()
        self._spare = None
        self._finalizer()
        self._claims.close()


def _origin() -> tuple[tuple[str, ...], str, dict[str, str]]:
    """What a new worker inherits from the driver: ``sys.path``, cwd, environment."""
    return tuple(sys.path), os.getcwd(), dict(os.environ)
