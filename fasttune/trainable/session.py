"""The per-trial session behind ``report``, ``get_checkpoint`` and ``get_context``.

A function trainable runs the user's function in its own greenlet; the session
is attached to that greenlet, so ``report`` finds it in O(1) without thread-locals
and several trainables can live in one process. Class trainables register their
session as the process's current one while they train.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from greenlet import getcurrent

from fasttune._support.log_once import log_once

if TYPE_CHECKING:
    from fasttune.checkpoint import Checkpoint
    from fasttune.trainable.trial_info import TrialInfo

_SESSION_ATTR = "fasttune_session"


class TrialSession:
    """State shared between a running trainable and the user's code.

    Args:
        trial_info: The trial this session belongs to (None when used standalone).
        trial_dir: Directory of the trial's results and checkpoints.
        report_fn: Called by :func:`fasttune.report`; None for class trainables.
    """

    def __init__(
        self,
        trial_info: TrialInfo | None,
        trial_dir: str | None,
        report_fn: Callable[[Mapping[str, Any], Checkpoint | None], None] | None = None,
    ):
        self.trial_info = trial_info
        self.trial_dir = trial_dir
        self.report_fn = report_fn
        self.loaded_checkpoint: Checkpoint | None = None


_process_session: TrialSession | None = None


def current_session() -> TrialSession | None:
    """The session of the code running now, or None outside any trial."""
    g = getcurrent()
    while g is not None:
        session = getattr(g, _SESSION_ATTR, None)
        if session is not None:
            return session
        g = g.parent
    return _process_session


def set_process_session(session: TrialSession | None) -> None:
    """Make ``session`` the one seen by code outside a function trainable's greenlet."""
    global _process_session
    _process_session = session


def clear_process_session(session: TrialSession) -> None:
    """Forget ``session`` as the process's current one (if it still is)."""
    global _process_session
    if _process_session is session:
        _process_session = None


def attach_session(glet: Any, session: TrialSession) -> None:
    """Attach ``session`` to a greenlet so the code it runs can find it."""
    setattr(glet, _SESSION_ATTR, session)


def report(metrics: Mapping[str, Any], *, checkpoint: Checkpoint | None = None) -> None:
    """Report metrics (and optionally a checkpoint) from a function trainable.

    Each call is one training iteration. The checkpoint's files are persisted to
    the trial directory before this returns, so the caller may delete them after.

    Args:
        metrics: Dict of metric names to values.
        checkpoint: A :class:`~fasttune.Checkpoint` to save with this result.

    Outside a trial (calling ``train_fn(config)`` directly to debug it, say) it warns
    once and returns None, as Ray Tune's does.

    Raises:
        TypeError: When ``metrics`` is not a dict.

    Example:
        >>> def train_fn(config):
        ...     for step in range(3):
        ...         report({"score": step * config["lr"]})
    """
    session = current_session()
    if session is None or session.report_fn is None:
        _warn_outside_trial()
        return
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"fasttune.report(metrics=...) expects a dict of metric values, got "
            f"{type(metrics).__name__}: {metrics!r}. Pass e.g. report({{'loss': 0.1}})."
        )
    session.report_fn(metrics, checkpoint)


def _warn_outside_trial() -> None:
    if log_once("report outside a trial"):
        import warnings

        warnings.warn(
            "fasttune.report() was called outside of a trial: the metrics go nowhere and "
            "it returns None. Run your function through fasttune.Tuner(train_fn, ...).fit() "
            "(or wrap it as a Trainable with fasttune.trainable.wrap_function(train_fn)); "
            "inside a Trainable class, return the metrics from step() instead.",
            stacklevel=3,
        )


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint to resume from: the latest one restored or reported, else None."""
    session = current_session()
    return None if session is None else session.loaded_checkpoint
