"""MedianStoppingRule: the median rule, yielding, soft stops, state, and a Tuner run.

Expected decisions are worked out by hand from Ray's rule: at time t >= grace_period,
the other trials whose latest result is at t or later each give their mean over
results with grace_period <= time <= t; with at least min_samples_required of them,
the trial stops when its best value so far is strictly worse than their median.
"""

from __future__ import annotations

import math
import os
import pickle

import pytest

import fasttune as tune
from fasttune import result as R
from fasttune.experiment.trial import TrialStatus
from fasttune.schedulers._registry import create_scheduler
from fasttune.schedulers.median_stopping_rule import MedianStoppingRule
from fasttune.schedulers.trial_scheduler import TrialScheduler
from tests.schedulers._trial_list_view import TrialListView, make_trials

CONTINUE, PAUSE, STOP = TrialScheduler.CONTINUE, TrialScheduler.PAUSE, TrialScheduler.STOP


def rule(**kwargs):
    kwargs.setdefault("time_attr", R.TRAINING_ITERATION)
    kwargs.setdefault("metric", "acc")
    kwargs.setdefault("mode", "max")
    return MedianStoppingRule(**kwargs)


class Feeder:
    def __init__(self, scheduler, *trial_ids, waiting=()):
        self.scheduler = scheduler
        self.trials = {t.trial_id: t for t in make_trials(*trial_ids)}
        for trial in make_trials(*waiting, status=TrialStatus.PENDING):
            self.trials[trial.trial_id] = trial
        self.view = TrialListView(list(self.trials.values()))
        for trial in self.trials.values():
            scheduler.on_trial_add(self.view, trial)

    def result(self, trial_id, t, value):
        result = {R.TRAINING_ITERATION: t, "acc": value}
        return self.scheduler.on_trial_result(self.view, self.trials[trial_id], result)

    def curve(self, trial_id, values, start=1):
        return [self.result(trial_id, t, v) for t, v in enumerate(values, start)]


def test_the_median_rule():
    feed = Feeder(rule(grace_period=2, min_samples_required=2), *"abcdef")
    # a and b run first; nothing waits, so too few samples means CONTINUE.
    assert feed.curve("a", [1, 2, 3, 4]) == [CONTINUE] * 4
    assert feed.curve("b", [2, 2, 2, 2]) == [CONTINUE] * 4  # 1 sample (a) < 2
    # c at t=1: within the grace period.
    assert feed.result("c", 1, 0.5) == CONTINUE
    # c at t=2: means over [2, 2]: a 2, b 2 -> median 2; best 0.5 < 2.
    assert feed.result("c", 2, 0.5) == STOP
    # d's best includes results before the grace period: 5 >= median(a 2, b 2, c 0.5).
    assert feed.result("d", 1, 5.0) == CONTINUE
    assert feed.result("d", 2, 0.1) == CONTINUE
    # At t=3 c (latest t=2) no longer counts: median(a 2.5, b 2) = 2.25 <= 5.
    assert feed.result("d", 3, 0.1) == CONTINUE
    # e at t=3: median(a 2.5, b 2, d mean(0.1, 0.1)) = 2: a tie continues.
    assert feed.result("e", 3, 2.0) == CONTINUE
    # f at t=3: median(a 2.5, b 2, d 0.1, e 2.0) = 2.0; 1.99 is worse.
    assert feed.result("f", 3, 1.99) == STOP
    assert feed.scheduler.debug_string() == "Using MedianStoppingRule: num_stopped=2."


def test_min_mode():
    feed = Feeder(rule(metric="loss", mode="min", grace_period=1, min_samples_required=2), *"abc")
    for trial_id, losses in (("a", [1.0, 0.5]), ("b", [0.6, 0.6])):
        for t, loss in enumerate(losses, 1):
            trial = feed.trials[trial_id]
            feed.scheduler.on_trial_result(
                feed.view, trial, {R.TRAINING_ITERATION: t, "loss": loss}
            )
    c = feed.trials["c"]
    # At t=2: means over [1, 2]: a 0.75, b 0.6 -> median 0.675.
    assert feed.scheduler.on_trial_result(feed.view, c, {R.TRAINING_ITERATION: 1, "loss": 0.7}) == (
        CONTINUE  # t=1: median(a 1.0, b 0.6) = 0.8 > 0.7
    )
    assert feed.scheduler.on_trial_result(
        feed.view, c, {R.TRAINING_ITERATION: 2, "loss": 0.68}
    ) == (
        STOP  # best 0.68 > 0.675
    )


