"""PopulationBasedTraining and its replay: decisions on hand-made results, then real runs."""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import signal
import tempfile
import time

import pytest

import fasttune as tune
from fasttune.error import TuneError
from fasttune.experiment.trial import TrialStatus
from fasttune.schedulers._pbt_explore import explore, make_experiment_tag
from fasttune.schedulers._pbt_log import load_policy, log_exploit, policy_file_name
from fasttune.schedulers.pbt import PopulationBasedTraining, PopulationBasedTrainingReplay
from fasttune.search.basic_variant import BasicVariantGenerator
from fasttune.search.search_generator import SearchGenerator
from fasttune.search.searcher import Searcher
from tests.schedulers._population_helpers import (
    RecordingView,
    add_checkpoint,
    make_trial,
    result,
)
from tests.schedulers._population_trainables import Climber

LRS = [0.1, 0.2, 0.4, 0.8]


def make_pbt(**kwargs):
    kwargs.setdefault("time_attr", "training_iteration")
    kwargs.setdefault("metric", "score")
    kwargs.setdefault("mode", "max")
    kwargs.setdefault("perturbation_interval", 2)
    kwargs.setdefault("hyperparam_mutations", {"lr": LRS})
    pbt = PopulationBasedTraining(**kwargs)
    pbt._rng = random.Random(0)
    return pbt


def population(pbt, n=4, view_kwargs=None, **trial_kwargs):
    trials = [
        make_trial(f"t{i}", {"lr": LRS[i % len(LRS)]}, checkpoint_dir=f"ck{i}", **trial_kwargs)
        for i in range(n)
    ]
    view = RecordingView(trials, **(view_kwargs or {}))
    for trial in trials:
        pbt.on_trial_add(view, trial)
    return trials, view


def report_all(pbt, view, trials, iteration, scores):
    return [pbt.on_trial_result(view, t, result(iteration, s)) for t, s in zip(trials, scores)]


# ---------------------------------------------------------------------- arguments
@pytest.mark.parametrize("fraction", [-0.1, 0.6])
def test_quantile_fraction_must_be_within_0_and_half(fraction):
    with pytest.raises(ValueError, match=rf"quantile_fraction .*{fraction}"):
        make_pbt(quantile_fraction=fraction)


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="perturbation_interval .* 0"):
        make_pbt(perturbation_interval=0)
    with pytest.raises(TuneError, match="hyperparam_mutations.*custom_explore_fn"):
        make_pbt(hyperparam_mutations={})
    with pytest.raises(TypeError, match=r"hyperparam_mutations\['lr'\] .* 0.1 \(float\)"):
        make_pbt(hyperparam_mutations={"lr": 0.1})
    with pytest.raises(TypeError, match=r"hyperparam_mutations\['opt/beta'\]"):
        make_pbt(hyperparam_mutations={"opt": {"beta": "high"}})
    with pytest.raises(ValueError, match="sample_from"):
        make_pbt(hyperparam_mutations={"lr": tune.sample_from(lambda _: 1)})
    with pytest.raises(ValueError, match="mode"):
        make_pbt(mode="maximize")
    with pytest.raises(ValueError, match="perturbation_factors"):
        make_pbt(perturbation_factors=())
    # A custom explore function alone is enough.
    assert make_pbt(hyperparam_mutations=None, custom_explore_fn=lambda c: c)


def test_metric_and_mode_come_from_tune_config_or_fail_on_first_trial():
    pbt = make_pbt(metric=None, mode=None)
    trial = make_trial("a", {"lr": 0.1})
    with pytest.raises(ValueError, match="needs a `metric` and a `mode`"):
        pbt.on_trial_add(RecordingView([trial]), trial)
    assert pbt.set_search_properties(None, "min") and pbt.metric == "_metric"
    assert not make_pbt().set_search_properties("other", None)  # conflict: caller reports


def test_a_searcher_cannot_be_used_with_pbt():
    class Fixed(Searcher):
        def suggest(self, trial_id):
            return {"lr": 0.1}

    trial = make_trial("a", {"lr": 0.1})
    pbt = make_pbt()
    with pytest.raises(ValueError, match="Search algorithms cannot be used with Population"):
        pbt.on_trial_add(RecordingView([trial], search_alg=SearchGenerator(Fixed())), trial)
    pbt.on_trial_add(RecordingView([trial], search_alg=BasicVariantGenerator()), trial)


def test_missing_hyperparameters_are_sampled_from_the_mutations():
    pbt = make_pbt(
        hyperparam_mutations={"lr": LRS, "mom": tune.uniform(0.5, 0.6), "opt": {"eps": [1, 2]}}
    )
    trial = make_trial("a", {"lr": 0.4, "other": 1})
    pbt.on_trial_add(RecordingView([trial]), trial)
    assert trial.config["lr"] == 0.4 and trial.config["other"] == 1  # kept
    assert 0.5 <= trial.config["mom"] < 0.6 and trial.config["opt"]["eps"] in (1, 2)
    assert trial.evaluated_params["mom"] == trial.config["mom"]


