"""HyperBandScheduler decisions, fed hand-made results through a small real view.

Bracket numbers are worked out by hand from Ray Tune's formulas:
    s_max_1 = round(log(max_t) / log(eta)) + 1        brackets per band
    n0(s)   = ceil(s_max_1 / (s + 1) * eta**s)         trials bracket s takes
    r0(s)   = int(max_t * eta**-s)                     its first milestone (0: skipped)
    halving: n <- ceil(n / eta), r <- min(r * eta, max_t)
HyperBandScheduler opens the brackets of a band from s = 0 upwards.
"""

from __future__ import annotations

import logging
import math
import pickle
import re

import pytest

from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers.hyperband import HyperBandScheduler
from tests.schedulers._hb_harness import Driver, View, statuses

PAUSE, STOP, CONTINUE = "PAUSE", "STOP", "CONTINUE"


def make(**kwargs) -> HyperBandScheduler:
    kwargs.setdefault("time_attr", "t")
    kwargs.setdefault("metric", "score")
    kwargs.setdefault("mode", "max")
    return HyperBandScheduler(**kwargs)


def brackets(scheduler) -> list[list[tuple[int, int, str]]]:
    """(n, r, status counts) per bracket, per round, read from debug_string()."""
    rounds: list[list[tuple[int, int, str]]] = []
    for line in scheduler.debug_string().splitlines()[1:]:
        if line.startswith("Round #"):
            rounds.append([])
            continue
        m = re.match(r"  Bracket\(Max Size \(n\)=(\d+), Milestone \(r\)=(\d+), .*\{(.*)\} $", line)
        assert m, line
        rounds[-1].append((int(m[1]), int(m[2]), m[3]))
    return rounds


# ---------------------------------------------------------------------- bracket layout
def test_bracket_sizes_and_milestones_for_max_t_81_eta_3():
    # s_max_1 = round(log 81 / log 3) + 1 = 4 + 1 = 5
    # n0: s=0 ceil(5/1*1)=5, s=1 ceil(5/2*3)=ceil(7.5)=8, s=2 ceil(5/3*9)=15,
    #     s=3 ceil(5/4*27)=ceil(33.75)=34, s=4 ceil(5/5*81)=81   -> 143 trials a band
    # r0: 81, 27, 9, 3, 1
    driver = Driver(make(max_t=81, reduction_factor=3))
    driver.add(143)
    assert brackets(driver.scheduler) == [
        [
            (5, 81, "PENDING: 5"),
            (8, 27, "PENDING: 8"),
            (15, 9, "PENDING: 15"),
            (34, 3, "PENDING: 34"),
            (81, 1, "PENDING: 81"),
        ]
    ]
    driver.add(1)  # the 144th trial opens round 2, again at s = 0
    assert brackets(driver.scheduler)[1] == [(5, 81, "PENDING: 1")]
    assert "total_brackets=6" in driver.scheduler.debug_string()


def test_bracket_sizes_for_max_t_16_eta_2():
    # s_max_1 = round(log 16 / log 2) + 1 = 5
    # n0: 5, ceil(5/2*2)=5, ceil(5/3*4)=ceil(6.67)=7, ceil(5/4*8)=10, 16
    # r0: 16, 8, 4, 2, 1
    driver = Driver(make(max_t=16, reduction_factor=2))
    driver.add(5 + 5 + 7 + 10 + 16)
    assert [(n, r) for n, r, _ in brackets(driver.scheduler)[0]] == [
        (5, 16),
        (5, 8),
        (7, 4),
        (10, 2),
        (16, 1),
    ]


def test_too_small_brackets_are_skipped():
    # max_t=2, eta=3: s_max_1 = round(0.63) + 1 = 2; r0(1) = int(2/3) = 0, so each band
    # is [bracket s=0 (n0 = ceil(2/1*1) = 2, r0 = 2), skipped] and counts 2 brackets.
    driver = Driver(make(max_t=2, reduction_factor=3))
    driver.add(5)
    assert brackets(driver.scheduler) == [
        [(2, 2, "PENDING: 2")],
        [(2, 2, "PENDING: 2")],
        [(2, 2, "PENDING: 1")],
    ]
    assert "total_brackets=5" in driver.scheduler.debug_string()


def test_debug_string_matches_ray_format():
    driver = Driver(make(max_t=9, reduction_factor=3))
    driver.add(4)
    assert driver.scheduler.debug_string() == (
        "Using HyperBand: num_stopped=0 total_brackets=2\n"
        "Round #0:\n"
        "  Bracket(Max Size (n)=3, Milestone (r)=9, completed=0.0%): {PENDING: 3} \n"
        "  Bracket(Max Size (n)=5, Milestone (r)=3, completed=0.0%): {PENDING: 1} "
    )


