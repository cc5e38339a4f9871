"""Class trainables that train a small torch model: a new worker per trial (the default).

A class trainable does not reuse workers unless asked (``reuse_actors=False``, as in
Ray Tune), so each trial starts in a new process, and what torch imports at its first
use (``torch._dynamo`` when the first optimizer is built) is paid per trial unless the
fork server imported it ahead (docs/PERFORMANCE.md, "Start with torch installed").

Usage: ``python bench/bench_torch_trials.py [--trials N] [--runs R] [--ray-trials M]``.
Runs fasttune as it is, fasttune with ``FASTTUNE_PRELOAD_IMPORTS=0``, and Ray Tune when
installed (fewer trials: each of its trials starts an actor that imports torch), each
in a process of its own, and prints the medians in trials per second.
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

_CHILD = r"""
import json, sys, tempfile, time
import torch
target, n = sys.argv[1], int(sys.argv[2])
if target == "ray":
    import ray
    from ray import tune
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
else:
    import fasttune as tune


class Net(tune.Trainable):
    def setup(self, config):
        nn = torch.nn
        self.model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=config["lr"])

    def step(self):
        x = torch.randn(32, 8)
        loss = (self.model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {"loss": loss.item(), "done": self.iteration >= 4}

    def save_checkpoint(self, checkpoint_dir):  # Ray Tune saves each trial at its end
        torch.save(self.model.state_dict(), checkpoint_dir + "/model.pt")

    def load_checkpoint(self, checkpoint_dir):
        self.model.load_state_dict(torch.load(checkpoint_dir + "/model.pt"))


tuner = tune.Tuner(
    Net,
    param_space={"lr": tune.loguniform(1e-4, 1e-1)},
    tune_config=tune.TuneConfig(num_samples=n, metric="loss", mode="min"),
    run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
)
start = time.time()
grid = tuner.fit()
fit = time.time() - start
assert len(grid) == n and not grid.errors
print("RESULT " + json.dumps({"trials_per_s": n / fit}))
"""


def _run(target: str, trials: int, **env: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, target, str(trials)],
        capture_output=True,
        text=True,
        env=dict(os.environ, **env),
        cwd=tempfile.gettempdir(),
        timeout=1800,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
        raise SystemExit(f"{target} failed:\n{out.stderr[-3000:]}")
    return float(json.loads(lines[-1][len("RESULT ") :])["trials_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ray-trials", type=int, default=20)
    args = parser.parse_args()
    try:
        import ray  # noqa: F401

        has_ray = True
    except ImportError:
        has_ray = False
    rows: dict[str, list[float]] = {"fasttune": [], "fasttune, no preloading": [], "Ray Tune": []}
    started = time.time()
    for _ in range(args.runs):  # interleaved: the machine's load moves within minutes
        rows["fasttune"].append(_run("fasttune", args.trials))
        rows["fasttune, no preloading"].append(
            _run("fasttune", args.trials, FASTTUNE_PRELOAD_IMPORTS="0")
        )
        if has_ray:
            rows["Ray Tune"].append(_run("ray", args.ray_trials))
    best = statistics.median(rows["fasttune"])
    print(f"| target | trials | trials/s (median of {args.runs}) | fasttune's ratio to it |")
    print("|---|---|---|---|")
    for name, rates in rows.items():
        if not rates:
            continue
        n = args.ray_trials if name == "Ray Tune" else args.trials
        rate = statistics.median(rates)
        print(f"| {name} | {n} | {rate:.2f} | {best / rate:.1f}x |")
    print(f"({time.time() - started:.0f} s in all)")


if __name__ == "__main__":
    main()