def test_required_attributes():
    pbt = make_pbt()
    trials, view = population(pbt, 1)
    with pytest.raises(RuntimeError, match="Cannot find metric 'score'.*require_attrs=False"):
        pbt.on_trial_result(view, trials[0], {"training_iteration": 2})
    lenient = make_pbt(require_attrs=False)
    trials, view = population(lenient, 1)
    assert lenient.on_trial_result(view, trials[0], {"training_iteration": 2}) == "CONTINUE"
    assert lenient._state(trials[0]).last_score is None


# ---------------------------------------------------------------------- decisions
def test_nothing_happens_before_the_interval_and_the_burn_in():
    pbt = make_pbt(burn_in_period=4)
    trials, view = population(pbt)
    for iteration in (1, 2, 3):
        assert set(report_all(pbt, view, trials, iteration, [0, 1, 2, 3])) == {"CONTINUE"}
    assert view.requests == [] and all(s.last_score is None for s in pbt._trial_state.values())
    report_all(pbt, view, trials, 4, [0, 1, 2, 3])
    assert [pbt._trial_state[t.trial_id].last_score for t in trials] == [0, 1, 2, 3]


def test_quantiles():
    pbt = make_pbt(quantile_fraction=0.25)
    trials, view = population(pbt, 5)
    for trial, score in zip(trials, [3, 1, 4, 0, 2]):
        pbt._save_trial_state(pbt._state(trial), 2, result(2, score), trial)
    lower, upper = pbt._quantiles(view)
    assert [t.trial_id for t in lower] == ["t3", "t1"]  # ceil(5 * 0.25) = 2
    assert [t.trial_id for t in upper] == ["t0", "t2"]
    pbt._quantile_fraction = 0.5  # ceil(2.5) = 3 > 5 / 2: floor to 2
    assert len(pbt._quantiles(view)[0]) == 2
    pbt._quantile_fraction = 0.0
    assert pbt._quantiles(view) == ([], [])
    trials[2].set_status(TrialStatus.TERMINATED)  # finished trials are not ranked
    pbt._quantile_fraction = 0.25
    assert "t2" not in [t.trial_id for t in pbt._quantiles(view)[1]]


def test_min_mode_ranks_low_scores_on_top():
    pbt = make_pbt(mode="min")
    trials, view = population(pbt, 4)
    for trial, score in zip(trials, [3, 1, 4, 0]):
        pbt._save_trial_state(pbt._state(trial), 2, result(2, score), trial)
    lower, upper = pbt._quantiles(view)
    assert [t.trial_id for t in lower] == ["t2"] and [t.trial_id for t in upper] == ["t3"]


def test_the_worst_trial_exploits_the_best_with_an_explored_config():
    pbt = make_pbt(log_config=False)
    trials, view = population(pbt, 4, view_kwargs={"with_save": True})
    add_checkpoint(trials[3], "ck3_at_2", 2)
    report_all(pbt, view, trials[1:], 2, [1, 2, 3])
    add_checkpoint(trials[3], "ck3_latest", 6)  # made after its perturbation
    view.requests.clear()
    assert pbt.on_trial_result(view, trials[0], result(2, -5.0)) == "CONTINUE"
    [(target, options)] = view.of("exploit")
    assert target is trials[0]
    # the checkpoint of the donor's perturbation, as Ray Tune clones: not its latest
    assert options["checkpoint"].path == "/ckpt/t3/ck3_at_2"
    assert options["config"]["lr"] in (0.4, 0.8)  # a neighbour of the donor's 0.8
    assert options["tag"] == make_experiment_tag("t0", options["config"], {"lr": None})
    assert options["tag"].startswith("t0@perturbed[lr=")
    # The exploiting trial takes over the donor's perturbation clock.
    assert pbt._state(trials[0]).last_perturbation_time == 2
    assert pbt._num_perturbations == 1


def test_no_exploit_from_a_donor_without_checkpoint():
    pbt = make_pbt()
    trials, view = population(pbt, 2)
    trials[1].checkpoint_manager = None  # no checkpoint yet
    pbt.on_trial_result(view, trials[1], result(2, 10))
    view.requests.clear()
    assert pbt.on_trial_result(view, trials[0], result(2, 0)) == "CONTINUE"
    assert view.of("exploit") == []


def test_a_top_trial_checkpoints_by_save_request_or_pause():
    # Without a save request on the view, a top trial pauses (pausing saves a checkpoint).
    pbt = make_pbt()
    trials, view = population(pbt, 2)
    pbt.on_trial_result(view, trials[0], result(2, 0))
    assert pbt.on_trial_result(view, trials[1], result(2, 5)) == "PAUSE"
    # With save_trial on the view it keeps running and a save is requested.
    pbt = make_pbt()
    trials, view = population(pbt, 2, view_kwargs={"with_save": True})
    pbt.on_trial_result(view, trials[0], result(2, 0))
    assert pbt.on_trial_result(view, trials[1], result(2, 5)) == "CONTINUE"
    assert [t for t, _ in view.of("save")] == [trials[1]]
    # A periodic checkpoint at this iteration needs neither.
    pbt = make_pbt()
    trials, view = population(pbt, 2)
    trials[1].checkpoint_frequency = 2
    pbt.on_trial_result(view, trials[0], result(2, 0))
    assert pbt.on_trial_result(view, trials[1], result(2, 5)) == "CONTINUE"


