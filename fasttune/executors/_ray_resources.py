"""Resource accounting on a Ray cluster: the cluster answers, through placement groups.

Every trial runs in a Ray placement group made from its
:class:`~fasttune.execution.placement_groups.PlacementGroupFactory` (bundles and
strategy). :meth:`RayResourceManager.try_allocate` answers "does it fit now" by asking
for such a group and handing it over once Ray has placed it; nothing is counted here.

Groups are reused: when a trial ends, its group stays placed and the next trial
with an equal factory takes it (with the idle actor in it, when actors are reused),
so a new trial costs no round trip to Ray's control store. An idle group is removed
when a request of another shape waits, when its trial's actor died (its node may be
gone), and at shutdown.

A request that no node of the cluster could ever hold is refused at once (as the
local resource manager does), unless the cluster autoscales (Ray Tune's test, or
``FASTTUNE_CLUSTER_AUTOSCALES=1``): then it waits for new nodes, with a warning after
``warn_after_s``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttune._support.resource_words import describe_amount, format_number
from fasttune.execution.placement_groups import PlacementGroupFactory, normalize_resources
from fasttune.executors.base import Allocation

logger = logging.getLogger(__name__)

WARN_AFTER_S = 60.0
"""A trial waiting this long for its placement group gets a warning (as Ray Tune)."""

_BASIC = ("CPU", "GPU", "memory")
_CACHE_S = 1.0  # how long cluster facts (totals, nodes) are reused
_KEYS = {"CPU": "cpu", "GPU": "gpu"}


AUTOSCALES_ENV = "FASTTUNE_CLUSTER_AUTOSCALES"
"""Set to 1 when nodes may join the cluster without Ray's cluster launcher (an
autoscaler of another kind, ``ray start`` by hand): requests then wait for them."""


def is_autoscaling_cluster() -> bool:
    """Ray Tune's test (the cluster launcher leaves ``~/ray_bootstrap_config.yaml``), or
    the user's word (:data:`AUTOSCALES_ENV`)."""
    if os.environ.get(AUTOSCALES_ENV, "").strip().lower() in ("1", "true", "yes"):
        return True
    return os.path.exists(os.path.expanduser("~/ray_bootstrap_config.yaml"))


@dataclass(eq=False)
class PlacedGroup:
    """One placement group of the cluster and what it is doing.

    Attributes:
        pgf: The factory it was made from.
        pg: The ``ray.util.placement_group.PlacementGroup``.
        ready_ref: Resolves once Ray has placed every bundle.
        ready: Whether ``ready_ref`` has resolved.
        requested_at: When it was asked for (monotonic seconds).
        discard: Remove it (instead of reusing it) when its trial releases it.
    """

    pgf: PlacementGroupFactory
    pg: Any
    ready_ref: Any
    requested_at: float
    ready: bool = False
    discard: bool = False
    warned: bool = False


@dataclass
class _ClusterFacts:
    at: float = -1e9
    total: dict[str, float] = field(default_factory=dict)
    nodes: list[dict[str, float]] = field(default_factory=list)


