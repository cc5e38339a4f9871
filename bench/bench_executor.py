"""Executor figures: worker start latency, results/s, trials/s (medians of runs).

Run: ``.venv/bin/python bench/bench_executor.py [--quick]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import cloudpickle

from fasttune import report
from fasttune.executors import (
    Executor,
    LocalExecutor,
    TrialLaunch,
    TrialResults,
    TrialStarted,
    TrialStopped,
)
from fasttune.trainable import Trainable, TrialInfo, wrap_function
from fasttune.trainable.trial_info import TRIAL_INFO

BIG = 10**12


class Idle(Trainable):
    def step(self) -> dict[str, Any]:
        return {"x": 1}


def report_forever(config: dict[str, Any]) -> None:
    while True:
        report({"x": 1})


def report_ten(config: dict[str, Any]) -> None:
    for i in range(10):
        report({"i": i})


def launch(root: str, trial_id: str, blob: bytes, key: str, **fields: Any) -> TrialLaunch:
    trial_dir = os.path.join(root, trial_id)
    config = {TRIAL_INFO: TrialInfo(trial_id, trial_id, trial_dir=trial_dir)}
    return TrialLaunch(trial_id, key, blob, config, trial_dir, **fields)


def wait_until(executor: Executor, kind: type, trial_id: str) -> None:
    while not any(isinstance(e, kind) and e.trial_id == trial_id for e in executor.poll(10)):
        pass


def start_latency(executor: Executor, root: str, n: int) -> float:
    """Median seconds from start_trial to TrialStarted, a fresh worker each time."""
    blob = cloudpickle.dumps(Idle)
    times = []
    for i in range(n):
        trial = launch(root, f"lat_{i}", blob, "idle", initial_credit=0)
        started = time.perf_counter()
        executor.start_trial(trial)
        wait_until(executor, TrialStarted, trial.trial_id)
        times.append(time.perf_counter() - started)
        executor.stop_trial(trial.trial_id)
        wait_until(executor, TrialStopped, trial.trial_id)
    return statistics.median(times)


def results_per_second(executor: Executor, root: str, run: int, seconds: float) -> float:
    """Results/s received from 2 trials reporting as fast as they can (each batch acknowledged)."""
    blob = cloudpickle.dumps(wrap_function(report_forever))
    ids = [f"rate_{run}_{i}" for i in range(2)]
    for trial_id in ids:
        executor.start_trial(launch(root, trial_id, blob, "forever", initial_credit=BIG))
    count, first = 0, None
    while first is None or time.perf_counter() - first < seconds:
        for event in executor.poll(10):
            if isinstance(event, TrialResults):
                executor.grant(event.trial_id, len(event.results))  # acknowledge, as the driver
                if first is None:
                    first = time.perf_counter()
                else:
                    count += len(event.results)
    elapsed = time.perf_counter() - first
    for trial_id in ids:
        executor.stop_trial(trial_id)
    while executor.num_running:
        executor.poll(10)
    return count / elapsed


def trials_per_second(executor: Executor, root: str, run: int, n: int, reuse: bool) -> float:
    """Trials/s for ``n`` function trials of 10 reports each, 2 at a time."""
    blob = cloudpickle.dumps(wrap_function(report_ten))
    pending = [f"t{run}_{reuse}_{i}" for i in range(n)]
    pending.reverse()
    started = time.perf_counter()
    for _ in range(2):
        trial_id = pending.pop()
        executor.start_trial(launch(root, trial_id, blob, "ten", initial_credit=100, reuse=reuse))
    while executor.num_running:
        for event in executor.poll(10):
            if isinstance(event, TrialResults) and event.results[-1].get("done"):
                executor.stop_trial(event.trial_id)
            elif isinstance(event, TrialResults):
                executor.grant(event.trial_id, len(event.results))
            elif isinstance(event, TrialStopped) and pending:
                trial = launch(root, pending.pop(), blob, "ten", initial_credit=100, reuse=reuse)
                executor.start_trial(trial)
            elif not isinstance(event, (TrialStarted, TrialResults, TrialStopped)):
                raise RuntimeError(f"unexpected event {event!r}")
    return n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer trials, shorter runs")
    args = parser.parse_args()
    n_trials, seconds = (100, 0.5) if args.quick else (500, 2.0)
    root = tempfile.mkdtemp(prefix="fasttune_bench_")
    executor = LocalExecutor()
    try:
        launch_warmup = launch(root, "warmup", cloudpickle.dumps(Idle), "idle", initial_credit=1)
        executor.start_trial(launch_warmup)  # starts the fork server
        wait_until(executor, TrialResults, "warmup")
        executor.stop_trial("warmup")
        wait_until(executor, TrialStopped, "warmup")

        latency = start_latency(executor, root, 20)
        print(f"worker start latency (median of 20): {latency * 1e3:.2f} ms")
        cold = LocalExecutor(prestart=False)
        try:
            latency = start_latency(cold, root, 20)
        finally:
            cold.shutdown()
        print(f"  same, prestart=False (fork on start): {latency * 1e3:.2f} ms")
        rates = [results_per_second(executor, root, run, seconds) for run in range(3)]
        print(f"results/s, 2 trials (median of 3):   {statistics.median(rates):,.0f}")
        for reuse in (True, False):
            runs = [trials_per_second(executor, root, run, n_trials, reuse) for run in range(3)]
            label = f"trials/s, {n_trials} x 10 reports, reuse={'on' if reuse else 'off'}"
            print(f"{label} (median of 3): {statistics.median(runs):,.0f}")
    finally:
        executor.shutdown()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
