"""One driver per experiment directory.

A driver holds an exclusive ``flock`` on ``<experiment>/.driver.lock`` for as long as
it runs the experiment, and writes who it is into the file (host, pid, start time) so
that a second driver is refused with a message naming the holder. The kernel drops
the lock when the holding process dies, however it dies, so the lock of a crashed
driver is simply taken over by the next one: no stale lock to clean up.

``flock`` is local to one machine's kernel (and unreliable on some network file
systems): two drivers on two machines sharing an NFS directory are not refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from datetime import datetime
from typing import Any

from fasttune.error import TuneError

LOCK_FILE = ".driver.lock"


class ExperimentInUseError(TuneError):
    """Another live driver runs this experiment."""


class ExperimentLock:
    """The exclusive right to run the experiment in ``experiment_path``.

    Args:
        experiment_path: The experiment directory (it must exist).
    """

    def __init__(self, experiment_path: str):
        self.experiment_path = experiment_path
        self.path = os.path.join(experiment_path, LOCK_FILE)
        self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> None:
        """Take the lock, or raise naming the driver that holds it.

        Raises:
            ExperimentInUseError: A live driver holds it.
        """
        if self._fd >= 0:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _describe(_read_holder(fd))
            os.close(fd)
            raise ExperimentInUseError(
                f"The experiment in {self.experiment_path!r} is being run by another driver "
                f"({who}). Two drivers would run its trials twice: wait for that one to "
                "end (or stop it), or run a new experiment with another RunConfig(name=...)."
            ) from None
        except BaseException:
            os.close(fd)
            raise
        holder = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (closing the file releases it); idempotent."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ExperimentLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        holder = json.loads(data) if data else {}
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "a process that has not written its name yet"
    started = holder.get("started")
    when = (
        datetime.fromtimestamp(started).strftime("%Y-%m-%d %H:%M:%S")
        if isinstance(started, (int, float))
        else "an unknown time"
    )
    return f"pid {holder.get('pid')} on host {holder.get('host')!r}, since {when}"
