"""``RayExecutor``: each trial in a Ray actor on a Ray cluster.

Each actor runs the worker loop every executor shares
(:mod:`fasttune.executors._ray_worker`), in a placement group made from the trial's
``PlacementGroupFactory`` (:mod:`fasttune.executors._ray_resources`, whose manager
answers the controller's resource questions): the actor takes the first bundle, and
the tasks and actors the trial starts are placed in the group's bundles.

Transport: every command is one ``step`` call on the trial's actor, carrying the
commands sent since its last call; the reply carries the events, pickled, and
whether the trial may train further. While it may, the driver keeps one call in
flight, so the actor trains between the driver's decisions exactly as far as credit
and the lookahead bound allow (:mod:`fasttune.executors.flow_control`). ``poll``
waits on every call in flight (and on groups being placed) with one ``ray.wait``.

A call that fails because its actor died (the process, or its node) becomes a
``TrialFailed`` event with ``exc_type="WorkerDied"``, never a hang; the trial's
group is then removed, so a retry is placed afresh (on another node if its node
is gone).

Reuse: a trial that allowed reuse leaves its actor idle in its group; the next trial
that gets that group (an equal factory) and has the same trainable takes the actor
over through ``Trainable.reset``. Without reuse each trial gets a new actor, as a
local trial gets a new process. A group's first actor is started as soon as the group
is asked for, so that Ray starts it (~1 s: a worker process) while it places the group.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fasttune._support.pickling import dumps
from fasttune.executors._ray_connection import RayConnection
from fasttune.executors._ray_resources import PlacedGroup, RayResourceManager
from fasttune.executors._ray_worker import RayWorker
from fasttune.executors._trial_hosting import pickle_exception
from fasttune.executors.base import (
    Allocation,
    Event,
    Executor,
    TrialFailed,
    TrialLaunch,
    TrialResults,
    TrialStarted,
    TrialStopped,
)
from fasttune.executors.worker_commands import GRANT, SAVE, START, STOP, Command, warn_reset_once
from fasttune.trainable.util import share_parameters_with

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 1.0
"""How long shutdown waits for actors to stop their Trainables before killing them."""

PLACEMENT_WAIT_S = 0.1
"""With no call in flight, ``poll`` waits this long for a group being placed."""


@dataclass(eq=False)
class _Actor:
    """The driver's record of one actor."""

    handle: Any
    group: PlacedGroup | None  # None: placed by its allocation alone
    placement: tuple[Any, ...]  # what an idle actor without a group must match
    keys: set[str] = field(default_factory=set)  # trainables it has received
    calls: deque[Any] = field(default_factory=deque)  # step calls in flight, in order
    launch: TrialLaunch | None = None  # the hosted trial
    started: bool = False
    stopping: bool = False  # stop_trial was sent: its results are dropped
    reuse_attempt: bool = False  # the hosted trial was given an idle actor
    waited: bool = False  # it was started before the hosted trial (idle, or a spare)
    idle_key: str | None = None  # idle, keeping a Trainable of this key for reuse


