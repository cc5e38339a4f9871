"""The worker-side loop shared by every executor: host one Trainable, obey commands.

A :class:`WorkerLoop` hosts at most one Trainable at a time. It reads commands
(:mod:`~fasttune.executors.worker_commands`) from a transport and sends
:mod:`~fasttune.executors.base` events back through it. Executors differ only in the
transport: a pipe to a worker process (:mod:`~fasttune.executors.local`), in-process
queues (:mod:`~fasttune.executors.inline`) or a Ray actor's calls.

Events of one trial are sent in this order: ``TrialStarted``, then
``TrialResults``/``TrialSaved`` as they happen, then exactly one of
``TrialStopped``/``TrialFailed`` (a failed start sends only ``TrialFailed``).
"""

from __future__ import annotations

import logging
import os
import pickle
import time
import traceback
from dataclasses import replace
from typing import Any

from fasttune import result as R
from fasttune.executors._claims import claim
from fasttune.executors._learned_imports import environ_changes, imported_since
from fasttune.executors._trial_hosting import (
    fetch_checkpoint,
    logger_creator,
    meets_criteria,
    pickle_exception,
    resets_quietly,
    set_env,
    user_config,
)
from fasttune.executors.base import (
    Event,
    TrialFailed,
    TrialLaunch,
    TrialResults,
    TrialSaved,
    TrialStarted,
    TrialStopped,
    TrialUnqueued,
)
from fasttune.executors.flow_control import (
    COMMAND_POLL_S,
    may_run,
    next_iteration_estimate,
    should_send,
)
from fasttune.executors.worker_commands import (
    EXIT,
    GRANT,
    QUEUE,
    SAVE,
    START,
    STOP,
    Command,
    Transport,
    TransportClosed,
)
from fasttune.experiment.metric_stats import stats_of
from fasttune.logger.trial_result_files import TrialResultFiles
from fasttune.storage.filesystem import make_dir

logger = logging.getLogger(__name__)

# Exceptions of user code that become TrialFailed (KeyboardInterrupt is left alone
# so that Ctrl-C still works with the inline executor).
_TRIAL_ERRORS = (Exception, SystemExit)


