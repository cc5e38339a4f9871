"""``ResourceChangingScheduler`` (as ``ray.tune.schedulers.ResourceChangingScheduler``).

It wraps another scheduler: that scheduler decides as usual, and after each result
it lets continue, a ``resources_allocation_function`` may give the trial new
resources. The trial is then checkpointed and restarted from that checkpoint with
them; its Trainable sees them in ``self.trial_resources`` (function trainables:
``tune.get_context().get_trial_resources()``). Trainables should therefore save
and restore checkpoints.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

from fasttune.execution.placement_groups import PlacementGroupFactory, normalize_resources
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.result import DEFAULT_METRIC
from fasttune.schedulers._distribute_resources import (
    DistributeResources,
    DistributeResourcesToTopJob,
)
from fasttune.schedulers.trial_scheduler import ControllerView, FIFOScheduler, TrialScheduler

__all__ = ["DistributeResources", "DistributeResourcesToTopJob", "ResourceChangingScheduler"]

logger = logging.getLogger(__name__)

AllocationFunction = Callable[[Any, Trial, dict[str, Any], "ResourceChangingScheduler"], Any]

_DistributeResourcesDefault = DistributeResources(add_bundles=False)
_DistributeResourcesDistributedDefault = DistributeResources(add_bundles=True)


class ResourceChangingScheduler(TrialScheduler):
    """Change the resources of live trials while they run, around another scheduler.

    Args:
        base_scheduler: Makes the decisions (default: ``FIFOScheduler()``).
        resources_allocation_function: ``f(tune_controller, trial, result,
            scheduler)`` returning the trial's new resources (a
            ``PlacementGroupFactory`` or a dict such as ``{"cpu": 2}``), or None to
            keep them. It runs after every result the base scheduler lets continue.
            Default: :class:`DistributeResources`, which shares free CPUs/GPUs evenly.
            None never changes resources.

    Example:
        >>> from fasttune.schedulers import FIFOScheduler
        >>> scheduler = ResourceChangingScheduler(FIFOScheduler())
        >>> scheduler.debug_string()
        '(ResourceChangingScheduler) Using FIFO scheduling algorithm.'
    """

    # Resources change between two iterations exactly: no result runs ahead.
    _supports_buffered_results = False

    def __init__(
        self,
        base_scheduler: TrialScheduler | None = None,
        resources_allocation_function: AllocationFunction | None = _DistributeResourcesDefault,
    ) -> None:
        super().__init__()
        if resources_allocation_function is None:
            warnings.warn(
                "`resources_allocation_function` is None: no trial resources will ever be "
                "changed. Pass a function (e.g. DistributeResources()) to change them.",
                stacklevel=2,
            )
        self._resources_allocation_function = resources_allocation_function
        self._base_scheduler = base_scheduler or FIFOScheduler()
        self._base_trial_resources: PlacementGroupFactory | None = None
        # trial id -> resources given to it (re-applied to trials rebuilt by a restore)
        self._reallocated: dict[str, PlacementGroupFactory] = {}
        self._reapply = False

    @property
    def metric(self) -> Any:
        return self._base_scheduler.metric

    @property
    def mode(self) -> Any:
        return self._base_scheduler.mode

    @property
    def base_trial_resources(self) -> PlacementGroupFactory | None:
        """The resources of the first trial: what every trial starts with."""
        return self._base_trial_resources

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        self._metric, self._mode = metric, mode
        return self._base_scheduler.set_search_properties(metric, mode, **spec)

    # ------------------------------------------------------------------ hooks
    def on_trial_add(self, tune_controller: ControllerView, trial: Trial) -> None:
        if self._base_trial_resources is None:
            self._base_trial_resources = trial.placement_group_factory
        elif (
            trial.trial_id not in self._reallocated
            and trial.placement_group_factory != self._base_trial_resources
        ):
            raise RuntimeError(
                "ResourceChangingScheduler needs all trials to start with the same resources. "
                f"The first trial had {self._base_trial_resources}, trial {trial} has "
                f"{trial.placement_group_factory}."
            )
        self._base_scheduler.on_trial_add(tune_controller, trial)

    def on_trial_error(self, tune_controller: ControllerView, trial: Trial) -> None:
        self._base_scheduler.on_trial_error(tune_controller, trial)

    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        decision = self._base_scheduler.on_trial_result(tune_controller, trial, result)
        if decision == TrialScheduler.CONTINUE:
            new_resources = self.reallocate_trial_resources_if_needed(
                tune_controller, trial, result
            )
            if new_resources is not None:
                logger.info("Setting the resources of trial %s to %s.", trial, new_resources)
                self._reallocated[trial.trial_id] = new_resources
                # Saved, stopped and restarted with them once this hook returns.
                tune_controller.set_trial_resources(trial, new_resources)
        return decision

    def on_trial_complete(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> None:
        self._reallocated.pop(trial.trial_id, None)
        self._base_scheduler.on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: ControllerView, trial: Trial) -> None:
        self._reallocated.pop(trial.trial_id, None)
        self._base_scheduler.on_trial_remove(tune_controller, trial)

    def choose_trial_to_run(self, tune_controller: ControllerView) -> Trial | None:
        if self._reapply:
            self._reapply = False
            self._reapply_resources(tune_controller)
        return self._base_scheduler.choose_trial_to_run(tune_controller)

    def debug_string(self) -> str:
        return f"(ResourceChangingScheduler) {self._base_scheduler.debug_string()}"

    # ------------------------------------------------------------------ resources
    def reallocate_trial_resources_if_needed(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> PlacementGroupFactory | None:
        """Ask the allocation function; return the new resources if they differ, else None."""
        function = self._resources_allocation_function
        if function is None:
            return None
        for name in ("metric", "mode"):
            if not getattr(function, name, None):
                value = getattr(self._base_scheduler, name, None)
                if value == DEFAULT_METRIC:
                    value = None  # the placeholder for "no metric given"
                try:
                    setattr(function, name, value)
                except AttributeError:
                    pass  # e.g. a bound method: it finds them on the scheduler
        new_resources = function(tune_controller, trial, result, self)
        if not new_resources:
            return None
        new_resources = normalize_resources(new_resources)
        if new_resources == trial.placement_group_factory:
            return None
        return new_resources

    def _reapply_resources(self, tune_controller: ControllerView) -> None:
        """Give trials rebuilt by a restore the resources they had been given."""
        for trial in tune_controller.get_trials():
            given = self._reallocated.get(trial.trial_id)
            if (
                given is not None
                and trial.status in (TrialStatus.PENDING, TrialStatus.PAUSED)
                and trial.placement_group_factory != given
            ):
                tune_controller.set_trial_resources(trial, given)

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        return {
            "base": self._base_scheduler.get_state(),
            "base_trial_resources": self._base_trial_resources,
            "reallocated": dict(self._reallocated),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._base_scheduler.set_state(state["base"])
        self._base_trial_resources = state["base_trial_resources"]
        self._reallocated = dict(state["reallocated"])
        self._reapply = True