def test_waiting_trials_get_a_turn_at_the_interval():
    pbt = make_pbt()
    trials, view = population(pbt, 3, view_kwargs={"with_save": True})
    trials[2].set_status(TrialStatus.PENDING)
    assert pbt.on_trial_result(view, trials[0], result(1, 0)) == "CONTINUE"
    assert pbt.on_trial_result(view, trials[0], result(2, 0)) == "PAUSE"
    # The waiting trial that trained least runs next.
    trials[0].set_status(TrialStatus.PAUSED)
    assert pbt.choose_trial_to_run(view) is trials[2]


# ---------------------------------------------------------------------- explore
def test_list_values_shift_to_a_neighbour_and_stay_in_the_list():
    counts = {}
    rng = random.Random(1)
    for _ in range(200):
        new, ops = explore({"lr": 0.1}, {"lr": LRS}, 0.0, (1.2, 0.8), None, rng)
        counts[new["lr"]] = counts.get(new["lr"], 0) + 1
        assert ops["lr"] in ("shift left (noop)", "shift right")
    assert set(counts) == {0.1, 0.2}  # clipped at the start of the list
    new, ops = explore({"lr": 0.3}, {"lr": LRS}, 0.0, (1.2, 0.8), None, rng)
    assert new["lr"] in LRS and ops["lr"] == "resample"  # not in the list: resampled
    for _ in range(100):
        lr = explore({"lr": 0.4}, {"lr": LRS}, 0.5, (1.2, 0.8), None, rng)[0]["lr"]
        assert lr in LRS


def test_continuous_values_are_perturbed_or_resampled():
    rng = random.Random(2)
    space = {"lr": tune.uniform(0.0, 1.0), "bs": lambda: 7}
    seen = set()
    for _ in range(100):
        new, ops = explore({"lr": 0.5, "bs": 32}, space, 0.0, (1.2, 0.8), None, rng)
        seen.add(new["lr"])
        assert isinstance(new["bs"], int) and new["bs"] in (38, 25)  # int(32*1.2), int(32*0.8)
    assert seen == {0.6, 0.4}
    # As in Ray Tune, a perturbed value is not clipped to the domain's bounds.
    assert explore({"lr": 0.9}, {"lr": tune.uniform(0, 1)}, 0.0, (1.5,), None, rng)[0][
        "lr"
    ] == pytest.approx(1.35)
    for _ in range(50):
        new, ops = explore({"lr": 0.5, "bs": 32}, space, 1.0, (1.2, 0.8), None, rng)
        assert (
            0.0 <= new["lr"] < 1.0
            and new["bs"] == 7
            and ops
            == {
                "lr": "resample",
                "bs": "resample",
            }
        )


def test_nested_mutations_and_custom_explore_fn_runs_last():
    seen = []

    def custom(config):
        seen.append(dict(config["opt"]))
        config["opt"]["beta"] = min(config["opt"]["beta"], 0.9)
        return config

    config = {"opt": {"beta": 0.99, "eps": 1}, "keep": "x"}
    new, ops = explore(
        config, {"opt": {"beta": [0.9, 0.99]}}, 0.0, (1.2,), custom, random.Random(3)
    )
    assert new["opt"]["beta"] == 0.9 and new["opt"]["eps"] == 1 and new["keep"] == "x"
    assert seen and seen[0]["beta"] in (0.9, 0.99) and "beta" in ops["opt"]
    assert config["opt"]["beta"] == 0.99  # the donor's config is not touched
    with pytest.raises(ValueError, match="custom_explore_fn returned None"):
        explore(config, {}, 0.0, (1.2,), lambda c: None, random.Random(0))


def test_seeded_explore_is_reproducible():
    space = {"lr": tune.uniform(0, 1), "bs": [16, 32, 64]}
    runs = [
        [explore({"lr": 0.5, "bs": 32}, space, 0.25, (1.2, 0.8), None, rng)[0] for _ in range(20)]
        for rng in (random.Random(7), random.Random(7))
    ]
    assert runs[0] == runs[1]


# ---------------------------------------------------------------------- synch
def test_synch_waits_for_all_then_perturbs_together():
    pbt = make_pbt(synch=True, log_config=False)
    trials, view = population(pbt, 4)
    assert report_all(pbt, view, trials[:3], 2, [3, 1, 2]) == ["PAUSE"] * 3
    assert view.requests == []  # nobody perturbed before all arrive
    for t in trials[:3]:
        t.set_status(TrialStatus.PAUSED)
    # Trials at the interval may not run again before the sync point.
    assert pbt.choose_trial_to_run(view) is None
    assert pbt.on_trial_result(view, trials[3], result(2, 0)) == "CONTINUE"  # exploited
    [(target, options)] = view.of("exploit")
    assert target is trials[3] and options["checkpoint"].path == "/ckpt/t0/ck0"
    assert pbt._next_perturbation_sync == 4
    assert all(pbt._state(t).last_perturbation_time == 2 for t in trials)
    assert pbt.choose_trial_to_run(view) in trials[:3]


