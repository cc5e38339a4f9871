"""Kill the driver of a chaos experiment at random moments until it finishes, then check
what a user must be able to rely on.

Run by the test suite with a few kills (tests/chaos/test_chaos.py) and by hand for a
longer campaign::

    python -m tests.chaos.campaign --kind random --kills 40 --seed 1
    python -m tests.chaos.campaign --kind asha --kills 40
    python -m tests.chaos.campaign --kind pbt --kills 20

Each round starts the driver in a new session (it restores when there is something to
restore), waits a random moment, and SIGKILLs its whole process group (driver, fork
server, workers). After the last round the experiment runs to the end undisturbed, and
the checks compare it with an uninterrupted reference run of the same experiment.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from tests.chaos.experiments import ITERATIONS, NAME, counting, trials_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Outcome:
    """What one experiment ended with, read from its files and side logs."""

    kills: int
    # Per trial: config x (PBT: the trial's index, as its config changes) -> ...
    finals: dict[str, int]  # last training_iteration
    scores: dict[str, float]  # last score
    configs: dict[str, str] = field(default_factory=dict)  # final config x
    problems: list[str] = field(default_factory=list)
    reruns: int = 0  # iterations started more than once, over all trials
    # Trials whose on_trial_complete callback ran other than once. Known gap (issue 12,
    # journal-first state): a kill between a trial's TERMINATED record and the callback
    # loses the notification; reported, not yet an invariant.
    notifications_off: list[str] = field(default_factory=list)


def _run_driver(
    kind: str,
    storage: str,
    side_dir: str,
    kill_after: float | None,
    child_kill_at: float | None = None,
) -> bool:
    """One driver process; True if it finished (not killed).

    With ``child_kill_at``, one of its children (a worker or the fork server) is
    SIGKILLed that many seconds in, and the driver lives on.
    """
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.chaos.experiments", kind, storage, side_dir],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    # The kill clock starts when a trial starts an iteration in this round: kills then
    # land in the run, not in the imports, however loaded the machine is.
    before = _iterations_started(side_dir)
    deadline = time.time() + 120
    while _iterations_started(side_dir) == before and proc.poll() is None:
        if time.time() > deadline:
            break
        time.sleep(0.01)
    try:
        if child_kill_at is not None:
            try:
                out, err = proc.communicate(timeout=child_kill_at)
            except subprocess.TimeoutExpired:
                _kill_a_child(proc.pid, random.Random(int(child_kill_at * 1000)))
                remaining = None if kill_after is None else max(kill_after - child_kill_at, 0.1)
                out, err = proc.communicate(timeout=remaining)
        else:
            out, err = proc.communicate(timeout=kill_after)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return False
    if proc.returncode != 0 or "finished" not in out:
        raise AssertionError(f"the {kind} driver failed (exit {proc.returncode}):\n{err[-3000:]}")
    return True


def _iterations_started(side_dir: str) -> int:
    """Bytes in the side logs of iterations started (grows with every iteration)."""
    total = 0
    for name in os.listdir(side_dir):
        if name.endswith(".log"):
            with contextlib.suppress(FileNotFoundError):
                total += os.path.getsize(os.path.join(side_dir, name))
    return total


def _kill_a_child(pid: int, rng: random.Random) -> None:
    """SIGKILL one process below the driver: a worker, or the fork server."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return
    if children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(rng.choice(children).pid, signal.SIGKILL)


def run_campaign(
    kind: str, kills: int, seed: int, workdir: str, child_kills: bool = False
) -> Outcome:
    """Kill the driver ``kills`` times at random moments, then let it finish; with
    ``child_kills``, every other round also kills a worker or the fork server first."""
    rng = random.Random(seed)
    storage = os.path.join(workdir, "store")
    side_dir = os.path.join(workdir, "side")
    os.makedirs(side_dir)
    done = 0
    for round_number in range(kills):
        kill_after = rng.uniform(0.05, 1.0)  # after its first iteration (see _run_driver)
        child_at = rng.uniform(0.02, kill_after) if child_kills and round_number % 2 else None
        if _run_driver(kind, storage, side_dir, kill_after=kill_after, child_kill_at=child_at):
            break
        done += 1
    else:
        _run_driver(kind, storage, side_dir, kill_after=None)
    return check(kind, os.path.join(storage, NAME), side_dir, done)