class RayResourceManager:
    """Answers the controller's resource questions with the cluster's placement groups.

    Args:
        ray: The ``ray`` module (connected).
        autoscaling: Whether the cluster may add nodes (then no request is refused as
            never fitting); None detects it as Ray Tune does.
        warn_after_s: Warn about a request that has waited this long.
        on_removed: Called with each group removed while unheld (the executor drops
            the idle actor it kept there; Ray kills actors of removed groups).
        on_asked: Called with each group just asked for (the executor starts its
            actor at once, while Ray places the group).
        clock: Monotonic time source.
    """

    def __init__(
        self,
        ray: Any,
        *,
        autoscaling: bool | None = None,
        warn_after_s: float = WARN_AFTER_S,
        on_removed: Callable[[PlacedGroup], None] | None = None,
        on_asked: Callable[[PlacedGroup], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from ray.util.placement_group import placement_group, remove_placement_group

        self._ray = ray
        self._placement_group = placement_group
        self._remove_placement_group = remove_placement_group
        self.autoscaling = is_autoscaling_cluster() if autoscaling is None else autoscaling
        self._warn_after_s = warn_after_s
        self._on_removed = on_removed or (lambda group: None)
        self._on_asked = on_asked or (lambda group: None)
        self._clock = clock
        self._held: dict[str, tuple[PlacedGroup, Allocation]] = {}
        self._free: list[PlacedGroup] = []  # placed and unheld, least recently used first
        self._staging: dict[PlacementGroupFactory, PlacedGroup] = {}  # asked for, not placed
        self._hints: set[PlacementGroupFactory] = set()  # staged by prepare(), unrequested
        self._fits: set[PlacementGroupFactory] = set()  # requests check_fits accepted
        self._facts = _ClusterFacts()
        self._closed = False

    # ------------------------------------------------------------ cluster facts
    def _cluster(self, refresh: bool = False) -> _ClusterFacts:
        now = self._clock()
        if self._closed:
            return self._facts  # the connection may be gone: the last facts known
        if refresh or now - self._facts.at > _CACHE_S:
            nodes = [
                {k: float(v) for k, v in node.get("Resources", {}).items()}
                for node in self._ray.nodes()
                if node.get("Alive")
            ]
            total: dict[str, float] = dict.fromkeys(_BASIC, 0.0)
            for node in nodes:
                for name, amount in node.items():
                    total[name] = total.get(name, 0.0) + amount
            self._facts = _ClusterFacts(now, total, nodes)
        return self._facts

    @property
    def total(self) -> dict[str, float]:
        """The resources of the cluster's live nodes (memory in bytes)."""
        return dict(self._cluster().total)

    def usage_string(self) -> str:
        """Usage in Ray's words, counting what this experiment's trials hold."""
        used: dict[str, float] = {}
        for _, allocation in self._held.values():
            for name, amount in _amounts(allocation).items():
                used[name] = used.get(name, 0.0) + amount
        total = self._cluster().total

        def share(name: str) -> str:
            held = str(used[name]) if used.get(name) else "0"
            return f"{held}/{format_number(total.get(name, 0.0))}"

        text = f"Logical resource usage: {share('CPU')} CPUs, {share('GPU')} GPUs"
        customs = ", ".join(f"{share(name)} {name}" for name in used if name not in _BASIC)
        return f"{text} ({customs})" if customs else text

    def __repr__(self) -> str:
        return f"RayResourceManager({self.usage_string()!r}, trials={len(self._held)})"

    # ------------------------------------------------------------ requests
    def check_fits(self, pgf: PlacementGroupFactory | Any, trial_name: str = "") -> None:
        """Raise if no placement of the request exists on the cluster's live nodes.

        A cluster that autoscales accepts every request (new nodes may hold it).

        Raises:
            ValueError: Naming the resource, the amount asked and what the cluster
                has, and how to lower the request or add nodes.
        """
        pgf = _factory(pgf)
        if pgf in self._fits or self.autoscaling:
            return
        problem = _never_fits(pgf, self._cluster().nodes)
        if problem is not None:  # a node may just have joined: look again before refusing
            problem = _never_fits(pgf, self._cluster(refresh=True).nodes)
        if problem is not None:
            who = f"Trial {trial_name!r}" if trial_name else "A trial"
            raise ValueError(
                f"{who} {problem} If nodes that can hold it will join the cluster (an "
                "autoscaler other than Ray's cluster launcher, or `ray start` by hand), "
                f"set {AUTOSCALES_ENV}=1: trials then wait for them, as on an autoscaling "
                "cluster."
            )
        self._fits.add(pgf)

    def can_allocate(self, pgf: PlacementGroupFactory | Any) -> bool:
        """True if a placed group for the request is free now.

        Otherwise a group is asked for (one per request shape), so that the answer
        turns True once Ray has placed it.
        """
        pgf = _factory(pgf)
        self.check_fits(pgf)
        if self._find_free(pgf) is not None or self._staged_ready(pgf):
            return True
        self._ask_for(pgf)
        return False

    def prepare(self, pgf: PlacementGroupFactory | Any) -> None:
        """Ask for a group of this shape before any trial does (a hint: the first trial
        then finds it placed). A request of another shape drops it.

        Raises:
            ValueError: If the request can never fit (see :meth:`check_fits`).
        """
        pgf = _factory(pgf)
        self.check_fits(pgf)
        if self._find_free(pgf) is None and pgf not in self._staging:
            self._ask_for(pgf)
            self._hints.add(pgf)

    def try_allocate(self, trial_id: str, pgf: PlacementGroupFactory | Any) -> Allocation | None:
        """Hand ``trial_id`` a placed group for the request, or ask for one and return None.

        Raises:
            ValueError: If the request can never fit (see :meth:`check_fits`) or
                ``trial_id`` already holds a group.
        """
        if trial_id in self._held:
            raise ValueError(f"Trial {trial_id!r} already holds resources; release them first.")
        pgf = _factory(pgf)
        self.check_fits(pgf, trial_id)
        group = self._find_free(pgf)
        if group is not None:
            self._free.remove(group)
        elif self._staged_ready(pgf):
            group = self._staging.pop(pgf)
            self._hints.discard(pgf)
        else:
            self._ask_for(pgf)
            return None
        allocation = _allocation(pgf)
        self._held[trial_id] = (group, allocation)
        return allocation

    def release(self, trial_id: str) -> Allocation | None:
        """Free what ``trial_id`` holds: its group is kept for the next equal request
        (or removed if marked with :meth:`discard_on_release`)."""
        held = self._held.pop(trial_id, None)
        if held is None:
            return None
        group, allocation = held
        if group.discard:
            self._remove(group)
        else:
            self._free.append(group)
        return allocation

    # ------------------------------------------------------------ for the executor
    def group_of(self, trial_id: str) -> PlacedGroup | None:
        """The group ``trial_id`` holds (None for a trial placed without one)."""
        held = self._held.get(trial_id)
        return held[0] if held else None

    def discard_on_release(self, trial_id: str) -> None:
        """Remove the trial's group when it is released (its actor died: the node may
        be gone, so the group is not reused)."""
        held = self._held.get(trial_id)
        if held is not None:
            held[0].discard = True

    def staging_refs(self) -> list[Any]:
        """The ``ready`` references of groups Ray has not placed yet."""
        return [group.ready_ref for group in self._staging.values() if not group.ready]

    def mark_ready(self, refs: set[Any]) -> bool:
        """Note the groups whose ``ready`` reference is in ``refs``; True if any was."""
        found = False
        for group in self._staging.values():
            if group.ready_ref in refs:
                group.ready = found = True
        return found

    def shutdown(self) -> None:
        """Remove every group this manager made; afterwards it answers from what it last
        knew of the cluster (the progress table's last line comes after shutdown)."""
        self._closed = True
        groups = [g for g, _ in self._held.values()] + self._free + list(self._staging.values())
        self._held.clear()
        self._free.clear()
        self._staging.clear()
        self._hints.clear()
        for group in groups:
            self._remove(group, notify=False)

    # ------------------------------------------------------------ groups
    def _find_free(self, pgf: PlacementGroupFactory) -> PlacedGroup | None:
        for group in reversed(self._free):  # the most recently used first
            if group.pgf == pgf:
                return group
        return None

    def _staged_ready(self, pgf: PlacementGroupFactory) -> bool:
        group = self._staging.get(pgf)
        if group is None:
            return False
        if not group.ready:
            ready, _ = self._ray.wait([group.ready_ref], timeout=0)
            group.ready = bool(ready)
        if not group.ready:
            self._warn_if_waiting(group)
        return group.ready

    def _ask_for(self, pgf: PlacementGroupFactory) -> None:
        """Ask Ray for a group of this shape (one at a time per shape), and make room."""
        self._hints.discard(pgf)  # asked for by a trial now, if it was a hint
        for hint in [h for h in self._hints if h != pgf]:  # a hint of another shape
            self._hints.discard(hint)
            group = self._staging.pop(hint, None)
            if group is not None:
                self._remove(group)
        if pgf not in self._staging:
            args, kwargs = pgf.placement_group_args
            kwargs.setdefault("strategy", pgf.strategy)
            pg = self._placement_group(pgf.bundles, *args, **kwargs)
            group = self._staging[pgf] = PlacedGroup(pgf, pg, pg.ready(), self._clock())
            self._on_asked(group)
        self._make_room(pgf)

    def _make_room(self, pgf: PlacementGroupFactory) -> None:
        """Remove the least recently used free group of another shape: the request
        waits, and an idle group may be what it waits for."""
        for group in self._free:
            if group.pgf != pgf:
                self._free.remove(group)
                self._remove(group)
                return

    def _remove(self, group: PlacedGroup, notify: bool = True) -> None:
        if notify:
            self._on_removed(group)
        try:
            self._remove_placement_group(group.pg)
        except Exception:  # already gone with its node, or the connection is closing
            logger.debug("Removing placement group %s failed", group.pg, exc_info=True)

    def _warn_if_waiting(self, group: PlacedGroup) -> None:
        waited = self._clock() - group.requested_at
        if group.warned or waited < self._warn_after_s:
            return
        if not self.autoscaling and self._held:
            return  # trials run: the request waits for one of them to end
        group.warned = True
        available = {k: v for k, v in self._ray.available_resources().items() if ":" not in k}
        then = (
            "It keeps waiting for the autoscaler to add nodes"
            if self.autoscaling
            else "It keeps waiting (another job may hold the resources)"
        )
        logger.warning(
            "A trial has waited %.0f s for a placement group of %s (strategy %s); the "
            "cluster has %s available. %s; if none come, lower the request or add nodes.",
            waited,
            group.pgf.bundles,
            group.pgf.strategy,
            available,
            then,
        )


# ------------------------------------------------------------ helpers
def _factory(pgf: Any) -> PlacementGroupFactory:
    return pgf if isinstance(pgf, PlacementGroupFactory) else normalize_resources(pgf)


def _allocation(pgf: PlacementGroupFactory) -> Allocation:
    total = pgf.required_resources
    return Allocation(
        cpu=total.get("CPU", 0.0),
        gpu=total.get("GPU", 0.0),
        memory=total.get("memory", 0.0),
        custom={k: v for k, v in total.items() if k not in _BASIC},
    )


def _amounts(allocation: Allocation) -> dict[str, float]:
    out = {"CPU": allocation.cpu, "GPU": allocation.gpu, "memory": allocation.memory}
    out.update(allocation.custom)
    return {k: v for k, v in out.items() if v}


def _fits(bundle: Mapping[str, float], node: Mapping[str, float]) -> bool:
    return all(node.get(name, 0.0) >= amount for name, amount in bundle.items())


def _remedy(name: str) -> str:
    key = _KEYS.get(name, name)
    flag = {"CPU": "--num-cpus", "GPU": "--num-gpus", "memory": "--memory"}.get(name)
    add = f"ray start {flag}=..." if flag else f"ray start --resources='{{\"{name}\": ...}}'"
    return (
        f"Lower the request (tune.with_resources(trainable, {{{key!r}: ...}}), "
        f"resources_per_trial or the PlacementGroupFactory), or add nodes that have it "
        f"({add} on each)."
    )


def _never_fits(pgf: PlacementGroupFactory, nodes: list[dict[str, float]]) -> str | None:
    """Why no placement of ``pgf`` exists on ``nodes`` (the rest of a sentence), or None."""
    where = f"the Ray cluster ({len(nodes)} live node{'' if len(nodes) == 1 else 's'})"
    total: dict[str, float] = {}
    for node in nodes:
        for name, amount in node.items():
            total[name] = total.get(name, 0.0) + amount
    for name, amount in pgf.required_resources.items():
        has = total.get(name, 0.0)
        if amount > has:
            have = describe_amount(name, has) if has else "none"
            if name == "GPU" and not has:
                have = "no GPU"
            return (
                f"asks for {describe_amount(name, amount)}, but {where} has {have} in "
                f"all, so it can never start. {_remedy(name)}"
            )
    bundles = pgf.bundles
    if pgf.strategy == "STRICT_PACK":
        bundles = [pgf.required_resources]
    for index, bundle in enumerate(bundles):
        if any(_fits(bundle, node) for node in nodes):
            continue
        which = (
            "its bundles together (STRICT_PACK)"
            if len(bundles) < len(pgf.bundles)
            else (f"bundle {index} ({bundle})")
        )
        for name, amount in bundle.items():
            largest = max((node.get(name, 0.0) for node in nodes), default=0.0)
            if amount > largest:
                return (
                    f"asks for {describe_amount(name, amount)} in {which}, but no node of "
                    f"{where} has that much (the largest has {format_number(largest)}), so it "
                    f"can never start. A bundle is placed on one node. {_remedy(name)}"
                )
        return (
            f"asks for {bundle} in {which}, but no node of {where} has all of it at "
            "once, so it can never start. A bundle is placed on one node: split the "
            "bundle or add a node that has all of it."
        )
    if pgf.strategy == "STRICT_SPREAD" and not _spreads(pgf.bundles, nodes):
        return (
            f"asks for {len(pgf.bundles)} bundles on distinct nodes (STRICT_SPREAD), but "
            f"{where} has too few nodes that can hold them, so it can never start. Use "
            "strategy SPREAD or PACK, fewer bundles, or add nodes."
        )
    return None


def _spreads(bundles: list[dict[str, float]], nodes: list[dict[str, float]]) -> bool:
    """Whether each bundle can have its own node (a small bipartite matching)."""
    owner: dict[int, int] = {}  # node index -> bundle index

    def place(b: int, seen: set[int]) -> bool:
        for n, node in enumerate(nodes):
            if n in seen or not _fits(bundles[b], node):
                continue
            seen.add(n)
            if n not in owner or place(owner[n], seen):
                owner[n] = b
                return True
        return False

    return all(place(b, set()) for b in range(len(bundles)))
