"""A worker loop in a thread of its own, fed by calls that another thread serves.

A Ray actor serves the driver's calls one at a time, and between two calls Ray
returns one reply and starts the next call: ~0.7 ms on this machine, during which a
loop run inside the calls could not train. A :class:`LoopThread` runs the loop
(:meth:`~fasttune.executors.worker_loop.WorkerLoop.run`, as a local worker process
does over its pipe) in a thread, so training goes on while calls come and go: each
call hands the thread its commands and takes the events sent since the last one
(:meth:`LoopThread.exchange`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from fasttune._support.pickling import dumps
from fasttune.executors.base import Event
from fasttune.executors.worker_commands import EXIT, Command, TransportClosed
from fasttune.executors.worker_loop import WorkerLoop


class ThreadTransport:
    """The loop thread's :class:`~fasttune.executors.worker_commands.Transport`:
    commands wait in a queue, pickled events in a list, both under one condition."""

    def __init__(self) -> None:
        self._changed = threading.Condition(threading.Lock())
        self._commands: deque[Command] = deque()
        self._events: list[bytes] = []
        self._waiting = False  # the loop waits for a command (it cannot train)
        self._closed = False  # no more commands will come
        self._ended = False  # the loop returned (or raised: ``error``)
        self.error: BaseException | None = None

    # ------------------------------------------------------------- the loop's side
    def send(self, event: Event) -> None:
        self.send_packed([dumps(event)])

    def pack(self, event: Event) -> bytes:
        return dumps(event)

    def send_packed(self, packed: list[bytes]) -> None:
        with self._changed:
            self._events.extend(packed)
            self._changed.notify_all()

    def poll(self) -> bool:
        return bool(self._commands)  # a deque's length is read atomically

    def recv(self) -> Command:
        with self._changed:
            while not self._commands:
                if self._closed:
                    raise TransportClosed
                self._waiting = True
                self._changed.notify_all()
                self._changed.wait()
            self._waiting = False
            return self._commands.popleft()

    def end(self, error: BaseException | None) -> None:
        """The loop returned (or raised ``error``): calls stop waiting for it."""
        with self._changed:
            self._ended = True
            self.error = error
            self._changed.notify_all()

    # ------------------------------------------------------------ the calls' side
    def exchange(self, commands: list[Command]) -> tuple[list[bytes], bool]:
        """Queue ``commands``, then wait for events or for the loop to need a command.

        Returns:
            The pickled events sent since the last exchange, and whether the loop may
            still train (False once it waits for a command or has ended).
        """
        with self._changed:
            self._commands.extend(commands)
            if commands:
                self._changed.notify_all()
            while not self._events and not self._ended and not self._idle():
                self._changed.wait()
            events, self._events = self._events, []
            return events, not (self._ended or self._idle())

    def close(self) -> None:
        """No more commands: the loop exits after its current iteration (and those
        queued), or at once if it waits for one."""
        with self._changed:
            self._commands.append((EXIT, None))
            self._closed = True
            self._changed.notify_all()

    def _idle(self) -> bool:
        return self._waiting and not self._commands


class LoopThread:
    """Runs a worker loop in a daemon thread, fed through a :class:`ThreadTransport`.

    Args:
        make_loop: Makes the loop over the transport it is given.
        name: The thread's name.
    """

    def __init__(self, make_loop: Callable[[ThreadTransport], WorkerLoop], name: str):
        self.transport = ThreadTransport()
        self.loop = make_loop(self.transport)
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        error: BaseException | None = None
        try:
            self.loop.run()
        except BaseException as exc:  # reported by the next exchange, not lost in a thread
            error = exc
        finally:
            self.transport.end(error)

    def exchange(self, commands: list[Command]) -> tuple[list[bytes], bool]:
        """See :meth:`ThreadTransport.exchange`.

        Raises:
            RuntimeError: If the loop raised (an error of fasttune's, not the trial's,
                which the loop reports as ``TrialFailed``), once the events it sent
                before have been returned (with ``True``, so that another call comes).
        """
        events, can_train = self.transport.exchange(commands)
        error = self.transport.error
        if error is None:
            return events, can_train
        if events:  # sent before it failed: these first, the failure with the next call
            return events, True
        raise RuntimeError(f"the worker loop's thread failed: {error!r}") from error

    def stop(self, timeout: float) -> bool:
        """Ask the loop to exit (after the command it handles) and wait up to
        ``timeout`` s for it; True once the thread has ended."""
        self.transport.close()
        self._thread.join(timeout)
        return not self._thread.is_alive()
