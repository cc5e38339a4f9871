"""Many short trials (queued behind running ones), run as its own process so that a
test can SIGKILL the driver mid-run (tests/runner/test_queued_trials.py)."""

from __future__ import annotations

import sys

import fasttune as tune

TRIALS, REPORTS = 1500, 5


def short(config):
    for step in range(REPORTS):
        tune.report({"i": config["i"], "step": step})


def make_tuner(storage: str) -> tune.Tuner:
    return tune.Tuner(
        short,
        param_space={"i": tune.grid_search(list(range(TRIALS)))},
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(storage_path=storage, name="short", verbose=0),
    )


if __name__ == "__main__":
    tune.init(num_cpus=2)
    make_tuner(sys.argv[1]).fit()