# ---------------------------------------------------------------------- halving
def nine_three(**kwargs):
    """max_t=9, eta=3: s_max_1 = round(log 9 / log 3) + 1 = 3.

    Bracket s=0: n0 = 3, r0 = 9 (no halving): trials t0..t2.
    Bracket s=1: n0 = ceil(3/2*3) = ceil(4.5) = 5, r0 = int(9/3) = 3: trials t3..t7;
    its halving keeps ceil(5/3) = 2 and moves the milestone to min(3*3, 9) = 9.
    """
    driver = Driver(make(max_t=9, reduction_factor=3, **kwargs))
    trials = driver.add(8)
    for _ in range(8):
        driver.start_next()
    return driver, trials


def test_successive_halving_keeps_the_best_and_resumes_them():
    driver, trials = nine_three()
    t3, t4, t5, t6, t7 = trials[3:]
    scores = {t3: 1, t4: 5, t5: 3, t6: 4, t7: 2}
    for trial in (t3, t4, t5, t6, t7):
        assert driver.run_to(trial, 2, scores[trial]) == CONTINUE
    for trial in (t3, t4, t5, t6):
        assert driver.report(trial, 3, scores[trial]) == PAUSE
    assert driver.scheduler.choose_trial_to_run(driver.view) is None  # all wait at r=3
    # The last one completes the rung: keep the best ceil(5/3) = 2 (t4: 5, t6: 4).
    assert driver.report(t7, 3, scores[t7]) == STOP
    assert sorted(driver.stopped_by_request) == ["t3", "t5"]
    assert statuses([t3, t4, t5, t6, t7]) == [
        "TERMINATED", "PAUSED", "TERMINATED", "PAUSED", "TERMINATED",
    ]  # fmt: skip
    assert brackets(driver.scheduler)[0][1][:2] == (2, 9)
    assert "num_stopped=3" in driver.scheduler.debug_string()
    # The promoted trials resume, in bracket order.
    assert driver.start_next() is t4
    assert driver.start_next() is t6
    assert driver.start_next() is None
    # Last rung: t4 waits at max_t; t6 reaching it ends the bracket.
    assert driver.run_to(t4, 9, 5, start=4) == PAUSE
    assert driver.run_to(t6, 9, 4, start=4) == STOP
    assert t4.status is TrialStatus.TERMINATED and driver.stopped_by_request[-1] == "t4"


def test_min_mode_keeps_the_lowest():
    driver, trials = nine_three(mode="min")
    t3, t4, t5, t6, t7 = trials[3:]
    for trial, score in ((t3, 1), (t4, 5), (t5, 3), (t6, 4)):
        assert driver.report(trial, 3, score) == PAUSE
    # t7 (2) is among the two lowest with t3 (1): it continues at once.
    assert driver.report(t7, 3, 2) == CONTINUE
    assert sorted(driver.stopped_by_request) == ["t4", "t5", "t6"]
    assert driver.start_next() is t3


def test_nan_ranks_last_whatever_the_mode():
    for mode, keep in (("max", {"t4", "t5"}), ("min", {"t3", "t4"})):
        driver, trials = nine_three(mode=mode)
        for trial, score in zip(trials[3:], (1, 2, 3, math.nan, math.nan)):
            driver.report(trial, 3, score)
        promoted = {t.trial_id for t in trials[3:] if t.status is not TrialStatus.TERMINATED}
        assert promoted == keep, mode


def test_bracket_without_halving_runs_to_max_t_then_stops():
    driver, trials = nine_three()
    t0, t1, t2 = trials[:3]
    assert driver.run_to(t0, 9, 1) == PAUSE  # waits at max_t for the others
    assert driver.run_to(t1, 9, 2) == PAUSE
    assert driver.run_to(t2, 9, 3) == STOP
    assert driver.stopped_by_request == ["t0", "t1"]
    assert [d for tid, t, d in driver.decisions if tid == "t2"] == [CONTINUE] * 8 + [STOP]


def test_stop_last_trials_false_lets_the_last_rung_run_on():
    driver, trials = nine_three(stop_last_trials=False)
    t0 = trials[0]
    assert driver.run_to(t0, 30, 1) == CONTINUE  # past max_t = 9
    t3, t4, t5, t6, t7 = trials[3:]
    for trial, score in ((t3, 1), (t4, 5), (t5, 3), (t6, 4)):
        driver.report(trial, 3, score)
    assert driver.report(t7, 3, 2) == STOP  # the first halving still happens
    assert driver.start_next() is t4
    assert driver.run_to(t4, 40, 5, start=4) == CONTINUE


