"""ASHA: rungs, the quantile cut-off per rung, max_t, state, and runs through the Tuner.

Expected decisions are worked out by hand from Ray's rule: at the first result that
reaches a rung (milestones highest first), the score (``-metric`` in min mode) is
compared with ``nanpercentile(rung scores, (1 - 1/rf) * 100)`` of the scores recorded
there before; strictly below stops; the score is recorded either way.
"""

from __future__ import annotations

import json
import math
import os
import pickle

import numpy as np
import pytest

import fasttune as tune
from fasttune import result as R
from fasttune._internal.state_framing import open_pickle
from fasttune.experiment.trial import TrialStatus
from fasttune.schedulers._registry import create_scheduler
from fasttune.schedulers.async_hyperband import ASHAScheduler, AsyncHyperBandScheduler
from fasttune.schedulers.trial_scheduler import ControllerView, TrialScheduler
from tests.schedulers._trial_list_view import TrialListView, make_trials

CONTINUE, STOP = TrialScheduler.CONTINUE, TrialScheduler.STOP


def asha(**kwargs):
    kwargs.setdefault("metric", "acc")
    kwargs.setdefault("mode", "max")
    return AsyncHyperBandScheduler(**kwargs)


class Feeder:
    """Adds trials to a scheduler and feeds them hand-made results."""

    def __init__(self, scheduler, *trial_ids, metric="acc"):
        self.scheduler = scheduler
        self.metric = metric
        self.trials = {t.trial_id: t for t in make_trials(*trial_ids)}
        self.view = TrialListView(list(self.trials.values()))
        assert isinstance(self.view, ControllerView)
        for trial in self.trials.values():
            scheduler.on_trial_add(self.view, trial)

    def result(self, trial_id, t, value):
        result = {R.TRAINING_ITERATION: t, self.metric: value}
        return self.scheduler.on_trial_result(self.view, self.trials[trial_id], result)

    def complete(self, trial_id, t, value):
        trial = self.trials[trial_id]
        trial.set_status(TrialStatus.TERMINATED)
        result = {R.TRAINING_ITERATION: t, self.metric: value}
        self.scheduler.on_trial_complete(self.view, trial, result)


def rungs(scheduler, bracket=0):
    return [(m, dict(rec)) for m, rec in scheduler._brackets[bracket].rungs]


# ---------------------------------------------------------------------- construction
def test_ashascheduler_is_the_same_class():
    assert ASHAScheduler is AsyncHyperBandScheduler


@pytest.mark.parametrize(
    ("kwargs", "milestones"),
    [
        # log(100)/log(4) = 3.32 -> int(4.32) = 4 rungs: 4**3, 4**2, 4, 1.
        ({"max_t": 100, "grace_period": 1, "reduction_factor": 4}, [64, 16, 4, 1]),
        # log(81)/log(3) = 4.0 -> 5 rungs, max_t itself is a rung.
        ({"max_t": 81, "grace_period": 1, "reduction_factor": 3}, [81, 27, 9, 3, 1]),
        # Ray's float rounding: log(1000)/log(10) = 2.9999999999999996 -> 3 rungs only.
        ({"max_t": 1000, "grace_period": 1, "reduction_factor": 10}, [100, 10, 1]),
        # grace 2, rf 2, max_t 20: log(10)/log(2) = 3.32 -> 4 rungs from 2.
        ({"max_t": 20, "grace_period": 2, "reduction_factor": 2}, [16, 8, 4, 2]),
    ],
)
def test_rung_milestones(kwargs, milestones):
    assert [m for m, _ in rungs(asha(**kwargs))] == milestones


def test_brackets_start_at_higher_rungs():
    # Bracket s drops the s lowest rungs: 4 - s rungs starting at 4**s.
    scheduler = asha(max_t=100, grace_period=1, reduction_factor=4, brackets=3)
    assert [[m for m, _ in rungs(scheduler, s)] for s in range(3)] == [
        [64, 16, 4, 1],
        [64, 16, 4],
        [64, 16],
    ]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"reduction_factor": 1}, "reduction_factor"),
        ({"reduction_factor": 0.5}, "reduction_factor"),
        ({"grace_period": 0}, "grace_period"),
        ({"grace_period": -1}, "grace_period"),
        ({"max_t": 0}, "max_t"),
        ({"max_t": "10"}, "max_t"),
        ({"max_t": 5, "grace_period": 10}, "grace_period"),
        ({"brackets": 0}, "brackets"),
        ({"brackets": 1.5}, "brackets"),
        ({"mode": "maximize"}, "mode"),
        ({"time_attr": None}, "time_attr"),
    ],
)
def test_invalid_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        asha(**kwargs)


