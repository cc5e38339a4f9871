"""PBT decision cost against population size, on a simulated clock.

``PopulationBasedTraining`` is driven directly with hand-made results through the
real ``ControllerView``: no workers, no sleeping; time is ``training_iteration``.
Every trial reports every iteration (in a seeded random order each round); a
trial's score is ``iteration * lr`` of its current config, so exploits change its
future. Every ``perturbation_interval`` iterations each trial's result is a
*perturbation*: it is ranked against the population, and bottom-quantile trials
exploit top-quantile ones (the requests are applied as the controller would:
new config, and the trial keeps running).

Printed per population size (each figure the median of a run, best of
``--repeats`` seeded runs): microseconds per perturbation decision (median, and
the mean, which includes the exploits' explore step), the median divided by the
population (flat when the cost is linear), the cost of a result between
perturbations (flat: O(1)), and for ``synch=True`` the cost of the decisions of one
whole-population round, per trial (flat when the round is linear). ``start us`` is
a ``choose_trial_to_run`` call: O(waiting trials), which a synchronous round makes
the whole population. Run:
``.venv/bin/python bench/bench_pbt_scale.py [--rounds N] [--sizes 32 64 ...]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fasttune import result as R
from fasttune._internal.checkpoint_manager import CheckpointManager
from fasttune._internal.controller_view import ControllerView
from fasttune._internal.plugin_requests import Exploit, Save
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers.pbt import PopulationBasedTraining

LRS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
INTERVAL = 4


def make_population(n: int, seed: int) -> tuple[PopulationBasedTraining, list[Trial], Any]:
    """``n`` running trials, each with a checkpoint, added to a seeded PBT."""
    rng = random.Random(seed)
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        metric="score",
        mode="max",
        perturbation_interval=INTERVAL,
        hyperparam_mutations={"lr": LRS},
        log_config=False,
    )
    pbt._rng = random.Random(seed)
    trials = []
    for i in range(n):
        trial = Trial("bench", config={"lr": rng.choice(LRS)}, trial_id=f"t{i:05d}")
        trial.experiment_tag = str(i)
        trial.checkpoint_manager = CheckpointManager(f"/ckpt/{trial.trial_id}")
        trial.checkpoint_manager.register("checkpoint_000000", {R.TRAINING_ITERATION: 0})
        trial.set_status(TrialStatus.RUNNING)
        trials.append(trial)
    view = ControllerView(trials, has_resources=lambda trial: True)
    for trial in trials:
        pbt.on_trial_add(view, trial)
    return pbt, trials, view


def checkpoint(trial: Trial, iteration: int) -> None:
    """Register a checkpoint of ``trial`` at ``iteration`` (a save or a pause)."""
    trial.checkpoint_manager.register(
        f"checkpoint_{iteration:06d}", {R.TRAINING_ITERATION: iteration}
    )


class Simulation:
    """A controller on a simulated clock: trials report in turn, decisions are applied."""

    def __init__(self, n: int, synch: bool, seed: int = 0):
        self.pbt, self.trials, self.view = make_population(n, seed)
        self.pbt._synch = synch
        self.iteration = {t.trial_id: 0 for t in self.trials}
        self.shuffle = random.Random(seed + 1).shuffle
        self.perturb_ns: list[int] = []
        self.between_ns: list[int] = []
        self.choose_ns: list[int] = []
        self.round_ns: list[int] = []  # all the decisions at one perturbation interval
        self.exploits = 0

    def tick(self) -> None:
        """Every running trial reports its next iteration, then waiting trials start."""
        clock = time.perf_counter_ns
        running = [t for t in self.trials if t.status is TrialStatus.RUNNING]
        self.shuffle(running)
        round_ns = 0
        for trial in running:
            it = self.iteration[trial.trial_id] = self.iteration[trial.trial_id] + 1
            result = {R.TRAINING_ITERATION: it, "score": it * trial.config["lr"]}
            trial.last_result = result
            start = clock()
            decision = self.pbt.on_trial_result(self.view, trial, result)
            elapsed = clock() - start
            if it % INTERVAL == 0:
                self.perturb_ns.append(elapsed)
                round_ns += elapsed
            else:
                self.between_ns.append(elapsed)
            if decision == PopulationBasedTraining.PAUSE and trial.status is TrialStatus.RUNNING:
                checkpoint(trial, it)  # pausing saves
                trial.set_status(TrialStatus.PAUSED)
            self.apply_requests()
        if round_ns:
            self.round_ns.append(round_ns)
        while True:
            start = clock()
            trial = self.pbt.choose_trial_to_run(self.view)
            self.choose_ns.append(clock() - start)
            self.apply_requests()
            if trial is None:
                break
            trial.set_status(TrialStatus.RUNNING)

    def apply_requests(self) -> None:
        for request in self.view.take_requests():
            trial = request.trial
            if isinstance(request, Save):
                checkpoint(trial, self.iteration[trial.trial_id])
            elif isinstance(request, Exploit):  # the donor's checkpoint, then wait to start
                trial.set_config(request.config)
                restored = int(os.path.basename(request.checkpoint.path).split("_")[-1])
                self.iteration[trial.trial_id] = restored
                trial.set_status(TrialStatus.PENDING)
                self.exploits += 1


def run(n: int, rounds: int, synch: bool, repeats: int = 3) -> dict[str, float]:
    """Time every scheduler call over ``rounds`` perturbation intervals.

    Medians per run (a GC pause or a busy neighbour does not count), the best of
    ``repeats`` runs with different seeds.
    """
    runs = []
    for seed in range(repeats):
        sim = Simulation(n, synch, seed)
        for _ in range(rounds * INTERVAL):
            sim.tick()
        runs.append(sim)
    us = 1e-3
    return {
        "perturb_median_us": min(statistics.median(r.perturb_ns) for r in runs) * us,
        "perturb_mean_us": min(statistics.fmean(r.perturb_ns) for r in runs) * us,
        "between_us": min(statistics.median(r.between_ns) for r in runs) * us,
        "choose_us": min(statistics.median(r.choose_ns) for r in runs) * us,
        "round_us": min(statistics.median(r.round_ns) for r in runs) * us,
        "exploits_per_round": statistics.fmean(r.exploits for r in runs) / rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--rounds", type=int, default=20, help="perturbation intervals")
    parser.add_argument("--repeats", type=int, default=3, help="runs (seeds); the best counts")
    args = parser.parse_args()
    print(f"PBT decision cost, {args.rounds} perturbation intervals of {INTERVAL} iterations")
    print("async (synch=False): one decision per trial at each interval")
    print(
        f"{'trials':>6} {'perturb med us':>15} {'mean us':>9} {'ns/trial':>9} "
        f"{'between us':>11} {'start us':>9} {'exploits/round':>15}"
    )
    for n in args.sizes:
        m = run(n, args.rounds, synch=False, repeats=args.repeats)
        print(
            f"{n:>6} {m['perturb_median_us']:>15.1f} {m['perturb_mean_us']:>9.1f} "
            f"{m['perturb_median_us'] * 1e3 / n:>9.0f} {m['between_us']:>11.2f} "
            f"{m['choose_us']:>9.1f} {m['exploits_per_round']:>15.1f}"
        )
    print("synch=True: the whole population is perturbed together at each interval")
    print(f"{'trials':>6} {'round us':>10} {'ns/trial':>9} {'start us':>9} {'exploits/round':>15}")
    for n in args.sizes:
        m = run(n, args.rounds, synch=True, repeats=args.repeats)
        print(
            f"{n:>6} {m['round_us']:>10.0f} {m['round_us'] * 1e3 / n:>9.0f} "
            f"{m['choose_us']:>9.1f} {m['exploits_per_round']:>15.1f}"
        )


if __name__ == "__main__":
    main()
