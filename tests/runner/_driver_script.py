"""An experiment run as its own process by the resume tests (the process gets killed)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import fasttune as tune


def slow_counter(config):
    start = 0
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        start = json.load(open(os.path.join(ckpt.path, "state.json")))["i"] + 1
    for i in range(start, config["n"]):
        time.sleep(config["sleep"])
        d = tempfile.mkdtemp()
        json.dump({"i": i}, open(os.path.join(d, "state.json"), "w"))
        tune.report({"i": i, "x": config["x"]}, checkpoint=tune.Checkpoint.from_directory(d))


def make_tuner(storage: str, ahead: bool = False, sleep: float = 0.05) -> tune.Tuner:
    """Two trials at a time: by ``max_concurrent_trials``, which creates each trial as a
    slot frees, or (``ahead``) by the two CPUs, which lets the generator create the
    next trials ahead of time (PENDING, never started, when the driver is killed).
    Each trial reports 8 times, ``sleep`` seconds apart."""
    return tune.Tuner(
        slow_counter,
        param_space={"x": tune.uniform(0, 1), "n": 8, "sleep": sleep},
        tune_config=tune.TuneConfig(
            num_samples=10, max_concurrent_trials=None if ahead else 2, seed=3
        ),
        run_config=tune.RunConfig(storage_path=storage, name="killed", verbose=0),
    )


if __name__ == "__main__":
    tune.init(num_cpus=2)
    print("started", flush=True)
    make_tuner(sys.argv[1], ahead=sys.argv[2:] == ["ahead"]).fit()
    print("finished", flush=True)
