"""A driver that reaches the Ray test cluster through Ray Client only, run as its own
process by test_ray_cluster.py: ``python -m tests.executors._ray_client_driver
<ray://host:port> <storage path>``. Prints one ``RESULT <json>`` line."""

from __future__ import annotations

import json
import os
import sys

import fasttune as tune


def where(config):
    """Three reports naming the node and process that ran them."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    for step in range(3):
        tune.report({"node": node, "pid": os.getpid(), "step": step})


if __name__ == "__main__":
    address, storage = sys.argv[1:3]
    tune.init(address=address)
    grid = tune.Tuner(
        tune.with_resources(where, lambda config: {"cpu": 1, config["rack"]: 1}),
        param_space={"rack": tune.grid_search(["rack_a", "rack_b"])},
        run_config=tune.RunConfig(storage_path=storage, name="client", verbose=0),
    ).fit()
    import ray

    print(
        "RESULT "
        + json.dumps(
            {
                "errors": [str(e) for e in grid.errors],
                "trials": {
                    r.config["rack"]: {
                        "node": r.metrics["node"],
                        "pid": r.metrics["pid"],
                        "iterations": r.metrics["training_iteration"],
                        "path": r.path,
                    }
                    for r in grid
                },
                "driver_pid": os.getpid(),
                "still_connected": ray.is_initialized(),
            }
        ),
        flush=True,
    )
