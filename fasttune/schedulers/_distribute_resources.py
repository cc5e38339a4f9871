"""Resource allocation functions for ``ResourceChangingScheduler`` (as in Ray Tune).

:class:`DistributeResources` shares the CPUs and GPUs that no live trial holds
among the live trials, evenly; :class:`DistributeResourcesToTopJob` gives them to
the best trial. Both work in *units* of ``increase_by`` (default: one GPU if the
trials use GPUs, else one CPU), never leave a trial below the resources it started
with, and take resources back from a trial when more are held than exist. Their
``_``-prefixed methods keep Ray Tune's names so subclasses written for Ray work.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from fasttune.execution.placement_groups import PlacementGroupFactory
from fasttune.experiment.trial import Trial

if TYPE_CHECKING:
    from fasttune.schedulers.resource_changing_scheduler import ResourceChangingScheduler

Bundles = list[dict[str, float]]


def _check_unit(increase_by: Mapping[str, float] | None) -> dict[str, float]:
    unit = dict(increase_by or {})
    if not unit:
        return unit
    if any(not isinstance(v, (int, float)) or v < 0 for v in unit.values()):
        raise ValueError(f"increase_by amounts must be numbers >= 0, got {unit!r}.")
    if not (unit.get("CPU", 0) or unit.get("GPU", 0)):
        raise ValueError(f"increase_by must add some 'CPU' or 'GPU', got {unit!r}.")
    return unit


def _total_resources(tune_controller: Any) -> Mapping[str, float]:
    """The machine's resources: from the view when it tells them, else detected."""
    get_total = getattr(tune_controller, "get_total_resources", None)
    if callable(get_total):
        return get_total()
    from fasttune._support.resource_detection import detect_total_resources

    return detect_total_resources()


