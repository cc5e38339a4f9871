"""Inside a Ray actor: the worker loop, driven by the driver's ``step`` calls.

The actor runs the same :class:`~fasttune.executors.worker_loop.WorkerLoop` as a
local worker process, in its main thread, with no thread or queue of its own. Each
:meth:`RayWorker.step` call carries the commands the driver sent since the last one;
the actor applies them, trains one batch if the trial may (credit, lookahead, buffer
time: the same flow control), and returns the events as pickled bytes with whether
it may train further. The driver keeps a call in flight for every actor that may
train, so a trial runs ahead exactly as far as on a local worker.

This module does not import Ray at import time (the driver decorates
:class:`RayWorker` with ``ray.remote`` itself).
"""

from __future__ import annotations

import pickle
import sys
from dataclasses import replace
from typing import Any

from fasttune._support.pickling import dumps
from fasttune.executors._ray_child_check import install as install_child_check
from fasttune.executors._trial_output import TrialOutput
from fasttune.executors.base import Event
from fasttune.executors.worker_commands import START, Command, TransportClosed
from fasttune.executors.worker_loop import WorkerLoop


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
        self._transport = OutboxTransport()
        self._loop = WorkerLoop(self._transport, isolated=True, sets_visible_gpus=False)
        install_child_check()  # what a trial starts must fit its group (Ray Tune checks)
        self._output: TrialOutput | None = None  # the hosted trial's, to upload

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
        loop = self._loop
        started = False
        for op, argument in pickle.loads(commands):
            if op == START:
                argument = self._placed(argument, trainable_blob)
                started = True
                self._upload_output(ended=True)  # a reused actor's previous trial
                self._output = TrialOutput.of(argument)
                if self._output is not None:
                    self._output.fetch()
            loop.handle((op, argument))
        # TrialStarted goes back at once (the driver queues a call to train behind it).
        if not started and loop.can_train and not loop.retired:
            loop.train_batch()
        output = self._output
        if output is not None and (output.trial_id != loop.trial_id or output.due()):
            self._upload_output(ended=output.trial_id != loop.trial_id)
        events, self._transport.outbox = self._transport.outbox, []
        return events, loop.can_train

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