def test_synch_exploit_waits_for_a_donor_still_saving():
    pbt = make_pbt(synch=True, log_config=False)
    trials, view = population(pbt, 2)
    assert pbt.on_trial_result(view, trials[0], result(2, 0)) == "PAUSE"
    trials[0].set_status(TrialStatus.PAUSED)
    # The best arrives last: it pauses (and saves) now; the worst must wait for that save.
    assert pbt.on_trial_result(view, trials[1], result(2, 9)) == "PAUSE"
    assert view.of("exploit") == [] and pbt._deferred == {"t0": "t1"}
    assert pbt.choose_trial_to_run(view) is None
    trials[1].set_status(TrialStatus.PAUSED)
    add_checkpoint(trials[1], "ck_at_2", 2)
    chosen = pbt.choose_trial_to_run(view)
    [(target, options)] = view.of("exploit")
    assert target is trials[0] and options["checkpoint"].path == "/ckpt/t1/ck_at_2"
    assert chosen in trials  # the exploit is applied before the chosen trial starts


def test_synch_does_not_hang_when_a_trial_ends_before_the_interval():
    pbt = make_pbt(synch=True, log_config=False)
    trials, view = population(pbt, 3)
    report_all(pbt, view, trials[:2], 2, [0, 5])
    for t in trials[:2]:
        t.set_status(TrialStatus.PAUSED)
    assert pbt.choose_trial_to_run(view) is None  # waiting for t2 to reach 2
    trials[2].set_status(TrialStatus.TERMINATED)
    pbt.on_trial_complete(view, trials[2], result(1, 1))
    assert [t for t, _ in view.of("exploit")] == [trials[0]]
    assert pbt.choose_trial_to_run(view) is not None


def test_synch_does_not_pause_a_trial_short_of_the_sync_point():
    # A restored state can hold a perturbation time older than the sync point (here 6,
    # the sync point 10): a trial at 9 used to be paused to wait for the others, went
    # back to its checkpoint at 8, ran 9 again and was paused again, forever (found by
    # the chaos campaign, tests/chaos, --kind pbt).
    pbt = make_pbt(synch=True, log_config=False)
    trials, view = population(pbt, 2)
    state = pbt.get_state()
    state["next_perturbation_sync"] = 10
    for trial_state in state["trial_state"].values():
        trial_state.update(last_perturbation_time=6, last_train_time=8)
    pbt.set_state(state)
    assert report_all(pbt, view, trials, 9, [1, 2]) == ["CONTINUE"] * 2
    # Both at 10: perturbed together (t0 will clone t1 once t1 has paused and saved).
    assert report_all(pbt, view, trials, 10, [1, 2]) == ["PAUSE", "PAUSE"]
    assert pbt._deferred == {"t0": "t1"} and pbt._next_perturbation_sync == 12


def test_a_restored_trial_behind_its_saved_state_is_waited_for():
    # The state saw t0 reach 2, but t0's checkpoint at 2 was lost in the crash: it
    # resumes from 0. The round at 2 must wait for it, not perturb it from 0 with
    # t1's checkpoint at 2 (a gap in its results) or before it has a score there.
    pbt = make_pbt(synch=True, log_config=False)
    trials, view = population(pbt, 2)
    pbt.on_trial_result(view, trials[0], result(2, 1))
    saved = pbt.get_state()
    restored = make_pbt(synch=True, log_config=False)
    restored.set_state(saved)
    for t in trials:
        t.set_status(TrialStatus.PENDING)
    add_checkpoint(trials[1], "ck1_at_2", 2)
    assert restored.choose_trial_to_run(view) is trials[0]  # behind: it goes first
    trials[0].set_status(TrialStatus.RUNNING)
    assert restored.on_trial_result(view, trials[1], result(2, 5)) == "PAUSE"  # waits for t0
    assert view.of("exploit") == [] and restored._deferred == {}


def test_restored_state_draws_what_the_run_would_have_drawn():
    pbt = make_pbt(synch=True, log_config=False)
    pbt._rng = random  # the default: the random module, seeded by the user
    random.seed(3)
    trials, view = population(pbt, 4)
    report_all(pbt, view, trials, 2, [4, 3, 2, 1])  # a perturbation: draws
    assert pbt._deferred  # its donor drawn (the exploit waits for the donor to save)
    saved = pbt.get_state()
    expected = [random.random() for _ in range(3)]
    random.seed(3)  # a restored driver seeds again at its start
    restored = make_pbt(synch=True, log_config=False)
    restored._rng = random
    restored.set_state(saved)
    assert [random.random() for _ in range(3)] == expected


# ---------------------------------------------------------------------- state, logs
def test_state_round_trip_keeps_the_schedule():
    pbt = make_pbt()
    trials, view = population(pbt, 2)
    pbt.on_trial_result(view, trials[0], result(2, 1))
    restored = make_pbt()
    restored.set_state(pbt.get_state())
    assert restored.get_state() == pbt.get_state()
    # t0 was perturbed at 2: nothing at 3, the next perturbation at 4.
    restored.on_trial_result(view, trials[0], result(3, 1))
    assert restored._state(trials[0]).last_train_time == 2
    restored.on_trial_result(view, trials[0], result(4, 1))
    assert restored._state(trials[0]).last_train_time == 4


