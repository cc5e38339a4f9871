"""Inside a Ray actor: the tasks and actors a trial starts must fit its placement group.

A trial's actor runs in its placement group with ``placement_group_capture_child_tasks``,
so what the trial starts (``f.remote()``, an actor) is placed in the group's bundles.
One that no bundle left to it can hold would stay pending for ever, the trial waiting
on it; Ray Tune raises at once instead, naming the ``PlacementGroupFactory`` that would
hold it, and so does this check (``TUNE_DISABLE_RESOURCE_CHECKS`` turns both off). It
uses the launch hooks Ray offers for this (``ray.remote_function._task_launch_hook``,
``ray.actor._actor_launch_hook``).
"""

from __future__ import annotations

import os
from typing import Any

DISABLE_ENV = "TUNE_DISABLE_RESOURCE_CHECKS"


def install() -> None:
    """Check every task and actor this process starts (idempotent)."""
    if DISABLE_ENV in os.environ:
        return
    from ray import actor, remote_function

    checked: set[frozenset[tuple[str, float]]] = set()  # shapes found to fit

    def check(descriptor: Any, resources: dict[str, float], strategy: Any) -> None:
        shape = frozenset((k, v) for k, v in resources.items() if v > 0)
        if not shape or shape in checked:
            return
        bundles = _spare_bundles(strategy)
        if bundles is None:
            return  # not placed in this trial's group
        if any(_fits(resources, bundle) for bundle in bundles):
            checked.add(shape)
            return
        raise RuntimeError(_message(descriptor, resources))

    remote_function._task_launch_hook = check  # type: ignore[assignment]
    actor._actor_launch_hook = check  # type: ignore[assignment]


def _spare_bundles(strategy: Any) -> list[dict[str, float]] | None:
    """The bundles of the current trial's group its own actor leaves free, or None if
    ``strategy`` does not place the task there."""
    import ray

    group = getattr(strategy, "placement_group", None)
    current = ray.util.get_current_placement_group()
    if group is None or current is None or group.id != current.id:
        return None
    factory = _trial_resources()
    specs = list(current.bundle_specs)
    if factory is None or factory.head_bundle_is_empty:
        return specs  # the trial's actor holds no bundle of its own
    return specs[1:]


def _trial_resources() -> Any:
    from fasttune.trainable.context import get_context

    try:
        return get_context().get_trial_resources()
    except Exception:  # outside a trial
        return None


def _fits(resources: dict[str, float], bundle: dict[str, float]) -> bool:
    # "bundle" is the resource Ray adds to every node holding a bundle of a group
    return all(bundle.get(k, 0) >= v for k, v in resources.items() if v > 0 and k != "bundle")


def _message(descriptor: Any, resources: dict[str, float]) -> str:
    factory = _trial_resources()
    head = factory.bundles[0] if factory is not None and not factory.head_bundle_is_empty else {}
    kind = "actor" if getattr(descriptor, "class_name", "") else "task"
    name = ".".join(
        p
        for p in (
            getattr(descriptor, "module_name", ""),
            getattr(descriptor, "class_name", ""),
            getattr(descriptor, "function_name", ""),
        )
        if p
    )
    wanted = {k: float(v) for k, v in resources.items() if v > 0}
    return (
        f"The {kind} {name!r} asks for {wanted}, which no bundle of this trial's placement "
        "group left free can hold: it would wait for ever. Reserve bundles for what the "
        "trial starts, e.g. tune.with_resources(train_fn, tune.PlacementGroupFactory("
        f"[{head}] + [{wanted}] * N)) for N of them, or set "
        f"{DISABLE_ENV}=1 to skip this check."
    )
