"""PBT at population scale: 256 trials, every decision checked against a model.

The scheduler is driven directly with hand-made results through the real
``ControllerView`` on a simulated clock (``training_iteration``): no workers, no
sleeping, nothing timed. The test keeps its own model of what PBT documents (a
result is a perturbation once ``perturbation_interval`` has passed since the last
one; trials are ranked by their score at their last perturbation, ties in list
order; ``ceil(n * quantile_fraction)`` trials per quantile) and checks every
decision against it: bottom-quantile trials exploit a top-quantile donor, nobody
else exploits, top-quantile trials are checkpointed.
"""

from __future__ import annotations

import math
import os
import random
from typing import Any

import pytest

from fasttune import result as R
from fasttune._internal.checkpoint_manager import CheckpointManager
from fasttune._internal.controller_view import ControllerView
from fasttune._internal.plugin_requests import Exploit, Save
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers.pbt import PopulationBasedTraining

LRS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
INTERVAL = 4
N = 256


def make_pbt(**kwargs: Any) -> PopulationBasedTraining:
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        metric="score",
        mode="max",
        perturbation_interval=INTERVAL,
        hyperparam_mutations={"lr": LRS},
        quantile_fraction=0.25,
        log_config=False,
        **kwargs,
    )
    pbt._rng = random.Random(0)
    return pbt


def make_population(pbt: PopulationBasedTraining, n: int = N) -> tuple[list[Trial], Any]:
    """``n`` running trials, each with a checkpoint at iteration 0, in a real view."""
    trials = []
    for i in range(n):
        trial = Trial("train", config={"lr": LRS[i % len(LRS)]}, trial_id=f"t{i:03d}")
        trial.experiment_tag = str(i)
        trial.checkpoint_manager = CheckpointManager(f"/ckpt/{trial.trial_id}")
        save(trial, 0)
        trial.set_status(TrialStatus.RUNNING)
        trials.append(trial)
    view = ControllerView(trials, has_resources=lambda trial: True)
    for trial in trials:
        pbt.on_trial_add(view, trial)
    return trials, view


def save(trial: Trial, iteration: int) -> None:
    trial.checkpoint_manager.register(
        f"checkpoint_{iteration:06d}", {R.TRAINING_ITERATION: iteration}
    )


def checkpoint_owner_and_iteration(path: str) -> tuple[str, int]:
    """``/ckpt/<trial id>/checkpoint_<iteration>`` -> (trial id, iteration)."""
    owner, name = path.split("/")[-2:]
    return owner, int(name.rsplit("_", 1)[1])