def test_time_attr_jump_past_the_next_milestone_halves_again_at_once():
    driver, trials = nine_three()
    t3, t4, t5, t6, t7 = trials[3:]
    for trial, score in ((t3, 1), (t4, 5), (t5, 3), (t6, 4)):
        assert driver.report(trial, 12, score) == PAUSE  # 12 >= 3
    # Halving keeps t4 and t6, but both are past the next milestone (9) already:
    # that is the last rung, so the bracket ends; nothing waits forever.
    assert driver.report(t7, 12, 2) == STOP
    assert all(t.status is TrialStatus.TERMINATED for t in trials[3:])


# ---------------------------------------------------------------------- choosing
def test_choose_prefers_the_least_complete_bracket():
    driver = Driver(make(max_t=9, reduction_factor=3))
    trials = driver.add(8)
    assert driver.start_next() is trials[0]  # both brackets at 0%: the first one
    driver.run_to(trials[0], 5, 1)
    # Bracket s=0 is 5/27 done (work 3 * 9 = 27); bracket s=1 is at 0%: its trial next.
    assert driver.start_next() is trials[3]


def test_choose_skips_trials_without_resources():
    driver = Driver(make(max_t=9, reduction_factor=3))
    trials = driver.add(2)
    driver.view.without_resources = {"t0"}
    assert driver.start_next() is trials[1]
    assert driver.scheduler.choose_trial_to_run(driver.view) is None


def test_paused_trials_wait_unless_promoted():
    driver, trials = nine_three()
    t3 = trials[3]
    assert driver.report(t3, 3, 1) == PAUSE
    assert driver.scheduler.choose_trial_to_run(driver.view) is None


# ---------------------------------------------------------------------- trials leaving
@pytest.mark.parametrize("how", ["error", "complete"])
def test_a_trial_leaving_lets_the_others_halve(how):
    driver, trials = nine_three()
    t3, t4, t5, t6, t7 = trials[3:]
    for trial, score in ((t3, 1), (t4, 5), (t5, 3), (t6, 4)):
        driver.report(trial, 3, score)
    if how == "error":
        driver.fail(t7)
    else:  # e.g. a stopper ended it before the milestone
        t7.set_status(TrialStatus.TERMINATED)
        driver.scheduler.on_trial_complete(driver.view, t7, {"t": 2, "score": 9})
        driver.settle()
    # Halving of the four left: keep ceil(5/3) = 2 (t4, t6), stop t3 and t5.
    assert sorted(driver.stopped_by_request) == ["t3", "t5"]
    assert driver.start_next() is t4


def test_last_rung_ends_when_the_running_trial_fails():
    driver, trials = nine_three()
    t0, t1, t2 = trials[:3]
    driver.run_to(t0, 9, 1)
    driver.run_to(t1, 4, 1)
    driver.fail(t1)
    assert t0.status is TrialStatus.PAUSED  # t2 still has to get there
    driver.fail(t2)
    assert t0.status is TrialStatus.TERMINATED  # nothing left to wait for


def test_dropped_trial_still_being_paused_is_stopped_once_paused():
    driver, trials = nine_three()
    t3, t4, t5, t6, t7 = trials[3:]
    for trial, score in ((t3, 1), (t4, 5), (t5, 3), (t6, 4)):
        driver.report(trial, 3, score)
    # The controller has not finished pausing t3 (dropped) and t6 (kept) yet.
    t3.set_status(TrialStatus.RUNNING)
    t6.set_status(TrialStatus.RUNNING)
    assert driver.report(t7, 3, 2) == STOP
    assert t3.status is TrialStatus.RUNNING  # the stop request was ignored
    t3.set_status(TrialStatus.PAUSED)  # pause done
    t6.set_status(TrialStatus.PAUSED)
    assert driver.start_next() is t4  # meanwhile the stop request is repeated
    assert t3.status is TrialStatus.TERMINATED
    assert driver.start_next() is t6


# ---------------------------------------------------------------------- checks
def test_missing_metric_or_time_attr_is_a_clear_error():
    driver, trials = nine_three()
    with pytest.raises(ValueError, match=r"without 'score' \(its `metric`\).*\['loss', 't'\]"):
        driver.scheduler.on_trial_result(driver.view, trials[0], {"t": 1, "loss": 2})
    with pytest.raises(ValueError, match=r"without 't' \(its `time_attr`\)"):
        driver.scheduler.on_trial_result(driver.view, trials[0], {"score": 1})
    with pytest.raises(ValueError, match=r"reported score='high' \(its `metric`\); it must be a"):
        driver.scheduler.on_trial_result(driver.view, trials[0], {"t": 1, "score": "high"})


