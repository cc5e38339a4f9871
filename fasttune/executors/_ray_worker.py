"""Inside a Ray actor: the worker loop, driven by the driver's ``step`` calls.

The actor runs the same :class:`~fasttune.executors.worker_loop.WorkerLoop` as a
local worker process. Each :meth:`RayWorker.step` call carries the commands the driver
sent since the last one and returns the events as pickled bytes with whether the
trial may train further; the driver keeps a call in flight for every actor that may
train, so a trial runs ahead exactly as far as on a local worker. Where the loop runs:

- in the actor's main thread, inside the calls, by default: a call applies its
  commands, trains one batch if the trial may (credit, lookahead, buffer time: the
  same flow control) and returns. A class Trainable's methods run there, as in Ray
  Tune.
- in a thread of its own (:mod:`._loop_thread`) for a function trainable in a run
  where nothing decides on a result (``lookahead_s`` infinite: the trial never waits
  for the driver): it trains on while Ray returns one call and starts the next
  (~0.7 ms, which each result of a trial with long iterations waited for), and a
  call only hands over commands and takes the events. Ray Tune runs a function
  trainable in a thread too.

This module does not import Ray at import time (the driver decorates
:class:`RayWorker` with ``ray.remote`` itself).
"""

from __future__ import annotations

import math
import os
import pickle
import sys
from dataclasses import replace
from typing import Any

from fasttune._support.pickling import dumps
from fasttune.executors._loop_thread import LoopThread, ThreadTransport
from fasttune.executors._ray_child_check import install as install_child_check
from fasttune.executors._trial_hosting import set_env
from fasttune.executors._trial_output import TrialOutput
from fasttune.executors.base import Event, TrialLaunch
from fasttune.executors.worker_commands import START, Command, TransportClosed
from fasttune.executors.worker_loop import WorkerLoop
from fasttune.trainable.function_trainable import FunctionTrainable

CLOSE_WAIT_S = 0.9
"""How long :meth:`RayWorker.close` waits for a loop thread's trainable to stop (the
driver kills the actor after its own grace period of 1 s)."""


class OutboxTransport:
    """A :class:`~fasttune.executors.worker_commands.Transport` that collects pickled events.

    Events are pickled as they are sent, so a result that cannot be pickled fails its
    trial in the worker loop (as over a pipe) rather than the whole ``step`` call.
    """

    def __init__(self) -> None:
        self.outbox: list[bytes] = []

    def send(self, event: Event) -> None:
        self.outbox.append(dumps(event))

    def pack(self, event: Event) -> bytes:
        return dumps(event)

    def send_packed(self, packed: list[bytes]) -> None:
        self.outbox.extend(packed)

    def poll(self) -> bool:
        return False  # commands arrive with the next step call

    def recv(self) -> Command:
        raise TransportClosed("commands arrive with step calls")


class RayWorker:
    """The body of one Ray actor: hosts one Trainable at a time (reused with ``reuse``).

    Args:
        sys_path: The driver's ``sys.path``; entries missing here are appended, so
            that a trainable pickled by reference (a module next to the driver's
            script) imports on a node sharing the driver's files.
    """

    def __init__(self, sys_path: list[str]):
        for entry in sys_path:
            if entry not in sys.path:
                sys.path.append(entry)
        self._classes: dict[str, type] = {}  # unpickled trainables, by key
        self._transport = OutboxTransport()
        self._loop = self._new_loop(self._transport)
        self._thread: LoopThread | None = None  # where the loop runs, if not in calls
        self._placed_loop = False  # where the loop runs was chosen (at the first start)
        install_child_check()  # what a trial starts must fit its group (Ray Tune checks)
        self._output: TrialOutput | None = None  # the hosted trial's, to upload

    def _new_loop(self, transport: OutboxTransport | ThreadTransport) -> WorkerLoop:
        return WorkerLoop(
            transport, isolated=True, sets_visible_gpus=False, class_cache=self._classes
        )

    def step(
        self, commands: bytes, trainable_blob: bytes | None = None
    ) -> tuple[list[bytes], bool]:
        """Apply ``commands`` (a pickled list), then train one batch if the trial may
        (not in the call that starts a trial, whose ``TrialStarted`` returns at once).

        Args:
            commands: The pickled ``[(op, argument), ...]`` sent since the last call.
            trainable_blob: The trainable of a ``START`` whose launch carries none (the
                driver puts each trainable in the object store once).

        Returns:
            The pickled events, in order, and whether the trial may train further.
        """
        received: list[Command] = pickle.loads(commands)
        started = False
        for index, (op, argument) in enumerate(received):
            if op == START:
                argument = self._placed(argument, trainable_blob)
                received[index] = (op, argument)
                started = True
                self._upload_output(ended=True)  # a reused actor's previous trial
                self._output = TrialOutput.of(argument)
                if self._output is not None:
                    self._output.fetch()
                if not self._placed_loop:
                    self._place_loop(argument)
        if self._thread is not None:
            events, can_train = self._thread.exchange(received)
        else:
            loop = self._loop
            for command in received:
                loop.handle(command)
            # TrialStarted goes back at once (the driver queues a call to train behind it).
            if not started and loop.can_train and not loop.retired:
                loop.train_batch()
            events, self._transport.outbox = self._transport.outbox, []
            can_train = loop.can_train
        output = self._output
        if output is not None and (output.trial_id != self._loop.trial_id or output.due()):
            self._upload_output(ended=output.trial_id != self._loop.trial_id)
        return events, can_train

    def _place_loop(self, launch: TrialLaunch) -> None:
        """At the first start: run the loop in a thread of its own for a function
        trainable that never waits for the driver (see the module doc)."""
        self._placed_loop = True
        if not math.isinf(launch.lookahead_s):
            return
        # Unpickled here, before the loop enters the trial's folder: what a module of
        # the trainable reads at import is set as the loop would set it.
        set_env("TUNE_ORIG_WORKING_DIR", os.getcwd())
        try:
            cls = self._loop.trainable_class(launch)  # cached for the loop that runs it
        except (Exception, SystemExit):  # as the loop catches them
            return  # the loop fails the trial with this error, in the calls
        if isinstance(cls, type) and issubclass(cls, FunctionTrainable):
            self._thread = LoopThread(self._new_loop, name="fasttune-trial")
            self._loop = self._thread.loop

    def _upload_output(self, *, ended: bool) -> None:
        """Upload the hosted trial's captured output (it may run on a node whose disk
        the driver does not see); forget it once the trial ended."""
        output = self._output
        if output is not None:
            output.upload()
            if ended:
                self._output = None

    def close(self) -> None:
        """Stop the hosted Trainable, if any (before the driver kills the actor)."""
        if self._thread is not None:
            self._thread.stop(CLOSE_WAIT_S)
        else:
            self._loop.close()
        self._upload_output(ended=True)

    @staticmethod
    def _placed(launch: Any, trainable_blob: bytes | None) -> Any:
        """The launch with the GPUs Ray gave this actor (and the trainable, if sent apart)."""
        import ray

        gpu_ids = tuple(str(g) for g in ray.get_gpu_ids())
        launch = replace(launch, allocation=replace(launch.allocation, gpu_ids=gpu_ids))
        if trainable_blob:
            launch = replace(launch, trainable_blob=trainable_blob)
        return launch
