"""Facts about the current process and host, computed once."""

from __future__ import annotations

import functools
import os
import platform
import socket


@functools.lru_cache(maxsize=1)
def node_ip() -> str:
    """This host's IP address as other hosts would see it (no traffic is sent)."""
    try:
        # The name as bytes: a str would be encoded as IDNA, whose codec imports
        # unicodedata and stringprep (~2.5 ms of every fork server's start).
        name = socket.gethostname()
        # typeshed says str; CPython's converter takes bytes as they are.
        return socket.gethostbyname(name.encode() if name.isascii() else name)  # type: ignore[arg-type]
    except OSError:
        return "127.0.0.1"


@functools.lru_cache(maxsize=1)
def hostname() -> str:
    return platform.node()


# os.getpid() is a system call (0.2-0.5 us on this machine's VM, 2-3% of a worker's
# cost per result, which carries its pid): read once, and again in a forked child.
_pid = os.getpid()


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


def pid() -> int:
    """This process's id (kept current across ``os.fork``)."""
    return _pid


class SysUsageMonitor:
    """CPU and RAM use of the machine between two calls (``log_sys_usage=True``)."""

    def __init__(self) -> None:
        from fasttune._support.imports import import_optional

        self._psutil = import_optional("psutil", extra="sysinfo", feature="log_sys_usage")
        self._psutil.cpu_percent(interval=None)  # prime the counter

    def sample(self) -> dict[str, float]:
        return {
            "cpu_util_percent": float(self._psutil.cpu_percent(interval=None)),
            "ram_util_percent": float(self._psutil.virtual_memory().percent),
        }


def process_running(pid: int) -> bool:
    """Whether a process with this pid runs on this machine (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