class RayExecutor(Executor):
    """Runs trials as Ray actors, on the cluster this process is (or gets) connected to.

    Args:
        address: The cluster to connect to when this process is not connected yet
            (``"auto"``, ``"ray://host:10001"``...); None starts a Ray instance on this
            machine, as ``ray.init()`` does. A connection the process already has is
            used as it is and left open; one opened here is closed by :meth:`shutdown`.
        init_kwargs: Further ``ray.init`` arguments for a connection opened here.
        autoscaling: Whether the cluster may add nodes (then requests that do not fit
            wait instead of failing); None detects it as Ray Tune does.

    Example (needs ``ray``; not run as a doctest)::

        executor = RayExecutor("auto")
        tuner = fasttune.Tuner(train_fn, _executor=executor)  # or fasttune.init("auto")
    """

    #: Its actors upload their trials' captured output (``log_to_file``) to remote
    #: storage themselves (:mod:`._trial_output`): they may run on other nodes.
    uploads_trial_output = True

    def __init__(
        self,
        address: str | None = None,
        *,
        init_kwargs: Mapping[str, Any] | None = None,
        autoscaling: bool | None = None,
    ):
        self._connection = RayConnection(address, init_kwargs)
        ray = self._ray = self._connection.ray
        from ray.exceptions import RayError
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._ray_error = RayError
        self._in_group = PlacementGroupSchedulingStrategy
        self._actor_class = ray.remote(RayWorker)
        self._resources = RayResourceManager(
            ray,
            autoscaling=autoscaling,
            on_removed=self._on_group_removed,
            on_asked=self._on_group_asked,
        )
        self._trials: dict[str, _Actor] = {}
        self._idle: list[_Actor] = []  # least recently used first
        self._spares: dict[PlacedGroup, _Actor] = {}  # fresh actors in their groups
        self._in_flight: dict[Any, _Actor] = {}  # step call -> its actor
        self._blobs: dict[str, Any] = {}  # trainable_key -> the trainable in the object store
        self._warned_reset: set[str] = set()
        self._closed = False
        share_parameters_with(_RayObjects.put)

    def resource_manager(self) -> RayResourceManager:
        """The cluster's answers to the controller's resource questions."""
        return self._resources

    @property
    def num_running(self) -> int:
        return len(self._trials)

    @property
    def owns_connection(self) -> bool:
        """True when this executor opened the Ray connection (and will close it)."""
        return self._connection.owned

    def prestart(self, resources: Any) -> None:
        """Ask Ray now for a group of these resources and start its actor (a hint, given
        as ``fit()`` begins: the first trial then finds them placed, or nearly). A
        request that cannot fit is left for the trial, which reports it."""
        try:
            self._resources.prepare(resources)
        except Exception:
            logger.debug("prestart(%r) asked for nothing", resources, exc_info=True)

    # ------------------------------------------------------------------ commands
    def start_trial(self, launch: TrialLaunch) -> None:
        if self._closed:
            raise RuntimeError("start_trial() was called after shutdown()")
        if launch.trial_id in self._trials:
            raise ValueError(f"trial {launch.trial_id!r} is already running")
        group = self._resources.group_of(launch.trial_id)
        actor = self._take_idle(launch, group)
        if actor is None and group is not None:
            actor = self._spares.pop(group, None)
        waited = actor is not None
        if actor is None:
            actor = self._new_actor(launch.allocation, group)
        actor.waited = waited
        actor.reuse_attempt = actor.idle_key is not None
        actor.idle_key = None
        actor.launch = launch
        actor.started = actor.stopping = False
        self._trials[launch.trial_id] = actor
        self._send_start(actor, launch)

    def grant(self, trial_id: str, iterations: int) -> None:
        self._command(trial_id, (GRANT, iterations))

    def save_trial(self, trial_id: str) -> None:
        self._command(trial_id, (SAVE, None))

    def stop_trial(self, trial_id: str) -> None:
        actor = self._trials.get(trial_id)
        if actor is not None and not actor.stopping:
            actor.stopping = True
            self._call(actor, [(STOP, None)])

    def kill_trial(self, trial_id: str) -> None:
        actor = self._trials.pop(trial_id, None)
        if actor is not None:
            actor.launch = None
            self._kill(actor)

    def _command(self, trial_id: str, command: Command) -> None:
        actor = self._trials.get(trial_id)
        if actor is not None and not actor.stopping:
            self._call(actor, [command])

    def _send_start(self, actor: _Actor, launch: TrialLaunch) -> None:
        blob = None
        if launch.trainable_key not in actor.keys:
            actor.keys.add(launch.trainable_key)
            blob = self._blobs.get(launch.trainable_key)
            if blob is None:
                blob = self._blobs[launch.trainable_key] = self._ray.put(launch.trainable_blob)
        self._call(actor, [(START, replace(launch, trainable_blob=b""))], blob)
        for _ in range(_depth(launch)):  # trains right behind the start, which replies at once
            self._call(actor, [])

    def _call(self, actor: _Actor, commands: list[Command], blob: Any = None) -> None:
        ref = actor.handle.step.remote(dumps(commands), blob)
        actor.calls.append(ref)
        self._in_flight[ref] = actor

    # ------------------------------------------------------------------ events
    def poll(self, timeout: float | None) -> list[Event]:
        """Events since the last poll, waiting up to ``timeout`` s for the first.

        With no call in flight, it waits up to :data:`PLACEMENT_WAIT_S` for a group
        being placed, even when ``timeout`` is 0 (the controller polls with 0 while
        no trial runs), so that it does not spin while Ray places the group.
        """
        if self._closed:
            return []
        staging = self._resources.staging_refs()
        waiting = [*self._in_flight, *staging]
        if not waiting:
            return []
        if not self._in_flight:
            timeout = PLACEMENT_WAIT_S if timeout is None else max(timeout, PLACEMENT_WAIT_S)
        ready, _ = self._ray.wait(waiting, num_returns=1, timeout=timeout)
        if not ready:
            return []
        if len(waiting) > 1:
            ready, _ = self._ray.wait(waiting, num_returns=len(waiting), timeout=0)
        done = set(ready)
        if staging:
            self._resources.mark_ready(done)
        events: list[Event] = []
        for actor in {self._in_flight[ref]: None for ref in ready if ref in self._in_flight}:
            self._on_replies(actor, done, events)
        return events

    def _on_replies(self, actor: _Actor, done: set[Any], events: list[Event]) -> None:
        """Handle the actor's finished calls, oldest first (they finish in order)."""
        calls = actor.calls
        while calls and calls[0] in done:
            ref = calls.popleft()
            del self._in_flight[ref]
            try:
                replies, can_train = self._ray.get(ref)
            except self._ray_error as exc:
                self._on_death(actor, exc, events)
                return
            for blob in replies:
                self._accept(actor, pickle.loads(blob), events)
            # A trial that may train keeps a call in flight (the actor trains in it); one
            # that never waits for a decision (no lookahead bound) keeps two, so that
            # it trains on while a reply and the next call travel. A stopping trial
            # keeps one while its loop is busy: a loop in a thread of its own may send
            # TrialStopped after the reply to the stop call (the trainable cleaning up).
            launch = actor.launch
            if can_train and launch is not None:
                depth = 1 if actor.stopping else _depth(launch)
                for _ in range(depth - len(calls)):
                    self._call(actor, [])

    def _accept(self, actor: _Actor, event: Event, events: list[Event]) -> None:
        launch = actor.launch
        if launch is None or event.trial_id != launch.trial_id:
            return  # killed, or already ended
        if isinstance(event, TrialResults):
            if actor.stopping:
                return
        elif isinstance(event, TrialStarted):
            actor.started = True
            if actor.reuse_attempt and not event.reused:
                warn_reset_once(logger, self._warned_reset, launch.trainable_key)
        elif isinstance(event, (TrialStopped, TrialFailed)):
            del self._trials[launch.trial_id]
            actor.launch = None
            if isinstance(event, TrialStopped) and launch.reuse:
                actor.idle_key = launch.trainable_key
                self._idle.append(actor)
            else:
                self._kill(actor)  # its loop has retired
        events.append(event)

    def _on_death(self, actor: _Actor, exc: BaseException, events: list[Event]) -> None:
        # Also when Ray only says "unavailable" (its node is unreachable): killed, it
        # cannot come back and train on beside the retry.
        self._kill(actor)
        launch = actor.launch
        if launch is None:
            return
        actor.launch = None
        del self._trials[launch.trial_id]
        if actor.waited and not actor.started:
            # An idle or spare actor died while it waited (e.g. with its node): the trial
            # never ran, so it starts again on a new actor instead of failing.
            logger.info("The actor given to trial %s had died; starting a new one.", launch)
            self.start_trial(launch)
            return
        self._resources.discard_on_release(launch.trial_id)
        during = "stop" if actor.stopping else "train" if actor.started else "start"
        events.append(
            TrialFailed(
                launch.trial_id,
                error=f"the Ray actor of trial {launch.trial_id} died: {exc}",
                exc_type="WorkerDied",
                during=during,
                # Ray's own error (ActorDiedError...) becomes Result.error, as in Ray Tune,
                # where it tells an infrastructure failure from the trainable's.
                exception=pickle_exception(exc),
            )
        )

    # ------------------------------------------------------------------ actors
    def _take_idle(self, launch: TrialLaunch, group: PlacedGroup | None) -> _Actor | None:
        """The idle actor this trial may take over, retiring one that stands in its way."""
        if group is not None:
            for actor in self._idle:
                if actor.group is group:
                    self._idle.remove(actor)
                    if launch.reuse and actor.idle_key == launch.trainable_key:
                        return actor
                    self._kill(actor)  # it holds the group's first bundle
                    return None
            return None
        if not launch.reuse:
            return None
        placement = _placement(launch.allocation)
        for actor in reversed(self._idle):
            if (
                actor.group is None
                and actor.placement == placement
                and actor.idle_key == launch.trainable_key
            ):
                self._idle.remove(actor)
                return actor
        return None

    def _new_actor(self, allocation: Allocation, group: PlacedGroup | None) -> _Actor:
        if group is None:
            resources = _amounts(allocation)
            strategy = None
        else:
            head_empty = group.pgf.head_bundle_is_empty
            resources = {} if head_empty else group.pgf.bundles[0]
            strategy = self._in_group(
                group.pg,
                placement_group_bundle_index=-1 if head_empty else 0,
                placement_group_capture_child_tasks=True,
            )
        options: dict[str, Any] = {
            "num_cpus": resources.get("CPU", 0.0),
            "num_gpus": resources.get("GPU", 0.0),
            "resources": {k: v for k, v in resources.items() if k not in ("CPU", "GPU", "memory")},
            "max_restarts": 0,
            "max_task_retries": 0,
        }
        if resources.get("memory"):
            options["memory"] = resources["memory"]
        if strategy is not None:
            options["scheduling_strategy"] = strategy
        handle = self._actor_class.options(**options).remote(_driver_sys_path())
        return _Actor(handle, group, _placement(allocation))

    def _kill(self, actor: _Actor) -> None:
        self._forget(actor)
        try:
            self._ray.kill(actor.handle, no_restart=True)
        except Exception:  # already dead
            logger.debug("ray.kill failed", exc_info=True)

    def _forget(self, actor: _Actor) -> None:
        for ref in actor.calls:
            self._in_flight.pop(ref, None)
        actor.calls.clear()
        if actor in self._idle:
            self._idle.remove(actor)

    def _on_group_asked(self, group: PlacedGroup) -> None:
        """Start the actor of a group Ray is placing, so that both happen at once (an
        actor takes Ray ~1 s: a worker process); the group's first trial takes it."""
        self._spares[group] = self._new_actor(Allocation(), group)

    def _on_group_removed(self, group: PlacedGroup) -> None:
        """The resource manager removes an unheld group: Ray kills the actor in it."""
        for actor in [a for a in self._idle if a.group is group]:
            self._forget(actor)
        self._spares.pop(group, None)

    # ------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Stop every Trainable (waiting up to :data:`SHUTDOWN_GRACE_S`), kill every
        actor, remove every placement group, and close the connection if it is ours."""
        if self._closed:
            return
        self._closed = True
        share_parameters_with(None)
        actors = [*self._trials.values(), *self._idle, *self._spares.values()]
        self._trials.clear()
        self._idle.clear()
        self._spares.clear()
        self._in_flight.clear()
        try:
            if actors:
                closing = [actor.handle.close.remote() for actor in actors]
                self._ray.wait(closing, num_returns=len(closing), timeout=SHUTDOWN_GRACE_S)
            for actor in actors:
                self._kill(actor)
            self._resources.shutdown()
        finally:
            self._blobs.clear()
            self._connection.close()


class _RayObjects:
    """``with_parameters`` objects in the object store: put once, fetched by each actor.

    Pickled with ``ray.cloudpickle``, which registers the reference as serialized out
    of band, so the object stays alive while the job runs.
    """

    def __init__(self, ref: Any):
        self._ref = ref

    @classmethod
    def put(cls, objects: Any) -> _RayObjects:
        import ray

        return cls(ray.put(objects))

    def load(self) -> Any:
        import ray

        return ray.get(self._ref)

    def __getstate__(self) -> dict[str, Any]:
        from ray import cloudpickle

        return {"ref": cloudpickle.dumps(self._ref)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from ray import cloudpickle

        self._ref = cloudpickle.loads(state["ref"])


def _depth(launch: TrialLaunch) -> int:
    """Calls to keep in flight to a trial that may train: 2 where it never waits for a
    decision (the next one queued behind the one it trains in), else 1."""
    return 2 if math.isinf(launch.lookahead_s) else 1


def _driver_sys_path() -> list[str]:
    """This process's ``sys.path``, with "" (the working directory) spelled out."""
    return [os.path.abspath(entry) for entry in sys.path]


def _amounts(allocation: Allocation) -> dict[str, float]:
    out = {"CPU": allocation.cpu, "GPU": allocation.gpu, "memory": allocation.memory}
    out.update(allocation.custom)
    return out


def _placement(allocation: Allocation) -> tuple[Any, ...]:
    return tuple(sorted(_amounts(allocation).items()))