def test_too_few_samples_yields_to_waiting_trials_once_per_time_slice():
    feed = Feeder(
        rule(grace_period=1, min_samples_required=1, min_time_slice=2), "a", waiting=["w"]
    )
    assert feed.result("a", 1, 1.0) == PAUSE  # never paused before; w is PENDING
    assert feed.result("a", 2, 1.0) == CONTINUE  # 2 - 1 = 1, not > 2
    assert feed.result("a", 3, 1.0) == CONTINUE  # 2, not > 2
    assert feed.result("a", 4, 1.0) == PAUSE  # 3 > 2
    feed.trials["w"].set_status(TrialStatus.PAUSED)  # a paused trial waits too
    assert feed.result("a", 7, 1.0) == PAUSE
    feed.trials["w"].set_status(TrialStatus.TERMINATED)  # nothing waits: run on
    assert feed.result("a", 10, 1.0) == CONTINUE
    # Within the grace period a trial never yields.
    feed = Feeder(rule(grace_period=5, min_samples_required=1), "a", waiting=["w"])
    assert feed.result("a", 1, 1.0) == CONTINUE


def test_soft_stop_pauses_and_then_runs_fifo():
    feed = Feeder(rule(grace_period=1, min_samples_required=1, hard_stop=False), "a", "b")
    feed.curve("a", [1.0, 1.0, 1.0])
    assert feed.result("b", 1, 0.1) == PAUSE  # median 1.0: stopped softly
    # Resumed later, b is never judged again, and its results are not recorded.
    assert feed.curve("b", [0.0, 0.0], start=2) == [CONTINUE, CONTINUE]
    assert feed.scheduler._results["b"].records() == [(1.0, 0.1)]
    assert feed.scheduler.debug_string() == "Using MedianStoppingRule: num_stopped=1."


def test_trials_without_results_in_the_window_give_no_sample():
    # a jumps from t=1 to t=3, so it has no result in [2, 2] (Ray's mean would be NaN
    # and stop b); it is left out: no sample, so b continues.
    feed = Feeder(rule(grace_period=2, min_samples_required=1), "a", "b")
    feed.result("a", 1, 1.0)
    feed.result("a", 3, 1.0)
    assert feed.result("b", 2, 0.5) == CONTINUE


def test_a_trial_resumed_from_an_earlier_checkpoint_counts_repeated_results():
    # a resumed from t=1 after reaching t=3: its times go 1 2 3 2 3. The window mean
    # over [2, 3] takes all four results there: (2 + 3 + 4 + 5) / 4 = 3.5.
    feed = Feeder(rule(grace_period=2, min_samples_required=1), "a", "b", "c")
    feed.curve("a", [1.0, 2.0, 3.0])
    feed.curve("a", [4.0, 5.0], start=2)
    assert feed.scheduler._results["a"].mean(2, 3) == 3.5
    assert feed.result("b", 3, 3.49) == STOP
    assert feed.result("c", 3, 3.5) == CONTINUE
    # A large ordered curve: prefix-sum windows equal plain means.
    curve = feed.scheduler._curve("big")
    values = [((i * 7919) % 101) / 10 for i in range(500)]
    for t, v in enumerate(values):
        curve.add(float(t), v)
    for low, high in ((0, 499), (10, 20), (250.5, 260), (400, 1000)):
        window = [v for t, v in enumerate(values) if low <= t <= high]
        assert curve.mean(low, high) == pytest.approx(sum(window) / len(window), rel=1e-12)


def test_nan_values_are_left_out():
    feed = Feeder(rule(grace_period=2, min_samples_required=1), "a", "b", "c")
    feed.curve("a", [0.0, math.nan, 1.0])
    # a's mean over [2, 3] without NaN is 1.0; b's best 0.5 is worse.
    assert feed.result("b", 3, 0.5) == STOP
    # Only NaN values: worse than any median.
    assert feed.result("c", 3, math.nan) == STOP


def test_completion_counts_the_final_result_once():
    scheduler = rule(grace_period=1, min_samples_required=1)
    feed = Feeder(scheduler, "a", "b")
    feed.curve("a", [1.0, 1.0])
    a = feed.trials["a"]
    scheduler.on_trial_complete(feed.view, a, {R.TRAINING_ITERATION: 2, "acc": 1.0})
    scheduler.on_trial_complete(feed.view, a, {R.TRAINING_ITERATION: 3, "acc": 4.0})  # unseen
    assert scheduler._results["a"].records() == [(1.0, 1.0), (2.0, 1.0), (3.0, 4.0)]
    scheduler.on_trial_complete(feed.view, feed.trials["b"], {})  # nothing reported: ignored
    # b at t=3: a's mean over [1, 3] = 2.0.
    assert feed.result("b", 3, 1.9) == STOP