# ---------------------------------------------------------------------- decisions
def test_rays_bracket_example():
    # Ray's _Bracket docstring: _Bracket(1, 10, 2, 0) has rungs 8, 4, 2, 1.
    scheduler = asha(max_t=10, grace_period=1, reduction_factor=2)
    feed = Feeder(scheduler, "t1", "t2", "t3")
    assert feed.result("t1", 1, 2) == CONTINUE  # rung 1 empty: no cut-off
    assert feed.result("t2", 1, 4) == CONTINUE  # cut-off of {2} is 2; 4 >= 2
    # cut-off of {2, 4} at the 50th percentile is 3.0; 1 < 3 stops.
    assert scheduler._brackets[0].cutoff(rungs(scheduler)[-1][1]) == 3.0
    assert feed.result("t3", 1, 1) == STOP
    assert scheduler._brackets[0].cutoff(rungs(scheduler)[-1][1]) == 2.0  # median {2, 4, 1}


def test_quantile_cutoff_and_ties():
    # rf=4: the 75th percentile (linear interpolation) of the earlier scores at the rung.
    feed = Feeder(asha(reduction_factor=4, max_t=64), *"abcdefg")
    assert feed.result("a", 1, 1.0) == CONTINUE  # empty rung
    assert feed.result("b", 1, 2.0) == CONTINUE  # {1}: 1.0
    assert feed.result("c", 1, 3.0) == CONTINUE  # {1,2}: 1.75
    assert feed.result("d", 1, 4.0) == CONTINUE  # {1,2,3}: 2.5
    assert feed.result("e", 1, 3.5) == CONTINUE  # {1,2,3,4}: 3.25
    assert feed.result("f", 1, 3.5) == CONTINUE  # {1,2,3,3.5,4}: 3.5 -- a tie continues
    assert feed.result("g", 1, 3.4) == STOP  # {1,2,3,3.5,3.5,4}: 3.5 -- 3.4 is below
    # Every trial was recorded at rung 1, the stopped one included.
    assert rungs(feed.scheduler)[-1][1] == {
        "a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 3.5, "f": 3.5, "g": 3.4,
    }  # fmt: skip


def test_only_the_first_result_at_a_rung_is_judged():
    # Rungs 16, 4, 1 (max_t=16, rf=4). b is below a's score at every rung it reaches.
    feed = Feeder(asha(max_t=16), "a", "b")
    for t in (1, 2, 3, 4, 5):
        assert feed.result("a", t, 1.0) == CONTINUE
    assert feed.result("b", 1, 0.9) == STOP  # rung 1: cut-off {1.0} = 1.0
    # Had b continued: iterations between rungs are never judged...
    assert feed.result("b", 2, 0.0) == CONTINUE
    assert feed.result("b", 3, 0.0) == CONTINUE
    # ...and the next rung judges the score reached there.
    assert feed.result("b", 4, 0.5) == STOP  # rung 4: cut-off {1.0}
    assert rungs(feed.scheduler)[1][1] == {"a": 1.0, "b": 0.5}


def test_min_mode_negates_the_metric():
    feed = Feeder(asha(metric="loss", mode="min", max_t=16), "a", "b", "c", metric="loss")
    assert feed.result("a", 1, 0.5) == CONTINUE
    assert feed.result("b", 1, 0.2) == CONTINUE  # -0.2 >= cut-off -0.5
    assert feed.result("c", 1, 0.4) == STOP  # 75th pct of {-0.5, -0.2} = -0.275 > -0.4
    assert rungs(feed.scheduler)[-1][1] == {"a": -0.5, "b": -0.2, "c": -0.4}


def test_nan_scores_continue_and_are_left_out_of_the_cutoff():
    feed = Feeder(asha(max_t=16), "a", "b", "c", "d")
    assert feed.result("a", 1, math.nan) == CONTINUE  # empty rung; NaN recorded
    assert feed.result("b", 1, 0.1) == CONTINUE  # cut-off of {NaN} is NaN: never below
    assert feed.result("c", 1, math.nan) == CONTINUE  # NaN < cut-off is False
    assert feed.result("d", 1, 0.05) == STOP  # cut-off of {NaN, 0.1, NaN} is 0.1


def test_max_t_stops_whatever_the_score():
    feed = Feeder(asha(max_t=4, grace_period=1, reduction_factor=2), "a")
    assert [feed.result("a", t, 1.0) for t in (1, 2, 3, 4)] == [CONTINUE] * 3 + [STOP]
    assert feed.scheduler._num_stopped == 1


