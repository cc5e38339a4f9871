"""An OptunaSearch experiment run as its own process by test_optuna (the process gets killed).

Trial ``block_at`` (counted by starts, from 1) waits for a ``release`` file in ``dir``
before it reports, so the test can SIGKILL the driver at a known point.
"""

from __future__ import annotations

import os
import sys
import time

import fasttune as tune
from fasttune.search.optuna import OptunaSearch

POINTS = [{"x": 0.9, "opt": {"y": 1}}, {"x": -0.9, "opt": {"y": 3}}]
NUM_SAMPLES = 8


def quadratic(config):
    starts = os.path.join(config["dir"], "starts")
    with open(starts, "a") as f:
        f.write(f"{config['x']}\n")
    with open(starts) as f:
        count = sum(1 for _ in f)
    release = os.path.join(config["dir"], "release")
    if count == config["block_at"]:
        deadline = time.time() + 30
        while not os.path.exists(release) and time.time() < deadline:
            time.sleep(0.01)
    tune.report({"loss": (config["x"] - 0.3) ** 2 + (config["opt"]["y"] - 2) ** 2})


def make_tuner(storage: str, workdir: str, block_at: int = 0) -> tune.Tuner:
    searcher = OptunaSearch(points_to_evaluate=[dict(p) for p in POINTS], seed=11)
    return tune.Tuner(
        quadratic,
        param_space={
            "x": tune.uniform(-1, 1),
            "opt": {"y": tune.randint(0, 5)},
            "dir": workdir,
            "block_at": block_at,
        },
        tune_config=tune.TuneConfig(
            metric="loss",
            mode="min",
            search_alg=searcher,
            num_samples=NUM_SAMPLES,
            max_concurrent_trials=1,
        ),
        run_config=tune.RunConfig(storage_path=storage, name="optuna_killed", verbose=0),
    )


if __name__ == "__main__":
    tune.init(num_cpus=2)
    print("started", flush=True)
    make_tuner(sys.argv[1], sys.argv[2], int(sys.argv[3])).fit()
    print("finished", flush=True)
