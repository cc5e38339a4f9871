"""Append whole lines to a file, so that a crash never leaves half a line behind."""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)
_SCAN_CHUNK = 1 << 16


def drop_partial_last_line(path: str) -> None:
    """Cut a trailing line that has no newline (left by a writer that crashed).

    A missing or empty file is left alone.
    """
    try:
        size = os.path.getsize(path)
    except OSError:
        return
    if size == 0:
        return
    with open(path, "rb") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        cut, end = 0, size
        while end > 0:
            start = max(0, end - _SCAN_CHUNK)
            f.seek(start)
            index = f.read(end - start).rfind(b"\n")
            if index >= 0:
                cut = start + index + 1
                break
            end = start
    logger.warning("Dropping %d bytes of an incomplete last line in %s", size - cut, path)
    os.truncate(path, cut)


class LineAppender:
    """An append-only file written with one ``os.write`` per call and no user-space buffer.

    Each :meth:`append` hands complete lines to the operating system at once, so
    other readers always see whole lines and a killed process cannot leave a partial
    one. Opening drops a partial last line left by an earlier crash.

    Args:
        path: The file to append to; created if missing.
    """

    def __init__(self, path: str):
        self.path = path
        drop_partial_last_line(path)
        self._fd = os.open(path, _OPEN_FLAGS, 0o666)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def append(self, data: bytes) -> None:
        """Append ``data``, which must end with a newline."""
        fd = self._fd
        if fd < 0:
            raise ValueError(f"Cannot append to {self.path}: the file is closed.")
        written = os.write(fd, data)
        if written != len(data):  # short writes are rare on regular files
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view) :]

    def close(self) -> None:
        """Close the file; closing twice is harmless."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
