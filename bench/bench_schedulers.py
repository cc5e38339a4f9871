"""Scheduler quality: training iterations spent and best final score, per scheduler.

Learning-curve workloads, each run with FIFO, ASHA, HyperBand, the median stopping
rule and PBT over several seeds (the seed fixes the sampled configs, the same for
every scheduler):

- ``synthetic``: ``acc(t) = a * (1 - exp(-t / tau)) + noise`` with the asymptote
  ``a = 0.6 + 0.4 q`` and the time constant ``tau = 2 * 30**(1 - s)`` (2 to 60), where
  the speed ``s = (q + u) / 2`` is half tied to the asymptote (better configs tend to
  learn faster, as in real training) and ``q``, ``u`` are uniform in [0, 1]; the
  noise is seeded per (config, t), so a config always gives the same curve;
- ``crossing``: the same with ``s = u``: speed independent of the asymptote, so
  curves cross a lot and early results say little about the final ranking (the hard
  case for early stopping; not in ``--quick``);
- ``sgd``: scikit-learn ``SGDClassifier.partial_fit`` on ``load_digits``, one epoch per
  iteration, validation accuracy as the metric.

One line per scheduler and workload: iterations spent (median over seeds, and the
ratio to FIFO), best final score (the best trial's last ``acc``; median and range over
seeds) and wall time. Run: ``.venv/bin/python bench/bench_schedulers.py [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import random
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fasttune as tune

SCHEDULERS = ("fifo", "asha", "hyperband", "median", "pbt")


# ---------------------------------------------------------------------- workloads
# Class trainables: they save only when a scheduler asks (a pause, a PBT exploit).
class SyntheticCurve(tune.Trainable):
    """A deterministic noisy saturating curve per config."""

    def setup(self, config: dict[str, Any]) -> None:
        self.t = 0

    def step(self) -> dict[str, Any]:
        self.t += 1
        # PBT may perturb q and u out of [0, 1]: clip.
        q = min(max(self.config["q"], 0.0), 1.0)
        u = min(max(self.config["u"], 0.0), 1.0)
        link = self.config["link"]
        a = 0.6 + 0.4 * q
        tau = 2.0 * 30.0 ** (1.0 - (link * q + (1.0 - link) * u))
        seed = int(q * 1e6) * 1_000_000 + int(u * 1e6)
        noise = np.random.default_rng((seed, self.t)).normal(0.0, 0.01)
        acc = a * (1.0 - math.exp(-self.t / tau)) + noise
        return {"acc": acc, "done": self.t >= self.config["max_t"]}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"t": self.t}

    def load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.t = checkpoint["t"]

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.setup(new_config)
        return True


class SgdDigits(tune.Trainable):
    """One epoch of ``SGDClassifier.partial_fit`` per iteration; validation accuracy."""

    def setup(self, config: dict[str, Any], data: Any = None) -> None:
        from sklearn.linear_model import SGDClassifier

        if data is not None:
            self.data = data
        self.t = 0
        self.model = SGDClassifier(
            loss=config["loss"],
            alpha=config["alpha"],
            learning_rate="constant",
            eta0=config["eta0"],
            random_state=config["seed"],
        )

    def step(self) -> dict[str, Any]:
        x_train, y_train, x_val, y_val = self.data
        self.t += 1
        self.model.set_params(alpha=self.config["alpha"], eta0=self.config["eta0"])
        self.model.partial_fit(x_train, y_train, classes=np.arange(10))
        acc = float(self.model.score(x_val, y_val))
        return {"acc": acc, "done": self.t >= self.config["max_t"]}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"t": self.t, "model": pickle.dumps(self.model)}

    def load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.t = checkpoint["t"]
        self.model = pickle.loads(checkpoint["model"])

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.setup(new_config)
        return True


def digits_data() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order] / 16.0, y[order]
    cut = int(0.75 * len(y))
    return x[:cut], y[:cut], x[cut:], y[cut:]


def workloads(quick: bool) -> dict[str, dict[str, Any]]:
    return {
        "synthetic": {
            "trainable": SyntheticCurve,
            "space": {"q": tune.uniform(0, 1), "u": tune.uniform(0, 1), "link": 0.5},
            "mutations": {"q": tune.uniform(0, 1), "u": tune.uniform(0, 1)},
            "max_t": 27 if quick else 81,
            "interval": 3 if quick else 9,
            "samples": 9 if quick else 27,
        },
        "crossing": {
            "trainable": SyntheticCurve,
            "space": {"q": tune.uniform(0, 1), "u": tune.uniform(0, 1), "link": 0.0},
            "mutations": {"q": tune.uniform(0, 1), "u": tune.uniform(0, 1)},
            "max_t": 27 if quick else 81,
            "interval": 3 if quick else 9,
            "samples": 9 if quick else 27,
        },
        "sgd": {
            "trainable": tune.with_parameters(SgdDigits, data=digits_data()),
            "space": {
                "alpha": tune.loguniform(1e-6, 1e-1),
                "eta0": tune.loguniform(1e-4, 1.0),
                "loss": tune.choice(["hinge", "log_loss", "modified_huber"]),
                "seed": tune.randint(0, 10_000),
            },
            "mutations": {"alpha": tune.loguniform(1e-6, 1e-1), "eta0": tune.loguniform(1e-4, 1.0)},
            "max_t": 9 if quick else 27,
            "interval": 3,
            "samples": 9 if quick else 27,
        },
    }


# ---------------------------------------------------------------------- schedulers
def make_scheduler(name: str, workload: dict[str, Any]) -> Any:
    """The scheduler, or None if its module is not available yet."""
    max_t = workload["max_t"]
    if name == "fifo":
        return tune.schedulers.FIFOScheduler()
    if name == "asha":
        from fasttune.schedulers.async_hyperband import ASHAScheduler

        return ASHAScheduler(max_t=max_t, grace_period=1, reduction_factor=3)
    if name == "median":
        from fasttune.schedulers.median_stopping_rule import MedianStoppingRule

        # min_time_slice: a trial short of samples yields at most once per interval
        # (with 0, Ray's default, it yields after every result while others wait).
        return MedianStoppingRule(
            time_attr="training_iteration",
            grace_period=workload["interval"],
            min_samples_required=3,
            min_time_slice=workload["interval"],
        )
    try:
        if name == "hyperband":
            from fasttune.schedulers.hyperband import HyperBandScheduler

            return HyperBandScheduler(max_t=max_t, reduction_factor=3)
        from fasttune.schedulers.pbt import PopulationBasedTraining

        return PopulationBasedTraining(
            time_attr="training_iteration",
            perturbation_interval=workload["interval"],
            hyperparam_mutations=workload["mutations"],
        )
    except ImportError:
        return None


class CountResults(tune.Callback):
    """Counts the results the driver processed: the iterations trials ran."""

    def __init__(self) -> None:
        self.count = 0

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.count += 1


def run_once(workload: dict[str, Any], name: str, seed: int) -> tuple[int, float, float] | None:
    """(iterations, best final acc, seconds) of one experiment, or None if unavailable."""
    scheduler = make_scheduler(name, workload)
    if scheduler is None:
        return None
    random.seed(seed)
    np.random.seed(seed)
    counter = CountResults()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as storage:
        grid = tune.Tuner(
            workload["trainable"],
            param_space={**workload["space"], "max_t": workload["max_t"]},
            tune_config=tune.TuneConfig(
                metric="acc",
                mode="max",
                scheduler=scheduler,
                num_samples=workload["samples"],
                seed=seed,
            ),
            run_config=tune.RunConfig(
                storage_path=storage,
                name="bench",
                verbose=0,
                callbacks=[counter],
                # PBT exploits the top trials' latest checkpoints (every perturbation).
                checkpoint_config=tune.CheckpointConfig(
                    checkpoint_frequency=workload["interval"] if name == "pbt" else 0,
                    checkpoint_at_end=False,
                ),
            ),
        ).fit()
        if grid.num_errors:
            raise RuntimeError(f"{name}: {grid.errors[0]}")
        best = max(r.metrics["acc"] for r in grid if "acc" in r.metrics)
    return counter.count, best, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small runs (well under a minute)")
    parser.add_argument("--seeds", type=int, help="seeds per scheduler (default 3, quick 2)")
    parser.add_argument(
        "--workload", choices=("synthetic", "crossing", "sgd", "all"), default="all"
    )
    args = parser.parse_args()
    tune.init(num_cpus=2)
    # New workers fork with scikit-learn already imported (it takes ~1 s to import).
    from fasttune.executors import _forkserver

    _forkserver.default_server().preload(("sklearn.linear_model", "sklearn.datasets"))
    chosen = workloads(args.quick)
    if args.workload != "all":
        chosen = {args.workload: chosen[args.workload]}
    elif args.quick:
        del chosen["crossing"]
    seeds = list(range(args.seeds or (2 if args.quick else 3)))
    for label, workload in chosen.items():
        print(
            f"{label}: {workload['samples']} configs, max_t {workload['max_t']}, seeds {seeds}",
            flush=True,
        )
        fifo_iters = None
        for name in SCHEDULERS:
            runs = [run_once(workload, name, seed) for seed in seeds]
            if any(run is None for run in runs):
                print(f"  {name:<10} not available yet", flush=True)
                continue
            iters = statistics.median(r[0] for r in runs)
            best = [r[1] for r in runs]
            wall = statistics.median(r[2] for r in runs)
            fifo_iters = fifo_iters or iters
            print(
                f"  {name:<10} iterations {iters:>6.0f} ({iters / fifo_iters:4.2f}x fifo)  "
                f"best acc {statistics.median(best):.4f} [{min(best):.4f}-{max(best):.4f}]  "
                f"wall {wall:5.2f} s",
                flush=True,
            )
    tune.shutdown()


if __name__ == "__main__":
    main()
