"""Scale: one experiment of many trivial trials, measured as it grows.

For each size N (default 1,000, 10,000 and 100,000 trials x 10 reports, default
loggers): the time per successive 1,000 trials (flat means every per-event cost is
O(1) or O(live trials)), the driver's RSS at each thousand, the most file
descriptors open at once, then the time to build the ``ResultGrid`` and its data
frame, and the time (and peak RSS) to restore the finished experiment in a new process.

Run: ``.venv/bin/python bench/bench_scale.py [--sizes 1000,10000,100000] [--reports 10]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

EXPERIMENT = r"""
import json, os, resource, sys, time
import fasttune as tune

n, reports, storage = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
tune.init(num_cpus=2)
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


class Meter(tune.Callback):
    def __init__(self):
        self.done, self.last = 0, time.perf_counter()
        self.per_1000, self.rss, self.max_fds = [], [], 0

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.done += 1
        if self.done % 1000 == 0:
            now = time.perf_counter()
            self.per_1000.append(round(now - self.last, 3))
            self.last = now
            self.rss.append(round(rss_mb(), 1))
            self.max_fds = max(self.max_fds, len(os.listdir("/proc/self/fd")))


def trivial(config):
    for i in range(reports):
        tune.report({"score": config["x"] + i})


meter = Meter()
start = time.perf_counter()
tuner = tune.Tuner(
    trivial,
    param_space={"x": tune.uniform(0, 1)},
    tune_config=tune.TuneConfig(num_samples=n, metric="score", mode="max"),
    run_config=tune.RunConfig(storage_path=storage, name="scale", verbose=0, callbacks=[meter]),
)
grid = tuner.fit()
fit = time.perf_counter() - start
assert len(grid) == n and not grid.errors
t = time.perf_counter()
grid = tuner.get_results()
best = grid.get_best_result()
grid_s = time.perf_counter() - t
t = time.perf_counter()
frame = grid.get_dataframe()
assert len(frame) == n
frame_s = time.perf_counter() - t
print(json.dumps({
    "trials": n, "fit_s": round(fit, 2), "per_1000_s": meter.per_1000,
    "rss_mb": meter.rss,
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    "max_fds": meter.max_fds, "result_grid_s": round(grid_s, 2), "dataframe_s": round(frame_s, 2),
    "best": best.metrics["score"],
}))
"""

RESTORE = r"""
import json, sys, time
import fasttune as tune

path, n = sys.argv[1], int(sys.argv[2])


def trivial(config):
    raise AssertionError("a finished experiment runs nothing on restore")


start = time.perf_counter()
tuner = tune.Tuner.restore(path, trainable=trivial)
grid = tuner.fit()
assert len(grid) == n and not grid.errors, (len(grid), grid.errors[:1])
import resource
print(json.dumps({
    "restore_s": round(time.perf_counter() - start, 2),
    "restore_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
}))
"""


def run(code: str, *args: str) -> dict:
    command = [sys.executable, "-c", code, *args]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-4000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--reports", type=int, default=10)
    args = parser.parse_args()
    print("| trials | fit s | s per 1,000 (first, median, last) | RSS MB at 1k / last | "
          "max fds | ResultGrid s | dataframe s | restore s | restore's peak RSS MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as storage:
            row = run(EXPERIMENT, str(n), str(args.reports), storage)
            row.update(run(RESTORE, os.path.join(storage, "scale"), str(n)))
        per = sorted(row["per_1000_s"])
        median = per[len(per) // 2]
        print(
            f"| {n:,} | {row['fit_s']} | {row['per_1000_s'][0]}, {median}, "
            f"{row['per_1000_s'][-1]} | {row['rss_mb'][0]} / {row['rss_mb'][-1]} | "
            f"{row['max_fds']} | {row['result_grid_s']} | {row['dataframe_s']} | "
            f"{row['restore_s']} | {row['restore_peak_rss_mb']} |",
            flush=True,
        )
        print("  " + json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
