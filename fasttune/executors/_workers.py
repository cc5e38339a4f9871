"""The driver's records of local worker processes, and how they are shut down."""

from __future__ import annotations

import select
import signal
import time
from dataclasses import dataclass, field
from selectors import BaseSelector

from fasttune._support.pickling import dumps
from fasttune.executors import _forkserver
from fasttune.executors.base import TrialLaunch
from fasttune.executors.worker_commands import EXIT

SHUTDOWN_GRACE_S = 1.0


@dataclass(eq=False)
class Worker:
    """The driver's record of one worker process."""

    child: _forkserver.Child
    gpu_ids: tuple[str, ...]
    keys: set[str] = field(default_factory=set)  # trainable blobs it has received
    launch: TrialLaunch | None = None  # the hosted trial
    queued: list[TrialLaunch] = field(default_factory=list)  # to start there in turn
    started: bool = False
    stopping: bool = False  # stop_trial was called: its results are dropped
    stops_itself: bool = False  # it reported its done result and stops on its own
    reuse_attempt: bool = False  # the hosted trial was given a live Trainable
    idle_key: str | None = None  # idle, keeping a Trainable of this key for reuse
    retiring: bool = False  # expected to exit: its death is not an event
    status_lost: bool = False  # the fork server died: rely on EOF alone
    origin: tuple = ()  # the driver's sys.path, cwd and environment at fork


def describe_exit(code: int | None) -> str:
    """How a worker ended, from its exit code (negative: the signal that killed it)."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"killed by signal {name}"
    return f"exited with code {code}"


def shutdown_workers(
    workers: set[Worker], selector: BaseSelector, grace_s: float = SHUTDOWN_GRACE_S
) -> None:
    """Ask every worker to exit, then SIGTERM, then SIGKILL; reap them all."""
    for worker in workers:
        conn = worker.child.conn
        if conn is not None and not conn.closed:
            try:
                conn.send_bytes(dumps((EXIT, None)))
            except OSError:
                pass
            conn.close()
        worker.child.conn = None  # type: ignore[assignment]
    remaining = [w.child for w in workers if w.child.sentinel >= 0]
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            for child in remaining:
                child.kill(sig)
        remaining = wait_exits(remaining, grace_s)
        if not remaining:
            break
    for child in remaining:
        child.close_sentinel()
    workers.clear()
    selector.close()


def wait_exits(children: list[_forkserver.Child], timeout: float) -> list[_forkserver.Child]:
    """Wait up to ``timeout`` for the children to exit; return those still running."""
    deadline = time.monotonic() + timeout
    waiting = {child.sentinel: child for child in children}
    poller = select.poll()
    for fd in waiting:
        poller.register(fd, select.POLLIN)
    while waiting:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        for fd, _ in poller.poll(remaining * 1000):
            poller.unregister(fd)
            waiting.pop(fd).read_exit_code()
    return list(waiting.values())
