"""Helpers of the tests that watch processes come and go."""

from __future__ import annotations

import time

import psutil


def gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether process ``pid`` exits (or is a zombie, waiting to be reaped) within
    ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
