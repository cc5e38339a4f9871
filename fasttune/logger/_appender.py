"""Append whole lines to a file, so that a crash never leaves half a line behind."""

from __future__ import annotations

import logging
import os

from fasttune.storage.filesystem import open_creating_dirs

logger = logging.getLogger(__name__)

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)
_SCAN_CHUNK = 1 << 16


def _drop_partial_last_line(path: str, size: int) -> int:
    """Cut a trailing line that has no newline (left by a writer that crashed) from
    ``path``, a file of ``size`` bytes; its size after."""
    if size == 0:
        return 0
    with open(path, "rb") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return size
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
    return cut


_MAX_PENDING = 1 << 20  # a buffered appender writes at least every MiB


class LineAppender:
    """An append-only file that the operating system only ever receives whole lines of.

    Unbuffered (the default), each :meth:`append` is one ``os.write``. Buffered,
    lines collect in memory and :meth:`flush` hands them over in one ``os.write``
    (the runner flushes before every change of the experiment state, at the end of
    each step, and at every MiB): one system call per batch of results instead of
    one per result, the largest cost of writing results. Either way other readers
    see whole lines and a killed process cannot leave a partial one. Opening drops a
    partial last line left by an earlier crash.

    Args:
        path: The file to append to; created (with its directories) if missing.
        buffered: Keep lines in memory until :meth:`flush` (or :meth:`close`).
    """

    def __init__(self, path: str, buffered: bool = False):
        self.path = path
        self._fd = open_creating_dirs(path, _OPEN_FLAGS)
        try:
            #: The file's size when opened (after dropping a partial last line).
            self.size_at_open = _drop_partial_last_line(path, os.fstat(self._fd).st_size)
        except BaseException:
            os.close(self._fd)
            raise
        self._buffered = buffered
        self._pending: list[bytes] = []
        self._pending_size = 0

    @property
    def closed(self) -> bool:
        return self._fd < 0

    @property
    def has_pending(self) -> bool:
        """Whether buffered lines wait for :meth:`flush`."""
        return bool(self._pending)

    def append(self, data: bytes) -> None:
        """Append ``data``, which must end with a newline."""
        if self._fd < 0:
            raise ValueError(f"Cannot append to {self.path}: the file is closed.")
        if not self._buffered:
            self._write(data)
            return
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= _MAX_PENDING:
            self.flush()

    def flush(self) -> None:
        """Hand the buffered lines to the operating system in one write."""
        if self._pending and self._fd >= 0:
            data = b"".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
            self._write(data)

    def _write(self, data: bytes) -> None:
        fd = self._fd
        try:
            written = os.write(fd, data)
            if written != len(data):  # short writes are rare on regular files
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(fd, view) :]
        except OSError as e:
            if e.filename is None:  # os.write names no file: say which one it was
                raise OSError(e.errno, e.strerror, self.path) from None
            raise

    def close(self) -> None:
        """Write what is buffered and close the file; closing twice is harmless."""
        if self._fd >= 0:
            try:
                self.flush()
            finally:
                fd, self._fd = self._fd, -1
                os.close(fd)