def test_without_stop_last_trials_a_promoted_trial_runs_on():
    scheduler = asha(max_t=4, grace_period=1, reduction_factor=2, stop_last_trials=False)
    feed = Feeder(scheduler, "a", "b")
    assert [feed.result("a", t, 1.0) for t in (1, 2, 3, 4, 5, 6)] == [CONTINUE] * 6
    # b reaches rung 4 (= max_t) below a's score there: stopped by the rung, not by max_t.
    assert [feed.result("b", t, 2.0) for t in (1, 2, 3)] == [CONTINUE] * 3
    assert feed.result("b", 4, 0.5) == STOP


def test_a_skipped_lower_rung_is_judged_later_with_stop_last_trials():
    # Ray's loop: a recorded higher rung is passed over and a lower rung the trial
    # skipped is judged with the current score. Rungs 16, 4, 1.
    feed = Feeder(asha(max_t=16), "a", "b")
    assert feed.result("a", 1, 1.0) == CONTINUE
    assert feed.result("b", 5, 2.0) == CONTINUE  # rung 4, empty
    assert feed.result("b", 6, 0.5) == STOP  # rung 1: cut-off {1.0}
    # Without stop_last_trials the recorded rung 4 ends the search: CONTINUE.
    feed = Feeder(asha(max_t=16, stop_last_trials=False), "a", "b")
    feed.result("a", 1, 1.0)
    feed.result("b", 5, 2.0)
    assert feed.result("b", 6, 0.5) == CONTINUE


def test_completion_records_the_final_result_at_its_rung():
    feed = Feeder(asha(max_t=16), "a", "b")
    feed.result("a", 1, 1.0)
    feed.complete("a", 4, 3.0)  # ended at t=4 (e.g. done): recorded at rung 4
    assert rungs(feed.scheduler)[1][1] == {"a": 3.0}
    assert "a" not in feed.scheduler._trial_info
    feed.result("b", 1, 2.0)
    assert feed.result("b", 4, 2.5) == STOP  # rung 4: cut-off {3.0}


def test_brackets_are_drawn_by_softmax_over_their_rung_counts():
    # 3 brackets with 4, 3, 2 rungs: probabilities e^0, e^-1, e^-2 normalised.
    np.random.seed(0)
    scheduler = asha(max_t=100, reduction_factor=4, brackets=3)
    Feeder(scheduler, *[f"t{i}" for i in range(3000)])
    counts = np.bincount(list(scheduler._trial_info.values()), minlength=3) / 3000
    expected = np.exp([0, -1, -2]) / np.exp([0, -1, -2]).sum()  # 0.665, 0.245, 0.090
    assert np.allclose(counts, expected, atol=0.03)


def test_missing_metric_or_time_attr_raises_with_the_reported_keys():
    feed = Feeder(asha(), "a")
    with pytest.raises(ValueError, match=r"'acc'.*Reported keys: \['loss', 'training_iteration'\]"):
        feed.scheduler.on_trial_result(
            feed.view, feed.trials["a"], {"training_iteration": 1, "loss": 0.1}
        )
    with pytest.raises(ValueError, match="'epoch'"):
        AsyncHyperBandScheduler("epoch", "acc", "max").on_trial_result(
            feed.view, feed.trials["a"], {"acc": 0.1}
        )
    with pytest.raises(TypeError, match="not a number"):
        feed.result("a", 1, "high")


def test_the_anonymous_default_metric_is_not_required():
    scheduler = AsyncHyperBandScheduler()
    assert scheduler.set_search_properties(None, "max") is True
    assert scheduler.metric == R.DEFAULT_METRIC
    feed = Feeder(scheduler, "a")
    assert feed.scheduler.on_trial_result(feed.view, feed.trials["a"], {"x": 1}) == CONTINUE


def test_nested_metrics_are_found_in_the_final_result():
    # on_trial_complete gets the trial's (nested) last result.
    feed = Feeder(asha(metric="val/acc", max_t=16), "a", "b", metric="val/acc")
    trial = feed.trials["a"]
    feed.scheduler.on_trial_complete(
        feed.view, trial, {R.TRAINING_ITERATION: 1, "val": {"acc": 0.7}}
    )
    assert rungs(feed.scheduler)[-1][1] == {"a": 0.7}


