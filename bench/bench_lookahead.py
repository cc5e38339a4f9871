"""Iterations a trial runs past a driver-side stop decision (the lookahead), and its cost.

For iteration times of 0.1 ms, 10 ms, 50 ms and 1 s, trials stop at iteration ``K`` through
(a) a callable ``RunConfig(stop=lambda trial_id, result: ...)`` and (b) a custom
``Stopper``. Each trial appends every iteration it starts to a side file outside the
experiment, so the count is of work actually done, not of results kept. Prints one
row per case: iterations run past ``K`` (max and mean over trials), the median time a
``report()`` call took (handing the result over, plus any wait for the driver's
acknowledgement: the price of exactness) and the fit time.

Run: ``.venv/bin/python bench/bench_lookahead.py [--quick]``; to measure another
checkout, put it first on ``PYTHONPATH`` (the first line names the fasttune used).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import fasttune as tune

# (label, seconds per iteration, deciding iteration K, trials)
CASES = [
    ("0.1 ms", 0.0001, 500, 4),
    ("10 ms", 0.01, 50, 4),
    ("50 ms", 0.05, 10, 4),
    ("1 s", 1.0, 3, 2),
]


class StopAt(tune.Stopper):
    """Stops each trial at iteration ``k`` (a custom Stopper, evaluated on the driver)."""

    def __init__(self, k: int):
        self.k = k

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return result["training_iteration"] >= self.k

    def stop_all(self) -> bool:
        return False


def counting(config: dict[str, Any]) -> None:
    """Appends each iteration it starts to its side file (with the seconds the previous
    ``report()`` took: the hand-off plus any wait for the driver), works, reports."""
    path = os.path.join(config["side_dir"], f"{config['idx']}.log")
    seconds = config["seconds"]
    in_report = 0.0
    with open(path, "a", buffering=1) as side:
        for i in range(1, 10**9):
            side.write(f"{i} {in_report}\n")
            if seconds < 0.005:  # busy: sleep() overshoots sub-millisecond waits
                end = time.perf_counter() + seconds
                while time.perf_counter() < end:
                    pass
            else:
                time.sleep(seconds)
            started = time.perf_counter()
            tune.report({"i": i})
            in_report = time.perf_counter() - started


def run_case(
    seconds: float, k: int, trials: int, kind: str, root: str
) -> tuple[list[int], float, float]:
    """Iterations run past ``k`` by each trial, the median ``report()`` time, the fit time."""
    side_dir = tempfile.mkdtemp(dir=root, prefix="side_")
    stop: Any = (
        (lambda trial_id, result: result["training_iteration"] >= k)
        if kind == "callable"
        else StopAt(k)
    )
    tuner = tune.Tuner(
        counting,
        param_space={
            "idx": tune.grid_search(list(range(trials))),
            "seconds": seconds,
            "side_dir": side_dir,
        },
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        # Its own experiment per case: two cases can start in the same second.
        run_config=tune.RunConfig(
            storage_path=root, name=os.path.basename(side_dir), stop=stop, verbose=0
        ),
    )
    started = time.perf_counter()
    grid = tuner.fit()
    fit = time.perf_counter() - started
    assert not grid.errors, grid.errors
    past, in_report = [], []
    for idx in range(trials):
        with open(os.path.join(side_dir, f"{idx}.log")) as f:
            lines = [line.split() for line in f]
        past.append(len(lines) - k)
        in_report += [float(line[1]) for line in lines[1:]]
    return past, statistics.median(in_report), fit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the 1 s case")
    args = parser.parse_args()
    tune.init(num_cpus=2)
    print(f"fasttune from {os.path.dirname(tune.__file__)}")
    root = tempfile.mkdtemp(prefix="fasttune_lookahead_")
    run_case(0.0001, 10, 2, "callable", root)  # warm-up: fork server, imports
    header = ("iteration", "stop", "K", "trials", "past K: max", "mean", "report() ms", "fit s")
    print("{:>9} {:>8} {:>4} {:>6} {:>11} {:>6} {:>11} {:>6}".format(*header))
    for label, seconds, k, trials in CASES:
        if args.quick and seconds >= 1:
            continue
        for kind in ("callable", "Stopper"):
            past, in_report, fit = run_case(seconds, k, trials, kind, root)
            print(
                f"{label:>9} {kind:>8} {k:>4} {trials:>6} {max(past):>11} "
                f"{statistics.mean(past):>6.1f} {in_report * 1e3:>11.3f} {fit:>6.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
