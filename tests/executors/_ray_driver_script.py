"""A driver on the Ray test cluster with its experiment in S3, run as its own process
by test_ray_storage.py (which SIGKILLs it): ``python -m tests.executors._ray_driver_script
<cluster address> <storage url> <marker dir>``."""

from __future__ import annotations

import os
import sys

import ray

import fasttune as tune
from tests.executors._ray_trainables import Steps

STEPS = 30  # 9 s per trial: room for two state commits to moto before the kill, under load
AWS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def make_tuner(url: str, marker_dir: str) -> tune.Tuner:
    """Two trials of STEPS steps, one on each rack, a checkpoint at every step."""
    return tune.Tuner(
        tune.with_resources(Steps, lambda config: {"cpu": 1, config["rack"]: 1}),
        param_space={
            "rack": tune.grid_search(["rack_a", "rack_b"]),
            "sleep": 0.3,
            "marker_dir": marker_dir,
        },
        run_config=tune.RunConfig(
            storage_path=url,
            name="driver_lost",
            verbose=0,
            stop={"training_iteration": STEPS},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
        ),
    )


if __name__ == "__main__":
    address, url, marker_dir = sys.argv[1:4]
    env = {"env_vars": {k: os.environ[k] for k in AWS if k in os.environ}}
    ray.init(address=address, logging_level="ERROR", log_to_driver=False, runtime_env=env)
    print("started", flush=True)
    make_tuner(url, marker_dir).fit()
    print("finished", flush=True)