class DistributeResources:
    """Share free CPUs/GPUs evenly among live trials (a ``resources_allocation_function``).

    Args:
        add_bundles: Add the free resources as new bundles (the trial's bundles are
            then all alike, e.g. one per worker); else grow the single bundle.
        increase_by: The unit of growth, e.g. ``{"GPU": 1, "CPU": 4}``. Default:
            one GPU if the trial uses GPUs, else one CPU (with ``add_bundles``: one
            more of the trial's last bundle).
        increase_by_times: With ``increase_by``, grow by at most this many units
            (< 1: no limit).
        reserve_resources: Resources never handed out, e.g. ``{"CPU": 1}``.

    Raises:
        ValueError: ``increase_by`` has a negative amount or neither CPU nor GPU.

    Example:
        >>> fn = DistributeResources(increase_by={"CPU": 2}, increase_by_times=2)
        >>> fn._get_multiplier({"CPU": 2}, cpus=5)
        2
    """

    def __init__(
        self,
        add_bundles: bool = False,
        increase_by: Mapping[str, float] | None = None,
        increase_by_times: int = -1,
        reserve_resources: Mapping[str, float] | None = None,
    ):
        self.add_bundles = add_bundles
        self.increase_by = _check_unit(increase_by)
        self.increase_by_times = increase_by_times
        self.reserve_resources = dict(reserve_resources or {})

    # ------------------------------------------------------------------ helpers
    def _validate(
        self, base_trial_resource: Any, result: dict[str, Any]
    ) -> TypeGuard[PlacementGroupFactory]:
        """False when the trial keeps its resources outright (before its first result).

        Raises unless ``base_trial_resource`` is a PlacementGroupFactory (so True says it is).
        """
        if not isinstance(base_trial_resource, PlacementGroupFactory):
            raise ValueError(f"{type(self).__name__} only supports PlacementGroupFactories.")
        if not self.add_bundles and len(base_trial_resource.bundles) > 1:
            raise ValueError(
                "With add_bundles=False the trials must ask for a single bundle, got "
                f"{len(base_trial_resource.bundles)}: {base_trial_resource.bundles!r}."
            )
        return result.get("training_iteration", 0) >= 1

    def _get_total_available_resources(self, tune_controller: Any) -> tuple[float, float]:
        """CPUs and GPUs of the machine (all, not only free ones) minus the reserve."""
        total = _total_resources(tune_controller)
        return (
            total.get("CPU", 0) - self.reserve_resources.get("CPU", 0),
            total.get("GPU", 0) - self.reserve_resources.get("GPU", 0),
        )

    def _get_used_cpus_and_gpus(self, t: Trial) -> tuple[float, float]:
        held = t.placement_group_factory.required_resources
        return held.get("CPU", 0), held.get("GPU", 0)

    def _get_resources_from_bundles(self, bundles: Bundles) -> dict[str, float]:
        total: dict[str, float] = {"CPU": 0, "GPU": 0}
        for bundle in bundles:
            for key, amount in bundle.items():
                total[key] = total.get(key, 0) + amount
        return total

    def _is_bundle_empty(self, bundle: Mapping[str, float]) -> bool:
        return not (bundle.get("CPU", 0) or bundle.get("GPU", 0))

    def _add_two_bundles(
        self,
        bundles_a: Bundles,
        bundles_b: Bundles,
        increase_by: Mapping[str, float],
        limit_to_increase_by_times: bool,
        max_increase_by_times: int = -1,
    ) -> Bundles:
        """``bundles_a`` plus ``bundles_b``, capped at a number of units when asked."""
        limit = max_increase_by_times
        if limit_to_increase_by_times and self.increase_by_times > 0:
            limit = min(limit, self.increase_by_times) if limit > 0 else self.increase_by_times
        if self.add_bundles:
            merged = [b for b in [*bundles_a, *bundles_b] if not self._is_bundle_empty(b)]
            return merged[:limit] if limit > 0 else merged
        first_a, first_b = (bundles_a or [{}])[0], (bundles_b or [{}])[0]
        merged_bundle = {k: v for k, v in first_a.items() if k not in ("CPU", "GPU")}
        for key in ("CPU", "GPU"):
            amount = first_a.get(key, 0) + first_b.get(key, 0)
            if limit > 0:
                amount = min(amount, increase_by.get(key, 0) * limit)
            merged_bundle[key] = amount
        return [merged_bundle]

    def _get_multiplier(
        self,
        increase_by: Mapping[str, float],
        cpus: float = 0,
        gpus: float = 0,
        max_multiplier: int = -1,
    ) -> int:
        """How many units of ``increase_by`` fit in ``cpus``/``gpus`` (negative: too few)."""
        unit_cpu, unit_gpu = increase_by.get("CPU", 0), increase_by.get("GPU", 0)
        if unit_gpu:
            units = gpus // unit_gpu
            if unit_cpu:
                units = min(units, cpus // unit_cpu)
        else:
            units = cpus // unit_cpu
        if max_multiplier > 0 and units > 0:
            units = min(units, max_multiplier)
        return int(units)

    def _remove_bundles(
        self, bundles: Bundles, increase_by: Mapping[str, float], multiplier: int
    ) -> Bundles:
        """``bundles`` less ``|multiplier|`` units."""
        count = abs(multiplier)
        if self.add_bundles:
            return bundles[:-count] if count else list(bundles)
        shrunk = copy.deepcopy(bundles)
        for key in ("CPU", "GPU"):
            shrunk[0][key] = max(shrunk[0].get(key, 0) - increase_by.get(key, 0) * count, 0)
        return shrunk

    def _create_new_bundles(self, increase_by: Mapping[str, float], multiplier: int) -> Bundles:
        """``|multiplier|`` units as bundles."""
        count = abs(multiplier)
        if self.add_bundles:
            return [dict(increase_by) for _ in range(int(count))]
        return [{key: increase_by.get(key, 0) * count for key in ("CPU", "GPU")}]

    def _modify_bundles_with_free_resources(
        self,
        bundles: Bundles,
        increase_by: Mapping[str, float],
        free_cpus: float,
        free_gpus: float,
        *,
        max_multiplier: int = -1,
        max_increase_by_times: int = -1,
    ) -> Bundles:
        """Grow ``bundles`` into the free resources (or shrink them if those are negative)."""
        units = self._get_multiplier(increase_by, free_cpus, free_gpus, max_multiplier)
        if units < 0:
            return self._remove_bundles(bundles, increase_by, units)
        if units > 0:
            extra = self._create_new_bundles(increase_by, units)
            return self._add_two_bundles(bundles, extra, increase_by, True, max_increase_by_times)
        return bundles

    def _get_added_bundles(self, bundles: Bundles, base_bundles: Bundles) -> Bundles:
        """What ``bundles`` holds beyond ``base_bundles``."""
        if self.add_bundles:
            return bundles[len(base_bundles) :]
        now, base = (bundles or [{}])[0], (base_bundles or [{}])[0]
        return [{key: now.get(key, 0) - base.get(key, 0) for key in ("CPU", "GPU")}]

    def _are_bundles_below_limit(
        self,
        bundles: Bundles,
        base_bundles: Bundles | None = None,
        max_added_cpus: float | None = None,
        max_added_gpus: float | None = None,
    ) -> bool:
        """Whether a trial may still grow under ``increase_by_times``."""
        times = self.increase_by_times
        if not max_added_cpus:
            max_added_cpus = self.increase_by.get("CPU", 0) * times if times > 0 else math.inf
        if not max_added_gpus:
            max_added_gpus = self.increase_by.get("GPU", 0) * times if times > 0 else math.inf
        added = self._get_resources_from_bundles(
            self._get_added_bundles(bundles, base_bundles) if base_bundles else bundles
        )
        return added["CPU"] < max_added_cpus or added["GPU"] < max_added_gpus

    def _get_new_added_bundles(
        self,
        trial: Trial,
        all_trials: list[Trial],
        base_bundles: Bundles,
        increase_by: Mapping[str, float],
        total_available_cpus: float,
        total_available_gpus: float,
        used_cpus: float,
        used_gpus: float,
    ) -> Bundles:
        """The bundles ``trial`` gets beyond its base: its even share of the free resources.

        The share is what the first trial would get if all the resources beyond
        every trial's base were dealt out one unit per trial in turn.
        """
        base = self._get_resources_from_bundles(base_bundles)
        left_cpus = total_available_cpus - base["CPU"] * len(all_trials)
        left_gpus = total_available_gpus - base["GPU"] * len(all_trials)
        dealt: list[Bundles] = [[] for _ in all_trials]
        full: set[int] = set()
        share = 0
        turn = 0
        while (
            len(full) < len(all_trials)
            and left_cpus >= increase_by.get("CPU", 0)
            and left_gpus >= increase_by.get("GPU", 0)
        ):
            index = turn % len(dealt)
            before = dealt[index]
            dealt[index] = self._modify_bundles_with_free_resources(
                before, increase_by, left_cpus, left_gpus, max_multiplier=1
            )
            got = self._get_resources_from_bundles(self._get_added_bundles(dealt[index], before))
            if not got["CPU"] and not got["GPU"]:
                full.add(index)
            elif index == 0:
                share += 1
            left_cpus -= got["CPU"]
            left_gpus -= got["GPU"]
            turn += 1
        return self._modify_bundles_with_free_resources(
            self._get_added_bundles(trial.placement_group_factory.bundles, base_bundles),
            increase_by,
            total_available_cpus - used_cpus,
            total_available_gpus - used_gpus,
            max_increase_by_times=share,
        )

    # ------------------------------------------------------------------ the function
    def __call__(
        self,
        tune_controller: Any,
        trial: Trial,
        result: dict[str, Any],
        scheduler: ResourceChangingScheduler,
    ) -> PlacementGroupFactory | None:
        """New resources for ``trial`` (None: keep them), given the live trials' needs."""
        base_resource = scheduler.base_trial_resources
        if not self._validate(base_resource, result):
            return None
        if self.increase_by:
            increase_by = self.increase_by
        elif self.add_bundles:
            increase_by = dict(base_resource.bundles[-1])
        elif base_resource.bundles[0].get("GPU", 0):
            increase_by = {"GPU": 1}
        else:
            increase_by = {"CPU": 1}
        base_bundles = copy.deepcopy(base_resource.bundles)
        total_cpus, total_gpus = self._get_total_available_resources(tune_controller)
        live = list(tune_controller.get_live_trials())
        held = [self._get_used_cpus_and_gpus(t) for t in live]
        added = self._get_new_added_bundles(
            trial,
            live,
            base_bundles,
            increase_by,
            total_cpus,
            total_gpus,
            sum(cpus for cpus, _ in held),
            sum(gpus for _, gpus in held),
        )
        bundles = self._add_two_bundles(base_bundles, added, increase_by, False)
        if base_resource.head_bundle_is_empty:
            bundles = [{}, *bundles]
        args, kwargs = base_resource.placement_group_args
        return PlacementGroupFactory(bundles, base_resource.strategy, *args, **kwargs)


class DistributeResourcesToTopJob(DistributeResources):
    """Give the free CPUs/GPUs to the best live trial (by ``metric`` and ``mode``).

    Other trials keep what they hold, unless more is held than exists.

    Args:
        add_bundles, increase_by, increase_by_times, reserve_resources: As
            :class:`DistributeResources`.
        metric: Result key ranking the trials; default: the scheduler's metric.
        mode: ``"min"`` or ``"max"``; default: the scheduler's mode.

    Example:
        >>> DistributeResourcesToTopJob(metric="acc", mode="max")._metric_op
        1.0
    """

    def __init__(
        self,
        add_bundles: bool = False,
        increase_by: Mapping[str, float] | None = None,
        increase_by_times: int = -1,
        reserve_resources: Mapping[str, float] | None = None,
        metric: str | None = None,
        mode: str | None = None,
    ):
        super().__init__(add_bundles, increase_by, increase_by_times, reserve_resources)
        self.metric = metric
        self.mode = mode

    @property
    def _metric_op(self) -> float:
        if self.mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {self.mode!r}.")
        return 1.0 if self.mode == "max" else -1.0

    def _score(self, trial: Trial) -> float:
        metric = self.metric
        assert metric is not None  # _get_new_added_bundles raises before ranking without one
        value = trial.last_result.get(metric, trial.last_flat_result.get(metric))
        return -self._metric_op * (math.inf if value is None else value)

    def _get_new_added_bundles(
        self,
        trial: Trial,
        all_trials: list[Trial],
        base_bundles: Bundles,
        increase_by: Mapping[str, float],
        total_available_cpus: float,
        total_available_gpus: float,
        used_cpus: float,
        used_gpus: float,
    ) -> Bundles:
        if self.metric is None:
            raise ValueError(
                "DistributeResourcesToTopJob needs a metric: set it on "
                "DistributeResourcesToTopJob, on the base scheduler or in tune.TuneConfig() "
                "(highest priority first)."
            )
        free_cpus = total_available_cpus - used_cpus
        free_gpus = total_available_gpus - used_gpus
        ranked = sorted(all_trials, key=self._score)
        added = self._get_added_bundles(trial.placement_group_factory.bundles, base_bundles)
        best = next(
            (
                t
                for t in ranked
                if self._are_bundles_below_limit(t.placement_group_factory.bundles, base_bundles)
            ),
            ranked[0],
        )
        if (
            trial.trial_id != best.trial_id
            and self._get_multiplier(increase_by, free_cpus, free_gpus) >= 0
        ):
            return added  # not the best: only give back what is over-allocated
        return self._modify_bundles_with_free_resources(added, increase_by, free_cpus, free_gpus)
