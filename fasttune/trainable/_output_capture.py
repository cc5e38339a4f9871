"""Copy a trainable's ``sys.stdout``/``sys.stderr`` to log files in its directory."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO


class _Tee:
    """A text stream writing to a log file and to the stream it stands in for (the
    worker's console, which the driver shows), as Ray Tune's ``log_to_file`` does.
    Code that asks for a descriptor (a subprocess, faulthandler) or the binary buffer
    gets the file's."""

    def __init__(self, console: Any, file: TextIO):
        self._console = console
        self._file = file

    def write(self, text: str) -> int:
        with contextlib.suppress(Exception):  # a closed or broken console loses nothing
            self._console.write(text)
        return self._file.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self._console.flush()
        self._file.flush()

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return False  # no terminal codes (progress bars) into the file

    @property
    def buffer(self) -> Any:
        return self._file.buffer  # bytes written there reach the file only

    @property
    def encoding(self) -> str:
        return self._file.encoding

    @property
    def errors(self) -> str | None:
        return self._file.errors

    def writable(self) -> bool:
        return True


class OutputCapture:
    """Copies ``sys.stdout`` and ``sys.stderr`` to files until :meth:`close` (what is
    written still reaches the console too, as in Ray Tune).

    One instance serves a trainable for its whole life: :meth:`open` may be called
    again (on reset) after :meth:`close`.

    Example:
        >>> import pathlib, tempfile
        >>> capture = OutputCapture()
        >>> with tempfile.TemporaryDirectory() as logdir:
        ...     capture.open(logdir, "out.log", "out.log")
        ...     print("captured")
        ...     capture.close()
        ...     pathlib.Path(logdir, "out.log").read_text()
        captured
        'captured\\n'
    """

    def __init__(self) -> None:
        self._stdout: TextIO | None = None
        self._stderr: TextIO | None = None
        self._redirects: contextlib.ExitStack | None = None

    def open(self, logdir: str, stdout_file: str | None, stderr_file: str | None) -> None:
        """Start redirecting; relative file names are taken inside ``logdir``.

        Args:
            logdir: Directory for relative file names.
            stdout_file: File for ``sys.stdout``, or None to leave it alone.
            stderr_file: File for ``sys.stderr``, or None; the same name as
                ``stdout_file`` shares one open file.
        """
        if not stdout_file and not stderr_file:
            return
        stack = contextlib.ExitStack()

        def open_log(name: str) -> TextIO:
            path = name if os.path.isabs(name) else os.path.join(logdir, name)
            return stack.enter_context(open(path, "a", buffering=1, encoding="utf-8"))

        out = open_log(stdout_file) if stdout_file else None
        if out is not None:
            stack.enter_context(contextlib.redirect_stdout(_Tee(sys.stdout, out)))
        if stderr_file:
            err = out if out is not None and stderr_file == stdout_file else open_log(stderr_file)
            stack.enter_context(contextlib.redirect_stderr(_Tee(sys.stderr, err)))
            self._stderr = err
        self._stdout = out
        self._redirects = stack

    def flush(self) -> None:
        """Flush the open log files, if any."""
        if self._stdout is not None:
            self._stdout.flush()
        if self._stderr is not None:
            self._stderr.flush()

    def close(self) -> None:
        """Restore ``sys.stdout``/``sys.stderr`` and close the files (safe to repeat)."""
        if self._redirects is not None:
            self._redirects.close()
        self._redirects = None
        self._stdout = self._stderr = None
