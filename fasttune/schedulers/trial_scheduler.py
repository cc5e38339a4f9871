"""``TrialScheduler`` and ``FIFOScheduler`` (as ``ray.tune.schedulers``).

A scheduler decides: which waiting trial runs next (:meth:`choose_trial_to_run`)
and, after each result, whether a trial continues, pauses or stops (the string
returned by :meth:`on_trial_result`). What it receives as ``tune_controller`` is a
read-only :class:`ControllerView`; actions beyond the returned decision (pausing
or stopping *another* trial) are requested through the view's narrow request
methods, which the controller carries out after the hook returns.

Example:
    >>> scheduler = FIFOScheduler()
    >>> scheduler.set_search_properties("loss", "min")
    True
    >>> scheduler.on_trial_result(None, None, {"loss": 1.0})
    'CONTINUE'
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

from fasttune import result as R
from fasttune._support.metric_mode import MetricModeMixin
from fasttune._support.noop_hooks import is_noop_hook, noop_hook
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.storage.plugin_state import read_pickle, write_pickle


@runtime_checkable
class ControllerView(Protocol):
    """What a scheduler sees of the experiment controller.

    Reads return the controller's current state, not copies: ``get_trials`` is the
    controller's own list (read it, never change it), and the trials are the live
    objects. Nothing changes while a hook runs: the request methods only record a
    request, which the controller executes once the hook has returned.
    """

    @property
    def search_alg(self) -> Any:
        """The experiment's search algorithm."""
        ...

    def get_total_resources(self) -> dict[str, float]:
        """The machine's resources (``CPU``, ``GPU``, ``memory``, custom names)."""
        ...

    def get_trials(self) -> list[Trial]:
        """All trials of the experiment, in the order they were added (the live list)."""
        ...

    def get_live_trials(self) -> Collection[Trial]:
        """Trials that are not finished (PENDING, RUNNING or PAUSED)."""
        ...

    def get_waiting_trials(self) -> list[Trial]:
        """PENDING and PAUSED trials in the order they were added (O(waiting trials))."""
        ...

    def has_resources_for_trial(self, trial: Trial) -> bool:
        """Whether ``trial`` could be started now."""
        ...

    def pause_trial(self, trial: Trial) -> None:
        """Request that ``trial`` be paused (checkpointed, then its worker freed)."""
        ...

    def stop_trial(self, trial: Trial) -> None:
        """Request that ``trial`` be stopped (it ends TERMINATED)."""
        ...

    def unpause_trial(self, trial: Trial) -> None:
        """Request that a PAUSED trial become runnable again."""
        ...

    def save_trial(self, trial: Trial) -> None:
        """Request a checkpoint of a running trial right after its current result."""
        ...

    def exploit_trial(
        self,
        trial: Trial,
        checkpoint: Any,
        new_config: dict[str, Any],
        new_experiment_tag: str | None = None,
    ) -> None:
        """Request that ``trial`` continue from ``checkpoint`` with ``new_config``."""
        ...

    def set_trial_resources(self, trial: Trial, resources: Any) -> None:
        """Request that ``trial`` continue with new resources."""
        ...