def test_synch_state_round_trip_keeps_the_sync_point():
    pbt = make_pbt(synch=True)
    trials, view = population(pbt, 2)
    pbt.on_trial_result(view, trials[0], result(2, 1))
    trials[0].set_status(TrialStatus.PAUSED)
    add_checkpoint(trials[0], "ck_at_2", 2)  # its pause saved it
    restored = make_pbt(synch=True)
    restored.set_state(pbt.get_state())
    assert restored.choose_trial_to_run(view) is None  # t0 waits for t1 at 2
    assert make_pbt(synch=True).choose_trial_to_run(view) is trials[0]


def test_policy_log_files_and_the_replay_reading_them(tmp_path):
    path = str(tmp_path)
    log_exploit(path, "b", "a", ["tag_b", "tag_a", 3, 4, {"lr": 1}, {"lr": 2}])
    log_exploit(path, "c", "b", ["tag_c", "tag_b", 5, 6, {"lr": 2}, {"lr": 3}])
    log_exploit(path, "a", "c", ["tag_a", "tag_c", 7, 8, {"lr": 3}, {"lr": 4}])
    lines = open(tmp_path / "pbt_global.txt").read().splitlines()
    assert [json.loads(line)[:2] for line in lines] == [
        ["tag_b", "tag_a"],
        ["tag_c", "tag_b"],
        ["tag_a", "tag_c"],
    ]
    # Each target inherits its donor's history, then appends its own line.
    policy_a = open(tmp_path / policy_file_name("a")).read().splitlines()
    assert policy_a == lines
    assert load_policy(str(tmp_path / policy_file_name("a"))) == (
        {"lr": 1},
        [(4, {"lr": 2}), (6, {"lr": 3}), (8, {"lr": 4})],
    )
    # Lines of an overwritten lineage are ignored.
    broken = tmp_path / "broken.txt"
    broken.write_text(
        json.dumps(["x", "y", 1, 1, {"lr": 0}, {"lr": 9}]) + "\n" + "\n".join(lines[1:]) + "\n"
    )
    assert load_policy(str(broken)) == ({"lr": 2}, [(6, {"lr": 3}), (8, {"lr": 4})])
    broken.write_text("not json\n")
    with pytest.raises(ValueError, match="Could not read PBT policy file"):
        load_policy(str(broken))


def test_exploit_writes_the_policy_log(tmp_path):
    pbt = make_pbt()
    trials, view = population(pbt, 2, experiment_path=str(tmp_path))
    add_checkpoint(trials[1], "ck", 2)
    pbt.on_trial_result(view, trials[0], result(2, 0))
    pbt.on_trial_result(view, trials[1], result(2, 9))  # the upper quantile: cloneable
    pbt.on_trial_result(view, trials[0], result(4, 0))
    [(_, options)] = view.of("exploit")
    [row] = [json.loads(line) for line in open(tmp_path / "pbt_policy_t0.txt")]
    assert row == ["t0", "t1", 0, 2, {"lr": 0.2}, options["config"]]


def test_replay_applies_each_change_at_its_iteration(tmp_path):
    policy = tmp_path / "pbt_policy_x.txt"
    rows = [["b", "a", 1, 2, {"lr": 1}, {"lr": 2}], ["c", "b", 3, 4, {"lr": 2}, {"lr": 3}]]
    policy.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    replay = PopulationBasedTrainingReplay(str(policy))
    assert replay._supports_buffered_results is False
    trial = make_trial("r", {})
    view = RecordingView([trial])
    replay.on_trial_add(view, trial)
    assert trial.config == {"lr": 1}
    with pytest.raises(ValueError, match="num_samples=1"):
        replay.on_trial_add(view, make_trial("other", {}))
    assert replay.on_trial_result(view, trial, result(1, 0)) == "CONTINUE"
    assert replay.on_trial_result(view, trial, result(2, 0)) == "PAUSE"
    trial.set_status(TrialStatus.PAUSED)
    add_checkpoint(trial, "checkpoint_000002", 2)
    assert replay.choose_trial_to_run(view) is trial
    [(_, options)] = view.of("exploit")
    assert options["config"] == {"lr": 2} and options["checkpoint"].path.endswith("_000002")
    assert options["tag"] == "replay_pbt_policy_x.txt@perturbed[lr=2]"
    assert replay.debug_string() == "PopulationBasedTraining replay: Step 2, perturb 1"
    state = replay.get_state()
    fresh = PopulationBasedTrainingReplay(str(policy))
    fresh.set_state(state)
    assert fresh.on_trial_result(view, trial, result(3, 0)) == "CONTINUE"
    assert fresh.on_trial_result(view, trial, result(4, 0)) == "PAUSE"
    with pytest.raises(ValueError, match="Policy file not found"):
        PopulationBasedTrainingReplay(str(tmp_path / "missing.txt"))


def test_exact_decisions():
    assert PopulationBasedTraining._supports_buffered_results is False


# ---------------------------------------------------------------------- end to end
@pytest.fixture
def run_config(tmp_path):
    def make(**kwargs):
        kwargs.setdefault("storage_path", str(tmp_path / "results"))
        kwargs.setdefault("name", "pbt")
        kwargs.setdefault("verbose", 0)
        return tune.RunConfig(**kwargs)

    return make