def test_metric_and_mode_are_required():
    with pytest.raises(ValueError, match="has no `metric`"):
        HyperBandScheduler().set_search_properties(None, None)
    with pytest.raises(ValueError, match="has no `mode`"):
        HyperBandScheduler().set_search_properties("loss", None)
    with pytest.raises(ValueError, match="has no `mode`"):
        HyperBandScheduler(metric="loss").on_trial_add(View(), Trial("f", trial_id="a"))


def test_set_search_properties_as_ray():
    scheduler = HyperBandScheduler()
    assert scheduler.set_search_properties(None, "min")
    assert scheduler.metric == "_metric"  # Ray's anonymous metric
    own = HyperBandScheduler(metric="loss", mode="min")
    assert not own.set_search_properties("acc", None)  # a conflict
    assert own.set_search_properties("loss", "min")  # the same again (Tuner.restore)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_t": 0}, r"`max_t` must be a number >= 1 .*got 0\."),
        ({"max_t": 0.5}, "`max_t`"),
        ({"reduction_factor": 1}, r"`reduction_factor` must be a number > 1, got 1"),
        ({"mode": "minimize"}, r"`mode` must be 'min' or 'max', got 'minimize'"),
        ({"metric": ["a", "b"]}, "`metric` must be one result key"),
        ({"time_attr": ""}, "`time_attr`"),
        ({"stop_last_trials": "yes"}, "`stop_last_trials`"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        HyperBandScheduler(**kwargs)


def test_needs_a_decision_after_every_result():
    assert HyperBandScheduler().supports_buffered_results is False


# ---------------------------------------------------------------------- warnings
def test_warns_when_a_promoted_trial_has_no_checkpoint(caplog):
    driver, trials = nine_three()
    t3, t4, t5, t6, t7 = trials[3:]
    for trial, score in ((t3, 1), (t4, 5), (t5, 3), (t6, 4)):
        driver.report(trial, 3, score)
    t4.restore_path = None  # nothing was saved at its pause
    driver.report(t7, 3, 2)
    with caplog.at_level(logging.WARNING, logger="fasttune.schedulers.hyperband"):
        assert driver.start_next() is t4
        assert driver.start_next() is t6
    assert len(caplog.records) == 1
    assert "t4" in caplog.text and "no checkpoint was saved" in caplog.text


def test_warns_when_a_trial_fails_while_being_paused(caplog):
    driver, trials = nine_three()
    driver.report(trials[3], 3, 1)
    trials[3].error_msg = "NotImplementedError: no save_checkpoint"
    with caplog.at_level(logging.WARNING, logger="fasttune.schedulers.hyperband"):
        driver.fail(trials[4])  # an ordinary failure: no hint
        assert not caplog.records
        driver.fail(trials[3])
        driver.report(trials[5], 3, 1)
        driver.fail(trials[5])  # the same cause again: not repeated
    assert len(caplog.records) == 1
    assert "failed while HyperBandScheduler was pausing it" in caplog.text
    assert "save_checkpoint()" in caplog.text


# ---------------------------------------------------------------------- state
def restored_view(trials, missing=()):
    """New Trial records with the same ids, statuses as Tuner.restore sets them."""
    view = View()
    for old in trials:
        if old.trial_id in missing:
            continue
        trial = Trial("train", trial_id=old.trial_id)
        trial.status = old.status if old.is_finished() else TrialStatus.PENDING
        trial.restore_path = f"{old.trial_id}/latest"
        view.trials.append(trial)
    return view


def test_state_survives_a_restore():
    driver, trials = nine_three()
    for trial in trials[:3]:
        driver.run_to(trial, 9, 1)  # bracket s=0 done
    t3, t4, t5, t6 = trials[3:7]
    for trial, score in ((t3, 1), (t4, 5), (t5, 3)):
        driver.report(trial, 3, score)  # paused at the milestone
    driver.run_to(t6, 2, 4)  # running; t7 never reported (and is lost on restore)
    state = pickle.loads(pickle.dumps(driver.scheduler.get_state()))

    scheduler = make(max_t=9, reduction_factor=3)
    scheduler.set_state(state)
    view = restored_view(trials, missing={"t7"})
    after = Driver(scheduler, view)
    by_id = {t.trial_id: t for t in view.trials}
    # t3..t5 reached the milestone before: they wait; t6 runs on.
    assert after.start_next() is by_id["t6"]
    assert after.start_next() is None
    # t7 is gone, so t6 reaching 3 completes the rung: keep t4 (5) and t6 (4).
    assert after.report(by_id["t6"], 3, 4) == CONTINUE
    assert sorted(after.stopped_by_request) == ["t3", "t5"]
    assert after.start_next() is by_id["t4"]
    assert "num_stopped=2" in scheduler.debug_string()


def test_state_has_no_trial_objects():
    driver, _ = nine_three()
    state = driver.scheduler.get_state()
    assert b"fasttune.experiment.trial" not in pickle.dumps(state)
