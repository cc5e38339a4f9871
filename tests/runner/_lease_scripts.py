"""A driver of the lease tests, run as its own process (it gets refused, paused or
killed): ``python -m tests.runner._lease_scripts fit|restore <url>``.

It prints ``started`` before ``fit()`` and one JSON line when it ends: the trial
count, or the error that ended it.
"""

from __future__ import annotations

import json
import sys

import fasttune as tune
from tests.runner._driver_script import slow_counter

NAME = "leased"
STEPS = 30


def make_tuner(storage: str) -> tune.Tuner:
    """Two trials of 30 iterations, 0.25 s each: a run of about 8 s."""
    return tune.Tuner(
        slow_counter,
        param_space={"x": tune.grid_search([1, 2]), "n": STEPS, "sleep": 0.25},
        run_config=tune.RunConfig(storage_path=storage, name=NAME, verbose=0),
    )


def main(command: str, url: str) -> None:
    print("started", flush=True)
    try:
        if command == "fit":
            grid = make_tuner(url).fit()
        else:
            grid = tune.Tuner.restore(url, trainable=slow_counter).fit()
    except tune.TuneError as e:
        print(json.dumps({"error": type(e).__name__, "message": str(e)}), flush=True)
        sys.exit(3)
    print(json.dumps({"trials": len(grid), "terminated": grid.num_terminated}), flush=True)


if __name__ == "__main__":
    tune.init(num_cpus=2)
    main(sys.argv[1], sys.argv[2])
