"""The shared bench's `trials` workload with ``reuse_actors=False`` (a fresh worker per trial).

Usage: python _trials_no_reuse.py ray|fasttune trials
Prints: RESULT {"trials_per_s": ...}, like ../shared/bench/workloads.py.
"""

import json
import os
import sys
import tempfile
import time

target = sys.argv[1]
if target == "ray":
    import ray
    from ray import tune

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
else:
    import fasttune as tune

n, iters = int(os.environ.get("N", 500)), 10


def trainable(config):
    for i in range(iters):
        tune.report({"score": config["x"] + i})


tuner = tune.Tuner(
    trainable,
    param_space={"x": tune.uniform(0, 1)},
    tune_config=tune.TuneConfig(num_samples=n, reuse_actors=False),
    run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(prefix="bench_"), verbose=0),
)
start = time.time()
grid = tuner.fit()
fit = time.time() - start
assert len(grid) == n and not grid.errors
print("RESULT " + json.dumps({"target": target, "trials": n, "trials_per_s": round(n / fit, 1)}))