class Model:
    """What PBT should decide, kept independently of it (a plain sort, no heaps)."""

    def __init__(self, trials: list[Trial], fraction: float = 0.25):
        self.trials = trials
        self.fraction = fraction
        self.score: dict[str, float] = {}  # score at the last perturbation
        self.last_perturbation = {t.trial_id: 0 for t in trials}
        # The iteration of the last perturbation if the trial was in the upper quantile
        # then (others clone the checkpoint it made there), else None.
        self.clone_iteration: dict[str, int | None] = {}

    def is_perturbation(self, trial: Trial, iteration: int) -> bool:
        return iteration - self.last_perturbation[trial.trial_id] >= INTERVAL

    def quantiles(self) -> tuple[set[str], set[str]]:
        ranked = [
            (-math.inf if math.isnan(s) else s, i, t.trial_id)
            for i, t in enumerate(self.trials)
            if (s := self.score.get(t.trial_id)) is not None and not t.is_finished()
        ]
        ranked.sort()
        size = min(math.ceil(len(ranked) * self.fraction), len(ranked) // 2)
        if len(ranked) < 2 or size == 0:
            return set(), set()
        return {tid for *_, tid in ranked[:size]}, {tid for *_, tid in ranked[-size:]}


def test_256_trials_bottom_quantile_exploits_top_quantile():
    pbt = make_pbt()
    trials, view = make_population(pbt)
    model = Model(trials)
    iteration = {t.trial_id: 0 for t in trials}
    rng = random.Random(1)
    decisions = exploits = 0
    for _tick in range(6 * INTERVAL):
        order = list(trials)
        rng.shuffle(order)
        for trial in order:
            tid = trial.trial_id
            it = iteration[tid] = iteration[tid] + 1
            score = round(rng.random(), 2)  # ties on purpose: they keep list order
            perturbation = model.is_perturbation(trial, it)
            if perturbation:
                model.score[tid] = score
                model.last_perturbation[tid] = it
                lower, upper = model.quantiles()
                model.clone_iteration[tid] = it if tid in upper else None
            result = {R.TRAINING_ITERATION: it, "score": score}
            trial.last_result = result
            assert pbt.on_trial_result(view, trial, result) == "CONTINUE"  # nobody waits
            requests = view.take_requests()
            if not perturbation:
                assert requests == []
                continue
            decisions += 1
            saves = [r.trial for r in requests if isinstance(r, Save)]
            assert saves == ([trial] if tid in upper else [])
            for t in saves:
                save(t, it)
            exploit = [r for r in requests if isinstance(r, Exploit)]
            if tid not in lower:
                assert exploit == []
                continue
            if not exploit:  # the donor drawn has no checkpoint from such a perturbation
                assert any(model.clone_iteration.get(u) is None for u in upper)
                continue
            [request] = exploit
            donor_id, donor_iteration = checkpoint_owner_and_iteration(request.checkpoint.path)
            assert request.trial is trial and donor_id in upper
            # the checkpoint it made at its last perturbation, in the upper quantile
            assert donor_iteration == model.clone_iteration[donor_id]
            assert request.config["lr"] in LRS  # explored from the donor's
            assert request.experiment_tag.startswith(f"{trial.experiment_tag}@perturbed[lr=")
            # Apply it as the controller does: the trial restarts from the donor's save.
            trial.set_config(request.config)
            iteration[tid] = donor_iteration
            model.last_perturbation[tid] = model.last_perturbation[donor_id]
            exploits += 1
    assert pbt._num_perturbations == exploits
    # Every trial was perturbed at least 5 times; a quarter of the decisions were in the
    # lower quantile, and exploited unless the donor drawn was not in the upper one at
    # its own last perturbation.
    assert decisions >= 5 * N
    assert 0.1 < exploits / decisions < 0.25


def test_256_trials_synch_round_exploits_bottom_from_top():
    pbt = make_pbt(synch=True)
    trials, view = make_population(pbt)
    by_id = {t.trial_id: t for t in trials}
    model = Model(trials)
    rng = random.Random(2)
    for it in range(1, INTERVAL):  # nothing happens before the interval
        for trial in trials:
            result = {R.TRAINING_ITERATION: it, "score": 0}
            assert pbt.on_trial_result(view, trial, result) == "CONTINUE"
    assert view.take_requests() == []
    order = list(trials)
    rng.shuffle(order)
    for trial in order[:-1]:  # all but the last wait at the sync point
        score = rng.random()
        model.score[trial.trial_id] = score
        result = {R.TRAINING_ITERATION: INTERVAL, "score": score}
        assert pbt.on_trial_result(view, trial, result) == "PAUSE"
        save(trial, INTERVAL)  # pausing saves
        trial.set_status(TrialStatus.PAUSED)
    assert view.take_requests() == []
    assert pbt.choose_trial_to_run(view) is None  # none may run past the sync point
    last = order[-1]
    model.score[last.trial_id] = 0.5
    lower, upper = model.quantiles()
    assert len(lower) == len(upper) == N // 4
    pbt.on_trial_result(view, last, {R.TRAINING_ITERATION: INTERVAL, "score": 0.5})
    exploited = {}
    for request in view.take_requests():
        assert isinstance(request, Exploit)
        exploited[request.trial.trial_id] = checkpoint_owner_and_iteration(request.checkpoint.path)
    deferred = dict(pbt._deferred)  # donors still running (the last one): after its save
    assert set(exploited) | set(deferred) == lower and not set(exploited) & set(deferred)
    assert all(donor in upper and at == INTERVAL for donor, at in exploited.values())
    assert set(deferred.values()) <= {last.trial_id} & upper
    if deferred:  # the donor's pause completes: its targets exploit it now
        save(last, INTERVAL)
        last.set_status(TrialStatus.PAUSED)
    for _ in range(N):
        chosen = pbt.choose_trial_to_run(view)
        for request in view.take_requests():
            assert isinstance(request, Exploit)
            assert request.checkpoint.path == last.checkpoint.path
            exploited[request.trial.trial_id] = (last.trial_id, INTERVAL)
        if chosen is None:
            break
        assert chosen.trial_id not in pbt._deferred
        chosen.set_status(TrialStatus.RUNNING)
    assert set(exploited) == lower and pbt._deferred == {}
    assert all(t.status is TrialStatus.RUNNING for t in by_id.values())
    assert pbt._next_perturbation_sync == 2 * INTERVAL


def test_a_diverged_trial_ranks_last_and_exploits():
    pbt = make_pbt()
    trials, view = make_population(pbt, 8)
    for trial, score in zip(trials, [5, 3, 7, 1, 6, 2, 8, 4]):
        pbt.on_trial_result(view, trial, {R.TRAINING_ITERATION: INTERVAL, "score": score})
    view.take_requests()
    nan = {R.TRAINING_ITERATION: 2 * INTERVAL, "score": float("nan")}
    pbt.on_trial_result(view, trials[6], nan)  # the best so far diverges
    [request] = [r for r in view.take_requests() if isinstance(r, Exploit)]
    assert request.trial is trials[6]
    assert checkpoint_owner_and_iteration(request.checkpoint.path)[0] in {"t002", "t004"}


def test_a_deferred_donor_that_ends_is_still_cloned():
    pbt = make_pbt(synch=True)
    trials, view = make_population(pbt, 2)
    pbt.on_trial_result(view, trials[0], {R.TRAINING_ITERATION: INTERVAL, "score": 0})
    trials[0].set_status(TrialStatus.PAUSED)
    pbt.on_trial_result(view, trials[1], {R.TRAINING_ITERATION: INTERVAL, "score": 9})
    assert pbt._deferred == {"t000": "t001"}  # the donor is still running
    save(trials[1], INTERVAL)
    trials[1].set_status(TrialStatus.TERMINATED)  # it ends instead of pausing
    pbt.on_trial_complete(view, trials[1], trials[1].last_result)
    [request] = view.take_requests()
    assert isinstance(request, Exploit) and request.trial is trials[0]
    assert request.checkpoint.path == os.path.join("/ckpt/t001", f"checkpoint_{INTERVAL:06d}")
    assert pbt._deferred == {}


@pytest.mark.parametrize("donor_status", [TrialStatus.PAUSED, TrialStatus.TERMINATED])
def test_a_restored_deferred_exploit_is_resolved(donor_status):
    pbt = make_pbt(synch=True)
    trials, view = make_population(pbt, 2)
    pbt.on_trial_result(view, trials[0], {R.TRAINING_ITERATION: INTERVAL, "score": 0})
    trials[0].set_status(TrialStatus.PAUSED)
    pbt.on_trial_result(view, trials[1], {R.TRAINING_ITERATION: INTERVAL, "score": 9})
    restored = make_pbt(synch=True)
    restored.set_state(pbt.get_state())
    if donor_status is TrialStatus.PAUSED:
        assert restored.choose_trial_to_run(view) is None  # the donor still runs
        assert view.take_requests() == [] and restored._deferred == {"t000": "t001"}
    trials[1].set_status(donor_status)  # paused, or ended while the run was down
    restored.choose_trial_to_run(view)
    assert [(type(r), r.trial) for r in view.take_requests()] == [(Exploit, trials[0])]
    assert restored._deferred == {}
