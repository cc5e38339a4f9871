"""Driver-side observers of an experiment: ``Callback`` and ``CallbackList``.

A :class:`Callback` receives the experiment's events (trial started, result
reported, checkpoint saved, ...) on the driver, as in ``ray.tune.Callback``.
The controller owns one :class:`CallbackList` and calls its hooks with keyword
arguments; the list forwards each hook only to the callbacks that override it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

if TYPE_CHECKING:
    from fasttune.experiment.trial import Trial

logger = logging.getLogger(__name__)

HOOKS: tuple[str, ...] = (
    "setup",
    "on_step_begin",
    "on_step_end",
    "on_trial_start",
    "on_trial_restore",
    "on_trial_save",
    "on_trial_result",
    "on_trial_complete",
    "on_trial_recover",
    "on_trial_error",
    "on_checkpoint",
    "on_experiment_end",
)
"""The hooks a :class:`CallbackList` dispatches, in the order of Ray's docs."""


class Callback:
    """Base class of experiment callbacks: every hook is a no-op to override.

    Hooks are called on the driver with keyword arguments; ``**info`` takes any
    argument a future version may add. ``iteration`` counts the controller's
    loop steps and ``trials`` is the list of all trials.

    Example:
        >>> class PrintLoss(Callback):
        ...     def on_trial_result(self, iteration, trials, trial, result, **info):
        ...         print(f"{trial.trial_id}: loss={result['loss']}")
        >>> from fasttune.experiment.trial import Trial
        >>> t = Trial("f", trial_id="abc_00000")
        >>> CallbackList([PrintLoss()]).on_trial_result(
        ...     iteration=1, trials=[t], trial=t, result={"loss": 0.5})
        abc_00000: loss=0.5
    """

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        """Called once before the experiment starts (and again after a resume).

        Args:
            stop: The stopping criteria of the run.
            num_samples: ``TuneConfig.num_samples``.
            total_num_samples: How many trials the search will create (grid
                variants times ``num_samples``), if known.
            **info: Other keyword arguments, for forward compatibility.
        """

    def on_step_begin(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        """Called at the start of each step of the controller's loop."""

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        """Called at the end of each step of the controller's loop."""

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called after a trial has been started."""

    def on_trial_restore(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called after a trial has been restored from a checkpoint."""

    def on_trial_save(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        """Called after a trial has saved a checkpoint."""

    def on_trial_result(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        result: dict[str, Any],
        **info: Any,
    ) -> None:
        """Called for every result a trial reports."""

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when a trial has finished successfully."""

    def on_trial_recover(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when a trial has failed and will be retried."""

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when a trial has failed for good."""

    def on_checkpoint(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        checkpoint: Any,
        **info: Any,
    ) -> None:
        """Called when a trial's checkpoint has been registered."""

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """Called once after every trial has finished (or the run was stopped)."""

    def get_state(self) -> dict[str, Any] | None:
        """State to save with the experiment (picklable), or None for none."""
        return None

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the state returned by :meth:`get_state` when the run resumes."""


def _noop(*args: Any, **info: Any) -> None:
    return None


def _overrides(callback: Callback, hook: str) -> bool:
    if hook in vars(callback):
        return True
    return getattr(type(callback), hook) is not getattr(Callback, hook)


class _BuffersWrites(Protocol):
    """A callback whose result lines the runner may buffer (fasttune's file loggers)."""

    def enable_write_buffering(self) -> None: ...

    def flush_pending_writes(self) -> None: ...


def _buffers_writes(callback: Callback) -> TypeGuard[_BuffersWrites]:
    return hasattr(callback, "flush_pending_writes")


def _fan_out(fns: list[Callable[..., Any]]) -> Callable[..., Any]:
    """One callable that calls every function of ``fns`` in order."""
    if not fns:
        return _noop
    if len(fns) == 1:
        return fns[0]
    frozen = tuple(fns)

    def call_all(*args: Any, **info: Any) -> None:
        for fn in frozen:
            fn(*args, **info)

    return call_all


def _class_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


class CallbackList:
    """Calls each hook on every callback that overrides it, in the order given.

    Which callbacks override which hook is worked out once, in the constructor,
    so a hook nobody overrides costs one no-op call and a hook one callback
    overrides costs one direct call.

    Args:
        callbacks: :class:`Callback` instances.

    Raises:
        TypeError: An element is not a :class:`Callback` instance.
    """

    def __init__(self, callbacks: Iterable[Callback] = ()):
        self._callbacks: list[Callback] = list(callbacks)
        for callback in self._callbacks:
            if not isinstance(callback, Callback):
                what = "a class" if isinstance(callback, type) else type(callback).__name__
                raise TypeError(
                    f"callbacks must be Callback instances, got {callback!r} ({what}). "
                    "Subclass fasttune.Callback and pass an instance, e.g. MyCallback()."
                )
        for hook in HOOKS:
            fns = [getattr(cb, hook) for cb in self._callbacks if _overrides(cb, hook)]
            # Instance attributes shadow the documented methods below.
            setattr(self, hook, _fan_out(fns))
        # Not Ray hooks: the runner lets fasttune's file loggers buffer result lines and
        # flushes them before each change of the experiment state and after each step.
        buffering = [cb for cb in self._callbacks if _buffers_writes(cb)]
        self.enable_write_buffering: Callable[[], None] = _fan_out(
            [cb.enable_write_buffering for cb in buffering]
        )
        self.flush_pending_writes: Callable[[], None] = _fan_out(
            [cb.flush_pending_writes for cb in buffering]
        )

    @property
    def callbacks(self) -> list[Callback]:
        """The callbacks, in dispatch order."""
        return list(self._callbacks)

    def __len__(self) -> int:
        return len(self._callbacks)

    def __iter__(self) -> Iterator[Callback]:
        return iter(self._callbacks)

    def listeners(self, hook: str) -> list[Callback]:
        """The callbacks that override ``hook`` (the only ones it reaches)."""
        if hook not in HOOKS:
            raise ValueError(f"hook={hook!r} is not a callback hook; use one of {HOOKS}.")
        return [cb for cb in self._callbacks if _overrides(cb, hook)]

    # The hooks, documented here; the constructor replaces each with a fast fan-out.
    def setup(self, **info: Any) -> None:
        """Call ``setup`` on every callback."""

    def on_step_begin(self, **info: Any) -> None:
        """Call ``on_step_begin`` on every callback."""

    def on_step_end(self, **info: Any) -> None:
        """Call ``on_step_end`` on every callback."""

    def on_trial_start(self, **info: Any) -> None:
        """Call ``on_trial_start`` on every callback."""

    def on_trial_restore(self, **info: Any) -> None:
        """Call ``on_trial_restore`` on every callback."""

    def on_trial_save(self, **info: Any) -> None:
        """Call ``on_trial_save`` on every callback."""

    def on_trial_result(self, **info: Any) -> None:
        """Call ``on_trial_result`` on every callback."""

    def on_trial_complete(self, **info: Any) -> None:
        """Call ``on_trial_complete`` on every callback."""

    def on_trial_recover(self, **info: Any) -> None:
        """Call ``on_trial_recover`` on every callback."""

    def on_trial_error(self, **info: Any) -> None:
        """Call ``on_trial_error`` on every callback."""

    def on_checkpoint(self, **info: Any) -> None:
        """Call ``on_checkpoint`` on every callback."""

    def on_experiment_end(self, **info: Any) -> None:
        """Call ``on_experiment_end`` on every callback."""

    # ------------------------------------------------------------------ state
    def get_state(self) -> list[dict[str, Any]]:
        """The state of every callback that has one, to save with the experiment.

        Returns:
            One ``{"index", "class", "state"}`` entry per callback whose
            :meth:`Callback.get_state` is not None (an empty list when none is).
        """
        entries = []
        for index, callback in enumerate(self._callbacks):
            state = callback.get_state()
            if state is not None:
                entries.append({"index": index, "class": _class_name(callback), "state": state})
        return entries

    def set_state(self, state: list[dict[str, Any]] | None) -> None:
        """Give each callback back the state saved by :meth:`get_state`.

        An entry goes to the callback at the same position if its class matches,
        else to the first not yet restored callback of that class; an entry no
        callback matches (the callbacks changed between runs) is skipped with a
        warning.
        """
        restored: set[int] = set()
        for entry in state or ():
            index, name = entry["index"], entry["class"]
            target = None
            if index < len(self._callbacks) and _class_name(self._callbacks[index]) == name:
                target = index
            else:
                target = next(
                    (
                        i
                        for i, cb in enumerate(self._callbacks)
                        if i not in restored and _class_name(cb) == name
                    ),
                    None,
                )
            if target is None or target in restored:
                logger.warning(
                    "Not restoring the saved state of callback %s (position %d): "
                    "no such callback in this run.",
                    name,
                    index,
                )
                continue
            restored.add(target)
            self._callbacks[target].set_state(entry["state"])