@pytest.fixture
def two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


def _lines(path):
    return [json.loads(line) for line in open(os.path.join(path, "result.json"))]


def run_pbt(run_config, seed=0, **kwargs):
    random.seed(seed)
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        hyperparam_mutations={"lr": LRS},
        quantile_fraction=0.25,
        resample_probability=0.0,
    )
    tuner = tune.Tuner(
        Climber,
        param_space={"lr": tune.grid_search(LRS)},
        tune_config=tune.TuneConfig(scheduler=pbt, metric="score", mode="max"),
        run_config=run_config(stop={"training_iteration": 8}, **kwargs),
    )
    return pbt, tuner.fit()


def test_pbt_run_exploits_and_continues_from_the_donors_state(run_config, two_cpus):
    pbt, grid = run_pbt(run_config)
    assert grid.num_terminated == 4 and pbt._num_perturbations >= 1
    exploited = 0
    all_lines = [_lines(res.path) for res in grid]
    for lines in all_lines:
        assert [line["training_iteration"] for line in lines][-1] == 8
        assert all(line["lr"] in LRS for line in lines)
        for before, after in itertools.pairwise(lines):
            if after["origin"] != before["origin"]:  # restarted from another trial's model
                exploited += 1
                assert "@perturbed[lr=" in after["experiment_tag"]
                # It continues from a state the model reported at the previous iteration.
                states = [
                    d["score"]
                    for line_list in all_lines
                    for d in line_list
                    if d["training_iteration"] == after["training_iteration"] - 1
                    and d["origin"] == after["origin"]
                ]
                assert any(after["score"] - after["lr"] == pytest.approx(x) for x in states)
    assert exploited >= 1
    global_log = open(os.path.join(grid.experiment_path, "pbt_global.txt")).read().splitlines()
    assert len(global_log) == pbt._num_perturbations


def test_replay_reproduces_the_config_schedule(run_config, two_cpus, tmp_path):
    _, grid = run_pbt(run_config, name="source")
    policies = sorted(f for f in os.listdir(grid.experiment_path) if f.startswith("pbt_policy_"))
    assert policies
    policy_file = os.path.join(grid.experiment_path, policies[-1])
    initial, changes = load_policy(policy_file)

    replayed = tune.Tuner(
        Climber,
        tune_config=tune.TuneConfig(scheduler=PopulationBasedTrainingReplay(policy_file)),
        run_config=run_config(name="replay", stop={"training_iteration": 8}),
    ).fit()
    lines = _lines(replayed[0].path)
    assert [line["training_iteration"] for line in lines] == list(range(1, 9))
    expected, lr = [], initial["lr"]
    for iteration in range(1, 9):
        expected.append(lr)
        for step, new in changes:
            if step == iteration:
                lr = new["lr"]
    assert [line["lr"] for line in lines] == expected
    # The replayed model climbs exactly as the schedule says.
    assert lines[-1]["score"] == pytest.approx(sum(expected))
    # After the last change it trains as the PBT trial did after its last exploit.
    trial_id = policies[-1][len("pbt_policy_") : -len(".txt")]
    source = next(r for r in grid if r.metrics["trial_id"] == trial_id)
    assert source.config["lr"] == changes[-1][1]["lr"] == expected[-1]
    step = changes[-1][0]
    tail = _lines(source.path)[-(8 - step) :]  # trained since its last exploit
    assert [x["training_iteration"] for x in tail] == list(range(step + 1, 9))
    assert [x["lr"] for x in tail] == expected[step:]


class InterruptOnce(tune.Callback):
    """Sends SIGINT to this process once, after ``after`` results (as Ctrl-C would)."""

    def __init__(self, marker, after):
        self.marker, self.after, self.seen = marker, after, 0

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen += 1
        if self.seen == self.after and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            signal.raise_signal(signal.SIGINT)


def test_pbt_state_survives_tuner_restore(run_config, two_cpus, tmp_path):
    marker = str(tmp_path / "interrupted")
    pbt, grid = run_pbt(run_config, name="resumed", callbacks=[InterruptOnce(marker, 20)])
    assert os.path.exists(marker) and grid.num_terminated < 4
    before = pbt.get_state()
    assert before["num_perturbations"] >= 1
    path = grid.experiment_path
    tuner = tune.Tuner.restore(path, trainable=Climber)
    restored = tuner._tune_config.scheduler
    grid = tuner.fit()
    assert grid.num_terminated == 4
    after = restored.get_state()
    # The restored scheduler counts the perturbations of both runs (one log line each).
    global_log = open(os.path.join(path, "pbt_global.txt")).read().splitlines()
    assert after["num_perturbations"] == len(global_log) > before["num_perturbations"] - 1
    for trial_id, state in before["trial_state"].items():
        assert after["trial_state"][trial_id]["last_train_time"] >= state["last_train_time"]
        assert after["trial_state"][trial_id]["orig_tag"] == state["orig_tag"]
    for res in grid:
        lines = _lines(res.path)
        assert lines[-1]["training_iteration"] == 8 and all(x["lr"] in LRS for x in lines)