def check(kind: str, experiment: str, side_dir: str, kills: int) -> Outcome:
    """The invariants every finished experiment must meet, whatever was killed."""
    import fasttune as tune

    # The experiment's own trainable (a restore checks it is the same); only results are read.
    grid = tune.Tuner.restore(experiment, trainable=counting).get_results()
    outcome = Outcome(kills=kills, finals={}, scores={})
    problems = outcome.problems
    if len(grid) != trials_of(kind):
        problems.append(f"{len(grid)} trials, expected {trials_of(kind)}")
    # PBT changes configs (a trial exploiting another takes its config, mutated), so
    # there a trial is known by its id, and "each config once" does not apply.
    by_id = kind == "pbt"
    ids = [r.metrics["trial_id"] for r in grid]
    xs = [f"{r.config['x']:.6f}" for r in grid]
    if len(set(ids)) != len(ids):
        problems.append(f"a trial id twice: {sorted(ids)}")
    if not by_id and len(set(xs)) != len(xs):
        problems.append(f"a config ran twice: {sorted(xs)}")
    completions = []
    for line in open(os.path.join(side_dir, "completions.jsonl")):
        entry = json.loads(line)
        completions.append(entry["trial_id"] if by_id else f"{entry['x']:.6f}")
    names = ids if by_id else xs
    outcome.notifications_off = sorted(n for n in names if completions.count(n) != 1)
    for result, name in zip(grid, names, strict=True):
        # The key compared with the reference run: the trial's index under PBT (its
        # id's suffix; the prefix differs per run), else its config.
        key = name.rsplit("_", 1)[-1] if by_id else name
        label = f"trial {name}" if by_id else f"x={name}"
        if result.error is not None:
            problems.append(f"{label} errored: {result.error}")
        lines = [json.loads(line) for line in open(os.path.join(result.path, "result.json"))]
        iterations = [line["training_iteration"] for line in lines]
        if iterations != list(range(1, len(iterations) + 1)):
            problems.append(f"{label}: result.json iterations {iterations}")
        if any(line["counter"] != line["training_iteration"] for line in lines):
            problems.append(f"{label}: its own counter differs from training_iteration")
        started = [int(n) for n in open(os.path.join(side_dir, f"{name}.log")).read().split()]
        outcome.reruns += len(started) - len(set(started))
        if sorted(set(started)) != list(range(1, max(started) + 1)):
            problems.append(f"{label}: started iterations {started} have a gap")
        outcome.finals[key] = iterations[-1] if iterations else 0
        outcome.scores[key] = lines[-1]["score"] if lines else float("nan")
        outcome.configs[key] = f"{result.config['x']:.6f}"
        if kind != "asha" and outcome.finals[key] != ITERATIONS:
            problems.append(f"{label}: ended at iteration {outcome.finals[key]}")
    return outcome


def reference(kind: str, workdir: str) -> Outcome:
    """The same experiment, uninterrupted."""
    return run_campaign(kind, kills=0, seed=0, workdir=workdir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="random", choices=["random", "asha", "optuna", "pbt"])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--child-kills", action="store_true", help="also kill workers and the fork server"
    )
    parser.add_argument(
        "--workdir", help="keep the killed experiment here (a new folder) to inspect it"
    )
    args = parser.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory() as ref_dir, tempfile.TemporaryDirectory() as work:
        expected = reference(args.kind, ref_dir)
        if args.workdir:
            os.makedirs(args.workdir)
            work = args.workdir
        outcome = run_campaign(args.kind, args.kills, args.seed, work, args.child_kills)
    same = (
        outcome.finals == expected.finals
        and outcome.scores == expected.scores
        and outcome.configs == expected.configs
    )
    print(
        json.dumps(
            {
                "kind": args.kind,
                "kills": outcome.kills,
                "problems": outcome.problems,
                "reruns": outcome.reruns,
                "completion_callbacks_not_once": outcome.notifications_off,
                "same_as_uninterrupted": same,
                "seconds": round(time.time() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