class TrialScheduler(MetricModeMixin):
    """Base class of trial schedulers.

    Attributes:
        CONTINUE, PAUSE, STOP: The decisions :meth:`on_trial_result` returns.
        NOOP: Ray's "the scheduler already acted" decision; fasttune treats it as
            CONTINUE for the trial, the actions coming through the view's requests.
    """

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"
    NOOP = "NOOP"

    # Ray's name for the declaration below, kept so schedulers written for Ray work
    # unchanged. None: not declared (see supports_buffered_results).
    _supports_buffered_results: bool | None = None

    @property
    def supports_buffered_results(self) -> bool:
        """Whether trials may run a little ahead of this scheduler's decisions.

        True: a trial whose iterations are short keeps running while the decision on
        its last result travels (up to ~20 ms of iterations, at most 64), and results
        reach :meth:`on_trial_result` in quick succession; what a trial ran past a
        STOP or PAUSE is dropped. False: every trial waits for the decision on each
        result before its next iteration (one round trip to the driver per result),
        so decisions apply exactly after the result they were made on.

        Default: True when :meth:`on_trial_result` is not overridden (the scheduler
        never decides on results, like :class:`FIFOScheduler`), False otherwise, so a
        new scheduler is exact unless it says otherwise. Declare it by setting the
        class attribute ``_supports_buffered_results = True`` (Ray's name) or by
        overriding this property. The rules are in ``fasttune.executors.flow_control``.
        """
        declared = self._supports_buffered_results
        if declared is not None:
            return declared
        return is_noop_hook(self, "on_trial_result")

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Receive ``TuneConfig.metric`` and ``mode``.

        Returns:
            False if the scheduler already has a metric (or mode) and another is
            given (the caller should report the conflict); True otherwise. With no
            metric at all, the anonymous default metric is used.

        Raises:
            ValueError: If ``mode`` is not ``"min"``/``"max"``.
        """
        if not self._take_metric_mode(metric, mode):
            return False
        if self._metric is None:
            self._metric = R.DEFAULT_METRIC
        return True

    # ------------------------------------------------------------------ hooks
    def on_trial_add(self, tune_controller: ControllerView, trial: Trial) -> None:
        """A trial was added (it is PENDING)."""

    def on_trial_error(self, tune_controller: ControllerView, trial: Trial) -> None:
        """A RUNNING trial failed."""

    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        """Decide after a result: :attr:`CONTINUE`, :attr:`PAUSE` or :attr:`STOP`."""
        raise NotImplementedError(f"{type(self).__name__} must implement on_trial_result().")

    def on_trial_complete(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> None:
        """A RUNNING trial finished (normally or stopped), with its last result."""

    def on_trial_remove(self, tune_controller: ControllerView, trial: Trial) -> None:
        """A PENDING or PAUSED trial was removed (stopped without running to the end)."""

    def choose_trial_to_run(self, tune_controller: ControllerView) -> Trial | None:
        """Pick a PENDING or PAUSED trial to start, or None. Must not change state."""
        raise NotImplementedError(f"{type(self).__name__} must implement choose_trial_to_run().")

    def debug_string(self) -> str:
        """One line for progress output."""
        return f"Using {type(self).__name__}."

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Picklable state (default: a copy of the attributes)."""
        return dict(self.__dict__)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`."""
        self.__dict__.update(state)

    def save(self, checkpoint_path: str | os.PathLike[str]) -> None:
        """Write :meth:`get_state` to ``checkpoint_path`` atomically."""
        write_pickle(checkpoint_path, self.get_state())

    def restore(self, checkpoint_path: str | os.PathLike[str]) -> None:
        """Load what :meth:`save` wrote."""
        self.set_state(read_pickle(checkpoint_path))


class FIFOScheduler(TrialScheduler):
    """Run trials in the order they were added; never pause or stop one early.

    Example:
        >>> FIFOScheduler().debug_string()
        'Using FIFO scheduling algorithm.'
    """

    @noop_hook
    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        return TrialScheduler.CONTINUE

    def choose_trial_to_run(self, tune_controller: ControllerView) -> Trial | None:
        """The first PENDING trial that fits the free resources, else the first PAUSED one."""
        # Only the waiting trials: scanning every trial made each start O(all trials).
        trials = tune_controller.get_waiting_trials()
        # Trials mostly share one request: once it does not fit, the others with it
        # are not asked again (a full machine made each step ask every waiting trial).
        refused: list[Any] = []
        for status in (TrialStatus.PENDING, TrialStatus.PAUSED):
            for trial in trials:
                if trial.status != status:
                    continue
                request = trial.placement_group_factory
                if refused and any(request is r or request == r for r in refused):
                    continue
                if tune_controller.has_resources_for_trial(trial):
                    return trial
                refused.append(request)
        return None

    def debug_string(self) -> str:
        return "Using FIFO scheduling algorithm."