# ---------------------------------------------------------------------- metric and mode
def test_set_search_properties():
    scheduler = AsyncHyperBandScheduler()
    assert scheduler.set_search_properties("loss", "min") is True
    assert (scheduler.metric, scheduler.mode) == ("loss", "min")
    # Received values may be received again (a restored experiment configures the
    # unpickled scheduler once more).
    assert scheduler.set_search_properties("loss", "min") is True
    # The constructor's own values conflict with TuneConfig's, as on Ray.
    assert asha().set_search_properties("acc", None) is False
    assert asha().set_search_properties(None, "min") is False
    assert asha().set_search_properties(None, None) is True


@pytest.mark.parametrize(
    ("kwargs", "missing"),
    [({}, "`metric` and `mode`"), ({"metric": "loss"}, "`mode`")],
)
def test_missing_mode_is_an_error_naming_it(kwargs, missing):
    with pytest.raises(ValueError, match=missing):
        AsyncHyperBandScheduler(**kwargs).set_search_properties(None, None)
    with pytest.raises(ValueError, match=missing):
        AsyncHyperBandScheduler(**kwargs).on_trial_add(None, make_trials("a")[0])


# ---------------------------------------------------------------------- output and state
def test_debug_string_shows_cutoffs_in_metric_units():
    feed = Feeder(asha(metric="loss", mode="min", max_t=16), "a", "b", metric="loss")
    feed.result("a", 1, 0.5)
    feed.result("b", 1, 0.3)
    feed.result("b", 2, 0.1)
    text = feed.scheduler.debug_string()
    # 75th pct of {-0.5, -0.3} = -0.35 -> 0.35 in loss units (b's result at t=2 is
    # not a rung result).
    cutoff = -np.percentile([-0.5, -0.3], 75)
    assert round(cutoff, 12) == 0.35
    assert text.splitlines() == [
        "Using AsyncHyperBand: num_stopped=0",
        f"Bracket: Iter 16.000: None | Iter 4.000: None | Iter 1.000: {cutoff}",
    ]


def test_state_round_trip_gives_the_same_decisions():
    first = asha(max_t=16)
    feed = Feeder(first, "a", "b", "c")
    feed.result("a", 1, 1.0)
    feed.result("b", 1, 0.5)
    state = pickle.loads(pickle.dumps(first.get_state()))
    second = asha(max_t=16)
    second.set_state(state)
    assert rungs(second) == rungs(first)
    trial_c = feed.trials["c"]
    result = {R.TRAINING_ITERATION: 1, "acc": 0.6}
    # 75th pct of {1.0, 0.5} = 0.875 > 0.6: both stop c.
    assert second.on_trial_result(feed.view, trial_c, dict(result)) == STOP
    assert first.on_trial_result(feed.view, trial_c, dict(result)) == STOP
    # The copy is independent of the original.
    assert "c" in rungs(second)[-1][1] and "c" in rungs(first)[-1][1]
    second._brackets[0].rungs[-1][1].clear()
    assert rungs(first)[-1][1]


def test_create_scheduler_by_name():
    for name in ("async_hyperband", "AsyncHyperBand"):
        scheduler = create_scheduler(name, metric="acc", mode="max", max_t=9, unknown=1)
        assert isinstance(scheduler, AsyncHyperBandScheduler) and scheduler._max_t == 9


# ---------------------------------------------------------------------- through the Tuner
@pytest.fixture
def two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


def constant_score(config):
    flag = config.get("fail_flag")
    if flag and config["x"] < 0.3 and os.path.exists(flag):
        raise RuntimeError("failing on purpose (the flag file exists)")
    steps = os.path.join(tune.get_context().get_trial_dir(), "steps.txt")
    for _ in range(100):
        with open(steps, "a") as f:  # counts the iterations the trial really ran
            f.write(".")
        tune.report({"score": config["x"]})


def _run_config(tmp_path):
    return tune.RunConfig(storage_path=str(tmp_path / "results"), name="exp", verbose=0)


def _iterations(grid):
    """x -> (reported iterations, lines in result.json, iterations the trial ran)."""
    by_x = {}
    for result in grid:
        lines = open(os.path.join(result.path, "result.json")).read().splitlines()
        ran = len(open(os.path.join(result.path, "steps.txt")).read())
        by_x[result.config["x"]] = (result.metrics["training_iteration"], len(lines), ran)
    return by_x