def count_with_every_second_checkpoint(config):
    """Counts its iterations in a checkpoint taken every second one (to 9)."""
    counter = _restored_counter()
    while counter < 9:
        counter += 1
        checkpoint = _counter_checkpoint(counter) if counter % 2 == 0 else None
        tune.report({"score": counter + config["lr"], "counter": counter}, checkpoint=checkpoint)


def _restored_counter() -> int:
    """The count in the trial's checkpoint (0 without one)."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return 0
    with checkpoint.as_directory() as d, open(os.path.join(d, "counter")) as f:
        return int(f.read())


def _counter_checkpoint(counter: int) -> tune.Checkpoint:
    directory = tempfile.mkdtemp()
    with open(os.path.join(directory, "counter"), "w") as f:
        f.write(str(counter))
    return tune.Checkpoint.from_directory(directory)


@pytest.mark.parametrize("quantile_fraction", [0.0, 0.25], ids=["pauses", "exploits"])
def test_perturbations_between_checkpoints_leave_each_iteration_once(
    run_config, two_cpus, quantile_fraction
):
    """Synch rounds at 3, 6 and 9 with a checkpoint every 2: at 3 and 9 every trial is
    paused (and, with a quantile, the worst exploits the best) one iteration past its
    newest checkpoint.

    A function trainable's pause hands back the checkpoint it reported at 2; it was
    registered again with the result of 3 ("pauses"), and an exploit registered the
    donor's copy at the target's iteration 3 too ("exploits"): the trial then resumed
    at 2 while its result.json was cut back only to 3, and it held iteration 3 twice
    (the chaos campaign's ``8, 9, 9, 10``).
    """
    random.seed(0)
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=3,
        hyperparam_mutations={"lr": LRS},
        quantile_fraction=quantile_fraction,
        resample_probability=0.0,
        synch=True,
    )
    grid = tune.Tuner(
        count_with_every_second_checkpoint,
        param_space={"lr": tune.grid_search(LRS)},
        tune_config=tune.TuneConfig(scheduler=pbt, metric="score", mode="max"),
        run_config=run_config(name="between"),
    ).fit()
    assert grid.num_terminated == 4 and grid.errors == []
    if quantile_fraction:  # an exploit at 3 and at 9, from a checkpoint at 2 and 8
        assert pbt._num_perturbations >= 2
    for res in grid:
        lines = _lines(res.path)
        assert [line["training_iteration"] for line in lines] == list(range(1, 10))
        # Restarted from the checkpoint it claims: its own count agrees.
        assert all(line["counter"] == line["training_iteration"] for line in lines)
        # Each checkpoint is registered at the iteration it restores to.
        for checkpoint, metrics in res.best_checkpoints:
            with open(os.path.join(checkpoint.path, "counter")) as f:
                assert int(f.read()) == metrics["training_iteration"]


def count_in_two_seconds(config):
    """Counts to 10 with a checkpoint every second iteration, logging each iteration it
    starts; its results carry the timestamps of a fast run: 1-5 in one second, 6-10 in
    the next (a result's timestamp counts whole seconds)."""
    counter = _restored_counter()
    started = os.path.join(config["side_dir"], f"{tune.get_context().get_trial_id()}.log")
    while counter < 10:
        counter += 1
        with open(started, "a") as f:
            f.write(f"{counter}\n")
        checkpoint = _counter_checkpoint(counter) if counter % 2 == 0 else None
        result = {"score": counter + config["lr"], "counter": counter}
        tune.report(dict(result, timestamp=1_000_000 + (counter > 5)), checkpoint=checkpoint)


class KeepFirstSchedulerState(tune.Callback):
    """Copies the scheduler state of the run's first snapshot aside, at the first result."""

    def __init__(self, experiment_dir, copy):
        self.experiment_dir, self.copy = experiment_dir, copy

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if not os.path.exists(self.copy):
            shutil.copyfile(os.path.join(self.experiment_dir, "scheduler_state.pkl"), self.copy)


def test_replayed_synch_rounds_stay_at_the_checkpoints(run_config, two_cpus, tmp_path):
    """A restore replays to PBT the results its saved state had not seen, as they came:
    here every result of a run interrupted after the round at 6 (the scheduler state of
    the first snapshot, as a driver killed before the next one leaves).

    Taken trial by trial within a second, the replay had trial 0 at 5 before trial 3
    reached 2: the round at 2 then moved the next sync point to 5, and the restored run
    perturbed at 7 and 9, between checkpoints: every trial paused there and ran the
    iteration again, and a trial at 7 could clone a donor's checkpoint at 8 (the chaos
    campaign's ``1..7, 9, 10``) or a finished one (ended at 9).
    """
    side = tmp_path / "side"
    side.mkdir()
    experiment_dir = str(tmp_path / "results" / "replayed")
    first_state = str(tmp_path / "first_scheduler_state.pkl")

    def make_pbt():
        return PopulationBasedTraining(
            time_attr="training_iteration",
            perturbation_interval=2,
            hyperparam_mutations={"lr": LRS},
            quantile_fraction=0.25,
            resample_probability=0.0,
            synch=True,
        )

    random.seed(0)
    marker = str(tmp_path / "interrupted")
    callbacks = [KeepFirstSchedulerState(experiment_dir, first_state), InterruptOnce(marker, 24)]
    grid = tune.Tuner(
        count_in_two_seconds,
        param_space={"lr": tune.grid_search(LRS), "side_dir": str(side)},
        tune_config=tune.TuneConfig(scheduler=make_pbt(), metric="score", mode="max"),
        run_config=run_config(name="replayed", callbacks=callbacks),
    ).fit()
    assert os.path.exists(marker) and grid.num_terminated == 0
    # Every trial reported 6 (its checkpoint): the restore replays all 24 results.
    assert all(r.metrics["training_iteration"] == 6 for r in grid)
    shutil.copyfile(first_state, os.path.join(experiment_dir, "scheduler_state.pkl"))
    logs = {p: open(p).read().split() for p in map(str, side.iterdir())}

    tuner = tune.Tuner.restore(experiment_dir, trainable=count_in_two_seconds)
    restored = tuner._tune_config.scheduler
    grid = tuner.fit()
    assert grid.num_terminated == 4 and grid.errors == []
    for path, before in logs.items():
        # Resumed at 6, no trial is paused between checkpoints: each iteration once.
        assert open(path).read().split()[len(before) :] == ["7", "8", "9", "10"]
    for res in grid:
        lines = _lines(res.path)
        assert [line["training_iteration"] for line in lines] == list(range(1, 11))
        assert all(line["counter"] == line["training_iteration"] for line in lines)
    assert restored.get_state()["next_perturbation_sync"] == 12  # rounds at 8 and 10


def test_an_exploit_decided_just_before_a_crash_is_carried_out_after_it(tmp_path):
    """The driver dies after PBT decided its first exploit and before the trial was
    paused to carry it out. The restore replays the round to PBT, which decides it
    again, and carries it out: the run ends as the uninterrupted one (before, the
    exploited trial went on with its old config and the run ended otherwise)."""
    import subprocess
    import sys

    from tests.chaos.campaign import ROOT, check, reference

    expected = reference("pbt", str(tmp_path / "reference"))
    storage, side = str(tmp_path / "store"), tmp_path / "side"
    side.mkdir()
    command = [sys.executable, "-m", "tests.schedulers._pbt_killed_after_exploit"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    first = subprocess.run([*command, storage, str(side)], cwd=ROOT, env=env, timeout=300)
    assert first.returncode == -signal.SIGKILL and (side / "killed").exists()
    experiment = os.path.join(storage, "chaos")
    decisions = open(os.path.join(experiment, "pbt_global.txt")).read().splitlines()
    assert len(decisions) == 1  # killed between the decision and its exploit
    second = subprocess.run(
        [*command, storage, str(side)], cwd=ROOT, env=env, timeout=300, capture_output=True
    )
    assert second.returncode == 0, second.stderr[-3000:]
    outcome = check("pbt", experiment, str(side), kills=1)
    assert outcome.problems == []
    assert outcome.configs == expected.configs and outcome.scores == expected.scores
    # The decision replayed after the restore was logged once, when it was made.
    logged = open(os.path.join(experiment, "pbt_global.txt")).read().splitlines()
    assert logged[0] == decisions[0] and logged.count(decisions[0]) == 1


def _checkpoints_every_second_step(config):
    step, acc = 0, 0.0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            step, acc = json.load(f)
    while step < 25:  # 6 perturbations: some exploit, whatever the timing
        # Steps of ~10 ms keep the four trials abreast: one that ran all its steps
        # before another began (a slow start of its worker) left the population no
        # perturbation to exploit at (one full run in ~30 failed so).
        time.sleep(0.01)
        step += 1
        acc += config["lr"] * (1 if config["lr"] < 0.5 else -1)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump([step, acc], f)
            saved = tune.Checkpoint.from_directory(d) if step % 2 == 0 else None
            tune.report({"acc": acc, "step": step}, checkpoint=saved)


def test_exploits_clone_the_checkpoint_of_the_donors_perturbation(run_config, two_cpus):
    # Donors checkpoint every 2 steps and are perturbed every 4: as in Ray Tune, an
    # exploit clones the checkpoint the donor made at its last perturbation (at a
    # multiple of 4), never a later one, which could be the end of its training.
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=4,
        hyperparam_mutations={"lr": tune.uniform(0.0001, 1.0)},
        quantile_fraction=0.5,
        log_config=True,
    )
    grid = tune.Tuner(
        tune.with_resources(_checkpoints_every_second_step, {"cpu": 0.5}),
        param_space={"lr": tune.grid_search([0.9, 0.1, 0.6, 0.3])},
        tune_config=tune.TuneConfig(scheduler=pbt, metric="acc", mode="max", seed=0),
        run_config=run_config(),
    ).fit()
    assert not grid.errors
    rows = [json.loads(line) for line in open(os.path.join(grid.experiment_path, "pbt_global.txt"))]
    assert rows, "no exploit happened"
    assert all(row[3] % 4 == 0 for row in rows), rows
    for trial_result in grid:  # every trial, exploited or not, trained to its end
        assert trial_result.metrics["step"] == 25
