"""Errors raised by fasttune (as ``ray.tune.error``)."""

from __future__ import annotations

__all__ = [
    "ExperimentNotFoundError",
    "TrialError",
    "TuneError",
    "TuneTypeError",
    "TuneValueError",
]


class TuneError(Exception):
    """General error raised by fasttune (as ``ray.tune.TuneError``)."""


class TuneValueError(TuneError, ValueError):
    """A bad value where Ray Tune raises ``TuneError`` (an unknown trainable name, a
    metric no result has): ``except TuneError`` and ``except ValueError`` both catch it."""


class TuneTypeError(TuneError, TypeError):
    """Something that is not a trainable where Ray Tune raises ``TuneError``:
    ``except TuneError`` and ``except TypeError`` both catch it."""


class ExperimentNotFoundError(FileNotFoundError, ValueError):
    """``Tuner.restore`` found no experiment at the path (``FileNotFoundError``, as
    Ray Tune raises; also a ``ValueError``, as fasttune raised before)."""


class TrialError(TuneError):
    """A trial failed; carries the failure report (usually a traceback) as text.

    ``str(error)`` is the whole text, as written to the trial's ``error.txt``.

    Args:
        text: The failure report.
        path: The file the report was read from, if any.

    Attributes:
        traceback_text: The failure report.
        path: The file it was read from, or None.
        exception_type: Name of the exception class named on the report's last
            line (``"ValueError"`` for ``ValueError: bad value``), or None.

    Example:
        >>> e = TrialError("Traceback (most recent call last):\\nValueError: bad lr")
        >>> e.exception_type
        'ValueError'
        >>> isinstance(e, TuneError)
        True
    """

    def __init__(self, text: str, path: str | None = None):
        super().__init__(text)
        self.traceback_text = text
        self.path = path
        self.exception_type = _exception_type(text)

    def __reduce__(self) -> tuple[type[TrialError], tuple[str, str | None]]:
        return type(self), (self.traceback_text, self.path)


def _exception_type(text: str) -> str | None:
    """The exception class named on the last non-empty line (``Name: message``)."""
    for line in reversed(text.strip().splitlines()):
        head, sep, _ = line.strip().partition(":")
        if sep and head and " " not in head and head.replace(".", "").isidentifier():
            return head.rsplit(".", 1)[-1]
        if line.strip():
            return None
    return None


class StorageFullError(TuneError):
    """The experiment's storage ran out of space (or quota) while fasttune wrote to it.

    What was written before is kept: free some space and continue the experiment with
    ``Tuner.restore``.
    """
