"""Runner figures for the issue's targets, each a median of several runs.

Each workload runs in a fresh process (so start-up and memory are measured honestly)
and prints one line. Run: ``.venv/bin/python bench/bench_runner.py [--runs N] [--quick]``.

Ray Tune 2.60 on the same kind of 2-core machine: docs example 9.5 s per process,
11 trivial trials/s, 500 results/s, overhead ratio 1.27.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOAD = r"""
import time
process_start = time.perf_counter()
import json, os, resource, sys
import fasttune as tune

kind, arg, storage = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tune.init(num_cpus=2)

def trivial(config):
    for i in range(10):
        tune.report({"i": i})

def flood(config):
    for i in range(config["n"]):
        tune.report({"i": i, "loss": 1.0 / (i + 1)})

def sleepy(config):
    for i in range(5):
        time.sleep(0.1)
        tune.report({"i": i})

if kind == "trials":
    trainable, space, samples = trivial, {}, arg
elif kind == "results":
    trainable, space, samples = flood, {"n": arg}, 2
else:
    trainable, space, samples = sleepy, {}, arg

start = time.perf_counter()
grid = tune.Tuner(
    trainable,
    param_space=space,
    tune_config=tune.TuneConfig(num_samples=samples),
    run_config=tune.RunConfig(storage_path=storage, name="bench", verbose=0),
).fit()
elapsed = time.perf_counter() - start
assert grid.num_errors == 0 and len(grid) == samples, grid.errors
results = sum(r.metrics["training_iteration"] for r in grid)
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
total = time.perf_counter() - process_start
print(json.dumps({"elapsed": elapsed, "total": total, "results": results, "rss_mb": rss_mb}))
"""


def run_workload(kind: str, arg: int) -> dict:
    with tempfile.TemporaryDirectory() as storage:
        out = subprocess.run(
            [sys.executable, "-c", WORKLOAD, kind, str(arg), storage],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def docs_example_seconds() -> float:
    with tempfile.TemporaryDirectory() as storage:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, os.path.join(HERE, "docs_example.py"), storage],
            capture_output=True, check=True,
        )  # fmt: skip
        return time.perf_counter() - start


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller workloads, 3 runs")
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    n_trials = 200 if args.quick else 500
    n_results = 20_000 if args.quick else 100_000

    docs = [docs_example_seconds() for _ in range(runs)]
    print(
        f"docs example, whole process: median {median(docs):.2f} s "
        f"(runs: {', '.join(f'{d:.2f}' for d in docs)}; target <= 0.5 s, Ray 9.5 s)"
    )

    trials = [run_workload("trials", n_trials) for _ in range(runs)]
    rates = [n_trials / t["elapsed"] for t in trials]
    print(
        f"{n_trials} trivial trials x 10 reports: median {median(rates):.0f} trials/s "
        f"(target >= 300, Ray 11)"
    )

    floods = [run_workload("results", n_results) for _ in range(runs)]
    rates = [f["results"] / f["elapsed"] for f in floods]
    print(
        f"2 trials x {n_results} reports, default loggers: median {median(rates):,.0f} "
        f"results/s (target >= 20,000, Ray 500)"
    )

    small = run_workload("results", n_results // 10)
    big = run_workload("results", n_results)
    print(
        f"driver peak RSS: {small['rss_mb']:.0f} MB after {small['results']:,} results, "
        f"{big['rss_mb']:.0f} MB after {big['results']:,} results (target: flat)"
    )

    sleeps = [run_workload("overhead", 40) for _ in range(max(1, runs // 2))]
    ratios = [s["elapsed"] / 10.0 for s in sleeps]
    print(
        f"40 trials x 5 x 0.1 s on 2 slots: median overhead ratio {median(ratios):.3f} "
        f"(ideal 10 s; target <= 1.03, Ray 1.27)"
    )


if __name__ == "__main__":
    main()