def test_missing_metric_raises_with_the_reported_keys():
    feed = Feeder(rule(), "a")
    with pytest.raises(ValueError, match=r"'acc'.*Reported keys: \['loss', 'training_iteration'\]"):
        feed.scheduler.on_trial_result(
            feed.view, feed.trials["a"], {R.TRAINING_ITERATION: 1, "loss": 1}
        )
    with pytest.raises(ValueError, match="'time_total_s'"):
        MedianStoppingRule(metric="acc", mode="max").on_trial_result(
            feed.view, feed.trials["a"], {"acc": 1.0}
        )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"grace_period": -1}, "grace_period"),
        ({"min_samples_required": 0}, "min_samples_required"),
        ({"min_samples_required": 2.5}, "min_samples_required"),
        ({"min_time_slice": -1}, "min_time_slice"),
        ({"mode": "best"}, "mode"),
        ({"time_attr": 3}, "time_attr"),
    ],
)
def test_invalid_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        rule(**kwargs)


def test_needs_a_mode():
    with pytest.raises(ValueError, match="`mode`"):
        MedianStoppingRule(metric="acc").set_search_properties(None, None)
    scheduler = MedianStoppingRule()
    assert scheduler.set_search_properties("acc", "max") is True
    assert (scheduler.metric, scheduler.mode) == ("acc", "max")
    assert rule().set_search_properties("acc", "max") is False


def test_state_round_trip_gives_the_same_decisions():
    first = rule(grace_period=1, min_samples_required=1)
    feed = Feeder(first, "a", "b")
    feed.curve("a", [1.0, 1.0])
    second = rule(grace_period=1, min_samples_required=1)
    second.set_state(pickle.loads(pickle.dumps(first.get_state())))
    b = feed.trials["b"]
    for scheduler in (first, second):
        assert (
            scheduler.on_trial_result(feed.view, b, {R.TRAINING_ITERATION: 1, "acc": 0.5}) == STOP
        )


def test_create_scheduler_by_name():
    for name in ("median_stopping_rule", "medianstopping"):
        scheduler = create_scheduler(name, metric="acc", mode="max", grace_period=3.0, max_t=9)
        assert isinstance(scheduler, MedianStoppingRule) and scheduler._grace_period == 3.0


# ---------------------------------------------------------------------- through the Tuner
@pytest.fixture
def two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


class Constant(tune.Trainable):
    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        with open(os.path.join(tune.get_context().get_trial_dir(), "steps.txt"), "a") as f:
            f.write(".")  # counts the iterations the trial really ran
        return {"score": self.config["x"], "n": self.n, "done": self.n >= 4}

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]


def test_tuner_run_yields_then_stops_the_worse_trial(tmp_path, two_cpus):
    # One trial at a time (each takes both CPUs), both created up front (no
    # max_concurrent_trials, which creates trials as slots free). A (1.0) at t=1: no other trial has
    # reached t=1 and B waits: A yields (PAUSE). B at t=1: median of A's mean = 1.0 >
    # 0.1: STOP. A resumes from its checkpoint; no sample at t >= 2 and nothing waits:
    # it runs to done at n=4.
    grid = tune.Tuner(
        tune.with_resources(Constant, {"cpu": 2}),
        param_space={"x": tune.grid_search([1.0, 0.1])},
        tune_config=tune.TuneConfig(
            metric="score",
            mode="max",
            scheduler=MedianStoppingRule(
                time_attr="training_iteration", grace_period=1, min_samples_required=1
            ),
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit()
    assert grid.num_errors == 0
    ns = {}
    for result in grid:
        lines = open(os.path.join(result.path, "result.json")).read().splitlines()
        ran = len(open(os.path.join(result.path, "steps.txt")).read())
        ns[result.config["x"]] = (result.metrics["n"], len(lines), ran)
    # (n, lines in result.json, iterations run): nothing ran past a decision.
    assert ns == {1.0: (4, 4, 4), 0.1: (1, 1, 1)}
    a = next(r for r in grid if r.config["x"] == 1.0)
    assert os.path.isdir(os.path.join(a.path, "checkpoint_000001"))  # saved by the pause
