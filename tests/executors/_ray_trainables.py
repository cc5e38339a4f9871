"""Trainables of the Ray executor's Tuner and cluster tests.

A light module (no pytest) that Ray actors import when they unpickle a trainable.
Ray is imported only inside a trial that runs in a Ray actor.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from typing import Any

import fasttune as tune


def placement() -> dict[str, Any]:
    """Where this code runs: the Ray node and actor (None outside a Ray actor), the pid,
    the GPUs it sees."""
    where = {"pid": os.getpid(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return {"node_id": None, "actor_id": None, **where}
    context = ray.get_runtime_context()
    return {"node_id": context.get_node_id(), "actor_id": context.get_actor_id(), **where}


def where_fn(config: dict[str, Any]) -> None:
    """Reports ``n`` times where it runs (and the size of a ``data`` parameter)."""
    for i in range(config.get("n", 3)):
        if config.get("sleep"):
            time.sleep(config["sleep"])
        tune.report({"i": i, **placement()})


def data_fn(config: dict[str, Any], data: bytes) -> None:
    """A ``with_parameters`` function: reports the size of the object it got."""
    tune.report({"size": len(data), **placement()})


def bundles_fn(config: dict[str, Any]) -> None:
    """Starts a task (1 CPU) in each bundle but the first (its own); reports their nodes."""
    import ray
    from ray.util.placement_group import get_current_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote(num_cpus=1)
    def node() -> str:
        return ray.get_runtime_context().get_node_id()

    group = get_current_placement_group()
    nodes = ray.get(
        [
            node.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, index)
            ).remote()
            for index in range(1, len(group.bundle_specs))
        ]
    )
    tune.report({"bundle_nodes": nodes, **placement()})


class Steps(tune.Trainable):
    """Counts steps (the count lives in its checkpoints), reporting where it runs.

    config: ``sleep`` per step; ``die_at``: the first time it reaches that step, the
    process exits (as if killed); ``marker_dir``: where it notes that, and each step
    (``<trial>_<step>`` files) for tests that act on the run from outside; ``say``:
    print each step and its node.
    """

    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0
        self.restored_at = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        marker_dir = self.config.get("marker_dir")
        if marker_dir and self.n == self.config.get("die_at"):
            marker = os.path.join(marker_dir, f"died_{self.trial_id}")
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)
        if self.config.get("sleep"):
            time.sleep(self.config["sleep"])
        if marker_dir:
            open(os.path.join(marker_dir, f"{self.trial_id}_{self.n}"), "w").close()
        where = placement()
        if self.config.get("say"):  # for RunConfig(log_to_file=...)
            print(f"step {self.n} on {where['node_id']}", flush=True)
        return {"n": self.n, "restored_at": self.restored_at, **where}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "n.json"), "w") as f:
            json.dump(self.n, f)

    def load_checkpoint(self, checkpoint: str) -> None:
        with open(os.path.join(checkpoint, "n.json")) as f:
            self.n = self.restored_at = json.load(f)

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.n = self.restored_at = 0
        return True


def checkpointing_fn(config: dict[str, Any]) -> None:
    """The function-API twin of :class:`Steps`: a checkpoint with every report (and
    ``die_at``, ``marker_dir`` as there); reports the thread it runs in."""
    n = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "n.json")) as f:
            n = json.load(f)
    restored_at = n
    while n < config.get("steps", 10):
        n += 1
        marker_dir = config.get("marker_dir")
        if marker_dir and n == config.get("die_at"):
            marker = os.path.join(marker_dir, "died")
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)
        if config.get("sleep"):
            time.sleep(config["sleep"])
        directory = tempfile.mkdtemp()
        with open(os.path.join(directory, "n.json"), "w") as f:
            json.dump(n, f)
        tune.report(
            {
                "n": n,
                "restored_at": restored_at,
                "thread": threading.current_thread().name,
                **placement(),
            },
            checkpoint=tune.Checkpoint.from_directory(directory),
        )


def chatty_fn(config: dict[str, Any]) -> None:
    """Prints each step to stdout and stderr (for ``RunConfig(log_to_file=...)``), and
    once more after its last report."""
    for i in range(config.get("n", 3)):
        print(f"out {config['x']} {i}")
        print(f"err {config['x']} {i}", file=sys.stderr)
        tune.report({"i": i, **placement()})
    print(f"out {config['x']} done", end="")  # no newline: flushed by the upload


def child_task_fn(config: dict[str, Any]) -> None:
    """Starts one task of ``cpus`` CPUs where Ray places it (in the trial's group, which
    captures it) and reports its answer."""
    import ray

    @ray.remote
    def one() -> int:
        return 1

    tune.report({"value": ray.get(one.options(num_cpus=config["cpus"]).remote()), **placement()})


def endless_fn(config: dict[str, Any]) -> None:
    """Reports every 10 ms until stopped, then cleans up for ``cleanup_s``."""
    n = 0
    try:
        while True:
            time.sleep(0.01)
            n += 1
            tune.report({"n": n, "thread": threading.current_thread().name})
    finally:
        time.sleep(config.get("cleanup_s", 0.2))
