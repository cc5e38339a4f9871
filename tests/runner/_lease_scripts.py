"""A driver of the lease tests, run as its own process (it gets refused, paused or
killed): ``python -m tests.runner._lease_scripts fit|restore <url>``.

It prints ``started`` before ``fit()`` and one JSON line when it ends: the trial
count, or the error that ended it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import fasttune as tune
from tests.runner._driver_script import slow_counter

NAME = "leased"
STEPS = 30
PAUSE_AT_RESULT = "FASTTUNE_TEST_PAUSE_AT_RESULT"


class PauseSelf(tune.Callback):
    """Stops this driver's own process (SIGSTOP) at its ``PAUSE_AT_RESULT``-th result,
    when that variable is set: a pause between two syncs of the storage, never in the
    middle of an upload (a driver paused mid-upload finishes it when resumed, a gap
    docs/ARCHITECTURE.md names). A no-op in a process without the variable, such as the
    test's own restore of this experiment."""

    def __init__(self) -> None:
        self.results = 0

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info):
        self.results += 1
        if str(self.results) == os.environ.get(PAUSE_AT_RESULT):
            os.kill(os.getpid(), signal.SIGSTOP)


def make_tuner(storage: str) -> tune.Tuner:
    """Two trials of 30 iterations, 0.25 s each: a run of about 8 s."""
    return tune.Tuner(
        slow_counter,
        param_space={"x": tune.grid_search([1, 2]), "n": STEPS, "sleep": 0.25},
        run_config=tune.RunConfig(
            storage_path=storage, name=NAME, verbose=0, callbacks=[PauseSelf()]
        ),
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