class WorkerLoop:
    """Runs the commands of one worker against the Trainable it hosts.

    Args:
        transport: Where commands come from and events go.
        isolated: True when the loop owns its process: it then sets
            ``CUDA_VISIBLE_DEVICES`` and ``TUNE_ORIG_WORKING_DIR`` and changes into
            the trial directory. False (inline) leaves the process as it is.
        class_cache: Unpickled Trainable classes by ``trainable_key``, shareable
            between loops of one process.
        sets_visible_gpus: Whether an isolated loop sets ``CUDA_VISIBLE_DEVICES`` to
            the trial's GPUs; False where the process's host already did (a Ray
            actor: Ray sets it for an actor with GPUs and leaves it as the node has it
            for one without, as Ray Tune's trials see it).
        modules_at_start: ``len(sys.modules)`` when the worker process started, for
            a retiring worker to name what it imported since (``TrialStopped.imported``);
            None names nothing.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        isolated: bool = True,
        class_cache: dict[str, type] | None = None,
        sets_visible_gpus: bool = True,
        modules_at_start: int | None = None,
    ):
        self._transport = transport
        self._modules_at_start = modules_at_start
        self._environ: dict[str, str] | None = None  # os.environ as the hosted trial began
        self._isolated = isolated
        self._sets_visible_gpus = sets_visible_gpus
        self._classes: dict[str, type] = {} if class_cache is None else class_cache
        self._orig_cwd = os.getcwd()
        self._trainable: Any = None  # live Trainable: hosting a trial, or idle for reuse
        self._key: str | None = None  # trainable_key of the live Trainable
        self._launch: TrialLaunch | None = None  # the hosted trial
        self._credit = 0
        self._unacked = 0  # iterations run that the driver has not granted back yet
        self._iteration_s = 0.0  # estimated duration of the hosted trial's iterations
        self._finished = False  # the hosted trial reported done: wait for commands
        self._saved: tuple[str, int] | None = None  # (trial id, iteration) last saved
        self._uploaded: str | None = None  # the checkpoint last uploaded to storage
        self._files: TrialResultFiles | None = None  # the hosted trial's result files
        self._checkpoint_unacked = False  # a result with a checkpoint awaits its grant
        self._interrupting: Command | None = None  # the command that ended a batch
        # Launches to start in turn once the hosted trial stops, each with its claim file
        self._queued: list[tuple[TrialLaunch, str]] = []
        # Events packed to go as one message (see _send), or None: each goes at once.
        self._held: list[Any] | None = None
        self.retired = False  # the last trial ended and nothing is kept for reuse
        self.exit_requested = False

    # ------------------------------------------------------------------ state
    @property
    def trial_id(self) -> str | None:
        """The hosted trial, or None when idle."""
        return None if self._launch is None else self._launch.trial_id

    @property
    def can_train(self) -> bool:
        """True when the hosted trial is not done and may start its next iteration.

        It needs credit left, its lookahead under ``launch.lookahead_s``:
        unacknowledged iterations x estimated iteration time (with none unacknowledged
        it may always run), and no result with a checkpoint awaiting its grant.
        """
        launch = self._launch
        return (
            launch is not None
            and not self._finished
            and not (self._checkpoint_unacked and self._unacked)
            and may_run(self._credit, self._unacked, self._iteration_s, launch.lookahead_s)
        )

    # ------------------------------------------------------------------ driving
    def run(self) -> None:
        """Serve commands until ``EXIT``, the end of the transport, or retirement."""
        transport = self._transport
        try:
            while not (self.exit_requested or self.retired):
                if self.can_train:
                    self.train_batch()
                    while transport.poll() and not (self.exit_requested or self.retired):
                        self.handle(transport.recv())
                else:
                    self.handle(transport.recv())
        except TransportClosed:
            pass
        finally:
            self.close()

    def handle(self, command: Command) -> None:
        """Execute one command."""
        op, argument = command
        if op == GRANT:  # also acknowledges that many results
            if self._launch is not None:
                self._credit += argument
                self._unacked = max(0, self._unacked - argument)
                if not self._unacked:
                    self._checkpoint_unacked = False
        elif op == START:
            self._start(argument)
        elif op == QUEUE:
            self._queue(*argument)
        elif op == SAVE:
            self._save()
        elif op == STOP:
            self._stop()
        elif op == EXIT:
            self.exit_requested = True
        else:
            raise ValueError(f"unknown worker command {op!r}")

    def close(self) -> None:
        """Stop the live Trainable, if any (best effort)."""
        self._launch = None
        self._queued = []
        try:
            self._close_files()
        finally:
            self._discard_trainable()

    # ------------------------------------------------------------------ training
    def train_batch(self) -> None:
        """Train while :attr:`can_train`, sending the results as one ``TrialResults``.

        The batch ends after a result that is done, a duplicate, or carries or asks
        for a checkpoint; when the buffer is full; when the next result would come
        later than ``buffer_time_s`` after the first; when the lookahead would be used
        up after the next iteration (so the acknowledgement travels while it runs); or
        when a command other than a grant is waiting (handled once the batch is sent;
        grants are applied as they come).
        """
        launch = self._launch
        if launch is None or not self.can_train:
            return
        trainable = self._trainable
        poll = self._transport.poll
        max_length = launch.max_buffer_length
        deadline = 0.0
        buffer: list[dict[str, Any]] = []
        failure: BaseException | None = None
        save_now = False
        frequency = launch.checkpoint_frequency
        criteria = launch.stop_criteria
        lookahead_s = launch.lookahead_s
        iteration_s = self._iteration_s
        poll_at = 0.0
        try:
            while may_run(self._credit, self._unacked, iteration_s, lookahead_s):
                started = time.monotonic()
                result = trainable.train()
                now = time.monotonic()
                elapsed = now - started
                iteration_s = next_iteration_estimate(iteration_s, elapsed)
                self._iteration_s = iteration_s
                self._credit -= 1
                self._unacked += 1
                buffer.append(result)
                if result.get(R.DONE) or result.get(R.RESULT_DUPLICATE):
                    self._finished = True
                    break
                if criteria and meets_criteria(result, criteria):
                    result[R.DONE] = True  # as the controller marks it
                    self._finished = True  # the controller stops it; never run past this
                    break
                checkpoint_name = result.get(R.CHECKPOINT_DIR_NAME)
                if not checkpoint_name and (
                    result.get(R.SHOULD_CHECKPOINT)
                    or (frequency and result.get(R.TRAINING_ITERATION, 0) % frequency == 0)
                ):
                    save_now = True
                    break
                if checkpoint_name:
                    if launch.storage is not None:
                        try:  # in storage before the result that names it is sent
                            self._upload(os.path.join(launch.trial_dir, checkpoint_name))
                        except _TRIAL_ERRORS:
                            buffer.pop()
                            raise
                    # Train on once the driver has it: a driver killed meanwhile would
                    # restore an older checkpoint, and more than its interval would rerun.
                    self._checkpoint_unacked = True
                    break
                if len(buffer) >= max_length:
                    break
                if len(buffer) == 1:
                    deadline = now + launch.buffer_time_s
                if should_send(now, elapsed, deadline, self._unacked, iteration_s, lookahead_s):
                    break
                if now >= poll_at:  # a system call: at most every COMMAND_POLL_S
                    poll_at = now + COMMAND_POLL_S
                    if poll() and not self._take_grants():
                        break
        except TransportClosed:
            raise  # the driver is gone: not the trial's failure
        except _TRIAL_ERRORS as exc:
            failure = exc
        event = None
        if buffer and self._files is not None:
            try:  # in the files before the driver hears of them
                flats = self._files.write(buffer)
            except OSError as exc:
                self._fail(exc, "write")
                return
            if flats is not None and launch.last_result_only:
                # The driver gets the last result (and a closing duplicate after it);
                # the others are in the files, and it gets their statistics.
                shown = 2 if buffer[-1].get(R.RESULT_DUPLICATE) else 1
                unseen = len(buffer) - shown
                if unseen > 0:
                    event = TrialResults(
                        launch.trial_id,
                        buffer[unseen:],
                        unseen=unseen,
                        unseen_stats=stats_of(flats[:unseen]),
                    )
        if self._finished and launch.stop_when_done and failure is None:
            # The trial's last results, its end and the start of the trial queued
            # behind it go to the driver as one message (released before user code).
            self._held = []
        try:
            if buffer:  # results before a failure still count
                try:
                    self._send(event or TrialResults(launch.trial_id, buffer))
                except TransportClosed:
                    raise
                except _TRIAL_ERRORS as exc:  # e.g. a result that cannot be pickled
                    failure = failure or exc
            if failure is not None:
                self._fail(failure, "train")
            elif save_now:
                self._save()
            elif self._finished and launch.stop_when_done:
                self._stop()
        finally:
            self._release()
        interrupting, self._interrupting = self._interrupting, None
        if interrupting is not None:
            self.handle(interrupting)

    def _take_grants(self) -> bool:
        """Apply the waiting commands while they are grants (or queued launches);
        False at another one.

        A grant only adds credit and acknowledges results, so it need not end a batch
        (the driver answers every batch with one: were it to end the next, batches
        would shrink to the driver's round trip); a queued launch is only kept. Any
        other command ends the batch and is handled right after it is sent.
        """
        transport = self._transport
        while transport.poll():
            command = transport.recv()
            if command[0] != GRANT and command[0] != QUEUE:
                self._interrupting = command
                return False
            self.handle(command)
        return True

    # ------------------------------------------------------------------ commands
    def _queue(self, launch: TrialLaunch, claim_path: str) -> None:
        """Keep ``launch`` to start once the hosted trial and those queued before it
        have run; with nothing hosted (the trial ahead stopped before this arrived: the
        driver reads that trial's ``TrialStopped`` as handing over), start it now."""
        self._queued.append((launch, claim_path))
        if self._launch is None and not self.retired:
            successor = self._claim_next()
            if successor is not None:
                self._start(successor)

    def _claim_next(self) -> TrialLaunch | None:
        """The first queued launch the driver has not taken back (now claimed)."""
        while self._queued:
            launch, claim_path = self._queued.pop(0)
            if claim(claim_path):
                return launch
        return None

    def _give_back_queued(self) -> None:
        """Give every queued launch back (this worker retires)."""
        queued, self._queued = self._queued, []
        for launch, _ in queued:
            self._send(TrialUnqueued(launch.trial_id))

    def _start(self, launch: TrialLaunch) -> None:
        if not os.path.isabs(launch.trial_dir):  # paths must survive the chdir
            launch = replace(launch, trial_dir=os.path.abspath(launch.trial_dir))
        if launch.restore_path and not os.path.isabs(launch.restore_path):
            launch = replace(launch, restore_path=os.path.abspath(launch.restore_path))
        self._launch = launch
        self._uploaded = None
        self._credit = launch.initial_credit
        self._unacked = 0
        self._checkpoint_unacked = False
        self._iteration_s = 0.0
        self._finished = False
        during = "start"
        reused = False
        try:
            self._enter_trial_environment(launch)
            # What the trial's own code finds: its changes go with what it imported (the
            # server learns an import only if importing makes them by itself).
            self._environ = dict(os.environ) if launch.report_imports else None
            creator = logger_creator(launch.trial_dir)
            if not (
                launch.reuse
                and self._key == launch.trainable_key
                and resets_quietly(self._trainable)
            ):
                self._release()  # user code (setup, reset_config) may take long
            if self._trainable is not None:
                if launch.reuse and self._key == launch.trainable_key:
                    during = "reset"
                    reused = bool(self._trainable.reset(launch.config, logger_creator=creator))
                    during = "start"
                if not reused:
                    self._discard_trainable()
            if not reused:
                cls = self.trainable_class(launch)
                self._trainable = cls(config=launch.config, logger_creator=creator)
                self._key = launch.trainable_key
            if launch.restore_path:
                self._release()  # downloads, copies, the user's load_checkpoint
                during = "restore"
                if launch.storage is not None:
                    fetch_checkpoint(launch.storage, launch.restore_path)
                    self._uploaded = launch.restore_path  # in storage already
                self._trainable.restore(launch.restore_path)
            if launch.result_files is not None:
                during = "write"
                self._files = TrialResultFiles(
                    launch.trial_dir, launch.result_files, user_config(launch.config)
                )
        except _TRIAL_ERRORS as exc:
            self._fail(exc, during)
            return
        self._send(TrialStarted(launch.trial_id, reused=reused))

    def _save(self) -> None:
        self._release()
        launch = self._launch
        if launch is None:
            return
        iteration = self._trainable.iteration
        if self._saved == (launch.trial_id, iteration):
            return  # e.g. checkpoint_at_end right after a periodic checkpoint
        if not self._trainable.has_checkpoint_state():
            # e.g. a function that reported no checkpoint yet: nothing worth saving.
            self._send(TrialSaved(launch.trial_id, checkpoint_path="", iteration=iteration))
            return
        try:
            path = self._trainable.save()
            if launch.storage is not None:
                self._upload(path)
        except _TRIAL_ERRORS as exc:
            self._fail(exc, "save")
            return
        self._saved = (launch.trial_id, iteration)
        self._send(TrialSaved(launch.trial_id, checkpoint_path=path, iteration=iteration))

    def _stop(self) -> None:
        launch = self._launch
        if launch is None:
            return
        self._credit = 0
        try:
            self._close_files()
        except OSError as exc:
            self._fail(exc, "write")
            return
        if not launch.reuse:
            self._release()
            trainable, self._trainable, self._key = self._trainable, None, None
            try:
                trainable.stop()
            except _TRIAL_ERRORS as exc:
                self._fail(exc, "stop")
                return
            self.retired = True
        # With reuse the live Trainable stays idle until the next START resets it.
        self._launch = None
        successor = None if self.retired else self._claim_next()
        if successor is None:
            imported: tuple[str, ...] = ()
            changes: tuple[tuple[str, str | None], ...] = ()
            if self.retired and self._modules_at_start is not None and self._environ is not None:
                imported = imported_since(self._modules_at_start)
                changes = environ_changes(self._environ) if imported else ()
            self._send(TrialStopped(launch.trial_id, imported=imported, environ_changes=changes))
            if self.retired:
                self._give_back_queued()
            return
        # The first queued trial takes this trial's place (and resources) at once.
        self._send(TrialStopped(launch.trial_id, successor=successor.trial_id))
        self._start(successor)

    # ------------------------------------------------------------------ helpers
    def _upload(self, checkpoint_dir: str) -> None:
        """Upload a checkpoint this worker made to the experiment's storage, once."""
        launch = self._launch
        if launch is None or launch.storage is None or checkpoint_dir == self._uploaded:
            return
        launch.storage.upload_dir(checkpoint_dir)
        self._uploaded = checkpoint_dir

    def _enter_trial_environment(self, launch: TrialLaunch) -> None:
        make_dir(launch.trial_dir)
        if not self._isolated:
            return
        if self._sets_visible_gpus:
            # Before the class is unpickled: importing a CUDA library may read it.
            set_env("CUDA_VISIBLE_DEVICES", ",".join(launch.allocation.gpu_ids))
        set_env("TUNE_ORIG_WORKING_DIR", self._orig_cwd)
        os.chdir(launch.trial_dir if launch.chdir else self._orig_cwd)

    def trainable_class(self, launch: TrialLaunch) -> type:
        """The launch's Trainable class: unpickled once per ``trainable_key``, then
        from the class cache.

        Raises:
            RuntimeError: If the key is new here and the launch carries no trainable.
        """
        cls = self._classes.get(launch.trainable_key)
        if cls is None:
            if not launch.trainable_blob:
                raise RuntimeError(
                    f"this worker has no trainable for key {launch.trainable_key!r} and the "
                    "launch carries no trainable_blob"
                )
            cls = pickle.loads(launch.trainable_blob)
            self._classes[launch.trainable_key] = cls
        return cls

    def _close_files(self) -> None:
        files, self._files = self._files, None
        if files is not None:
            files.close()

    def _fail(self, exc: BaseException, during: str) -> None:
        trial_id = self._launch.trial_id if self._launch is not None else ""
        try:
            self._close_files()
        except OSError:
            logger.warning("Closing the result files of %s failed", trial_id, exc_info=True)
        event = TrialFailed(
            trial_id,
            error="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            exc_type=type(exc).__name__,
            during=during,
            exception=pickle_exception(exc),
        )
        self._credit = 0
        if during != "stop":
            self._discard_trainable()
        # Hosting nothing only now, after the trainable's cleanup: a Ray actor's calls
        # read this (from another thread) to upload the trial's output once it ended.
        self._launch = None
        self._trainable = self._key = None
        self.retired = True
        self._send(event)
        self._give_back_queued()

    def _send(self, event: Event) -> None:
        """Send ``event``, or pack it to go with the others held (see :meth:`_release`)."""
        if self._held is None:
            self._transport.send(event)
        else:
            self._held.append(self._transport.pack(event))

    def _release(self) -> None:
        """Send the held events as one message; events go one by one again. Called
        before user code runs, so that nothing waits on it."""
        held, self._held = self._held, None
        if held:
            self._transport.send_packed(held)

    def _discard_trainable(self) -> None:
        self._release()
        trainable, self._trainable, self._key = self._trainable, None, None
        if trainable is None:
            return
        try:
            trainable.stop()
        except _TRIAL_ERRORS:
            logger.warning("Stopping a discarded Trainable raised", exc_info=True)
