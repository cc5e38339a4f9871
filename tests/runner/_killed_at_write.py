"""A driver that SIGKILLs itself just before its k-th durable write point.

The points counted are ``os.fsync`` and ``os.replace`` (the commit of an atomic
write): killing before the k-th one leaves the experiment exactly as a crash at that
moment would. ``k = 0`` kills right after the ``Tuner`` is built, before ``fit()``.
Run: ``python -m tests.runner._killed_at_write <storage> <k>``.
"""

from __future__ import annotations

import os
import signal
import sys

import fasttune as tune


def count(config):
    for i in range(3):
        tune.report({"score": config["x"] * 10 + i})


def make_tuner(storage: str) -> tune.Tuner:
    return tune.Tuner(
        count,
        param_space={"x": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=storage, name="early", verbose=0),
    )


def _kill_before(k: int) -> None:
    seen = [0]

    def wrap(real):
        def call(*args, **kwargs):
            seen[0] += 1
            if seen[0] == k:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        return call

    os.fsync = wrap(os.fsync)
    os.replace = wrap(os.replace)


if __name__ == "__main__":
    storage, k = sys.argv[1], int(sys.argv[2])
    tune.init(num_cpus=2)
    tuner = make_tuner(storage)
    if k == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    _kill_before(k)
    tuner.fit()
    print("finished", flush=True)
