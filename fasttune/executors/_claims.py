"""Claims on queued launches: whoever creates a queued trial's claim file first has it.

A launch queued on a worker (``Executor.queue_trial``) is wanted by two processes that
cannot wait for each other: the worker, to start it when its trial stops, and the
driver, to take it back (the worker may be inside a long iteration and read no
command for a while). Each tries to create the trial's claim file with ``O_EXCL``: the
file system makes exactly one succeed, so the driver knows at once whether it has the
trial back, without a message. On tmpfs (``/dev/shm``) where there is one: a creation
there costs microseconds. A driver removes its directory when its executor shuts down,
and the directories of drivers that died (their pid is in the name) when it makes one.
"""

from __future__ import annotations

import contextlib
import os

from fasttune._support.process_info import process_running

_SHARED_MEMORY = "/dev/shm"
_PREFIX = "fasttune-claims-"


def claim(path: str) -> bool:
    """Create the claim file ``path``; True if this call created it."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True


class ClaimDirectory:
    """A directory of claim files, made on first use and removed by :meth:`close`."""

    def __init__(self) -> None:
        self._path: str | None = None
        self._count = 0

    def new_claim(self, trial_id: str) -> str:
        """The path of a new claim on ``trial_id`` (each queueing of a trial has its own:
        one taken back earlier must not make the next fail)."""
        if self._path is None:
            import tempfile  # here, as below: a worker only ever calls claim()

            shared = _SHARED_MEMORY if os.access(_SHARED_MEMORY, os.W_OK) else None
            parent = shared or tempfile.gettempdir()
            remove_dead_drivers_claims(parent)
            self._path = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent)
        self._count += 1
        return os.path.join(self._path, f"{trial_id}.{self._count}")

    @staticmethod
    def forget(path: str) -> None:
        """Remove a claim nobody will try again (its trial started)."""
        with contextlib.suppress(OSError):
            os.unlink(path)

    def close(self) -> None:
        if self._path is not None:
            import shutil

            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None


def remove_dead_drivers_claims(parent: str) -> None:
    """Remove the claim directories in ``parent`` of drivers no longer running (one
    killed keeps its directory: nothing else would remove it)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(_PREFIX) :].partition("-")[0]
        if pid.isdigit() and not process_running(int(pid)):
            import shutil

            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
