"""Whether this platform can run fasttune's local worker processes.

Workers are forked from a fork server and get their file descriptors over Unix
sockets (``os.fork``, ``socket.send_fds``, ``SIGKILL``): Linux and macOS have them,
Windows does not. Without this check the local executor failed on Windows at import,
with ``module 'signal' has no attribute 'SIGKILL'``.
"""

from __future__ import annotations

import os
import signal
import socket
import sys

from fasttune.error import TuneError


def local_workers_unsupported() -> str | None:
    """Why local worker processes cannot run here, or None where they can.

    Example:
        >>> local_workers_unsupported() is None  # Linux and macOS
        True
    """
    missing = [
        name
        for name, present in (
            ("os.fork", hasattr(os, "fork")),
            ("socket.send_fds", hasattr(socket, "send_fds")),
            ("signal.SIGKILL", hasattr(signal, "SIGKILL")),
        )
        if not present
    ]
    if sys.platform == "win32" or missing:
        what = f" (no {', '.join(missing)})" if missing else ""
        return f"this Python runs on {sys.platform!r}{what}"
    return None


def require_local_workers() -> None:
    """Raise a :class:`~fasttune.error.TuneError` that names the platform, if unsupported.

    Raises:
        TuneError: On Windows (and wherever fork or fd passing is missing), suggesting WSL.
    """
    why = local_workers_unsupported()
    if why is not None:
        raise TuneError(
            "fasttune runs trials in worker processes forked from a fork server, passing "
            "file descriptors over Unix sockets, which needs Linux or macOS; "
            f"{why}. On Windows, run fasttune under WSL (Windows Subsystem for Linux): "
            "https://learn.microsoft.com/windows/wsl/install"
        )