def test_asha_stops_the_bad_trials_at_the_first_rung(tmp_path, two_cpus):
    # One trial at a time, in grid order; rungs 9, 3, 1 (max_t=9, rf=3: 66.7th pct).
    # 0.5: first everywhere, stopped by max_t at 9.  1.0: above 0.5 at rungs 1 and 3:
    # 9.  0.1: rung 1 cut-off of {0.5, 1.0} = 0.833: stopped at 1.  0.2: cut-off of
    # {0.5, 1.0, 0.1} = 0.667: stopped at 1.  FIFO would spend 4 x 100 iterations.
    scheduler = ASHAScheduler(max_t=9, grace_period=1, reduction_factor=3)
    grid = tune.Tuner(
        constant_score,
        param_space={"x": tune.grid_search([0.5, 1.0, 0.1, 0.2])},
        tune_config=tune.TuneConfig(
            metric="score", mode="max", scheduler=scheduler, max_concurrent_trials=1
        ),
        run_config=_run_config(tmp_path),
    ).fit()
    assert grid.num_errors == 0
    # Nothing ran past a decision: no iteration beyond a STOP, even unreported.
    assert _iterations(grid) == {0.5: (9, 9, 9), 1.0: (9, 9, 9), 0.1: (1, 1, 1), 0.2: (1, 1, 1)}
    assert scheduler._num_stopped == 4


def test_tuner_without_mode_fails_at_once_naming_it(tmp_path, two_cpus):
    tuner = tune.Tuner(
        constant_score,
        param_space={"x": 1.0},
        tune_config=tune.TuneConfig(metric="score", scheduler=ASHAScheduler()),
        run_config=_run_config(tmp_path),
    )
    with pytest.raises(ValueError, match="`mode`"):
        tuner.fit()


def test_rung_records_survive_tuner_restore(tmp_path, two_cpus):
    # Run 1: 0.5 and 1.0 fill the rungs; 0.1 and 0.2 fail before reporting.
    flag = tmp_path / "fail"
    flag.write_text("")
    space = {"x": tune.grid_search([0.5, 1.0, 0.1, 0.2]), "fail_flag": str(flag)}
    tune.Tuner(
        constant_score,
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="score",
            mode="max",
            scheduler=ASHAScheduler(max_t=9, grace_period=1, reduction_factor=3),
            max_concurrent_trials=1,
        ),
        run_config=_run_config(tmp_path),
    ).fit()
    path = str(tmp_path / "results" / "exp")
    with open(os.path.join(path, "scheduler_state.pkl"), "rb") as f:
        saved = pickle.loads(open_pickle(f.read()))["state"]  # beside what it had seen
    assert sorted(saved["_brackets"][0].rungs[-1][1].values()) == [0.5, 1.0]
    # Run 2: the failed trials restart and meet run 1's rung records: stopped at 1.
    # (A fresh scheduler would let 0.1, first at its rungs, run to max_t.)
    flag.unlink()
    grid = tune.Tuner.restore(path, constant_score, restart_errored=True).fit()
    assert grid.num_errors == 0
    assert _iterations(grid) == {0.5: (9, 9, 9), 1.0: (9, 9, 9), 0.1: (1, 1, 1), 0.2: (1, 1, 1)}
    with open(os.path.join(path, "scheduler_state.pkl"), "rb") as f:
        saved = pickle.loads(open_pickle(f.read()))["state"]
    assert sorted(saved["_brackets"][0].rungs[-1][1].values()) == [0.1, 0.2, 0.5, 1.0]
    assert saved["_num_stopped"] == 4


def test_json_results_match_rung_decisions(tmp_path, two_cpus):
    # min mode through the Tuner, metric given to the scheduler only.
    def loss_curve(config):
        steps = os.path.join(tune.get_context().get_trial_dir(), "steps.txt")
        for i in range(1, 100):
            with open(steps, "a") as f:
                f.write(".")
            tune.report({"loss": config["x"] / i})

    grid = tune.Tuner(
        loss_curve,
        param_space={"x": tune.grid_search([1.0, 2.0, 0.5])},
        tune_config=tune.TuneConfig(
            scheduler=ASHAScheduler(metric="loss", mode="min", max_t=4, reduction_factor=2),
            max_concurrent_trials=1,
        ),
        run_config=_run_config(tmp_path),
    ).fit()
    # Rungs 4, 2, 1 (50th pct). x=1: first: max_t 4. x=2: rung 1: -2 < -1: stop at 1.
    # x=0.5: rung 1 median of {-1, -2} = -1.5 <= -0.5; rung 2: cut-off -0.5 (1/2 of x=1)
    # vs -0.25: continues; stopped by max_t at 4.
    assert _iterations(grid) == {1.0: (4, 4, 4), 2.0: (1, 1, 1), 0.5: (4, 4, 4)}
    best = grid.get_best_result()
    assert best.config["x"] == 0.5
    assert json.loads(open(os.path.join(best.path, "result.json")).readline())["loss"] == 0.5
