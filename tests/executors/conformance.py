"""Conformance suite: what every executor must do.

Each test takes an ``executor`` fixture; ``test_local.py`` and ``test_inline.py``
import these tests and define the fixture.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import time
from collections.abc import Callable

import pytest

from fasttune.executors import (
    Event,
    TrialFailed,
    TrialResults,
    TrialSaved,
    TrialStarted,
    TrialStopped,
)
from fasttune.executors.worker_commands import RESET_WARNING
from fasttune.trainable import wrap_function
from tests.executors._trainables import (
    Counter,
    Failing,
    NoReset,
    counting_fn,
    failing_fn,
)

BIG = 10**9


# ---------------------------------------------------------------------- helpers
def of(events: list[Event], kind: type, trial_id: str | None = None) -> list:
    return [e for e in events if isinstance(e, kind) and trial_id in (None, e.trial_id)]


def results(events: list[Event], trial_id: str | None = None) -> list[dict]:
    return [r for e in of(events, TrialResults, trial_id) for r in e.results]


def ended(trial_id: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(
        isinstance(e, (TrialStopped, TrialFailed)) and e.trial_id == trial_id for e in events
    )


def has(kind: type, trial_id: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(isinstance(e, kind) and e.trial_id == trial_id for e in events)


def done(trial_id: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(r.get("done") for r in results(events, trial_id))


def n_results(trial_id: str, n: int) -> Callable[[list[Event]], bool]:
    return lambda events: len(results(events, trial_id)) >= n


def stop_and_wait(executor, wait_for, trial_id: str) -> list[Event]:
    executor.stop_trial(trial_id)
    return wait_for(executor, ended(trial_id))


# ---------------------------------------------------------------------- results
def test_class_trainable_results_arrive_in_order_and_complete(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"stop_at": 5000}, initial_credit=BIG)
    executor.start_trial(launch)
    events = wait_for(executor, done(launch.trial_id))
    assert isinstance(events[0], TrialStarted)
    assert [r["count"] for r in results(events)] == list(range(1, 5001))
    assert [r["training_iteration"] for r in results(events)] == list(range(1, 5001))
    assert all(e.results for e in of(events, TrialResults))
    assert isinstance(stop_and_wait(executor, wait_for, launch.trial_id)[-1], TrialStopped)
    assert executor.num_running == 0


def test_function_trainable_runs_to_completion(executor, make_launch, wait_for):
    launch = make_launch(wrap_function(counting_fn), {"n": 10}, initial_credit=100)
    executor.start_trial(launch)
    events = wait_for(executor, done(launch.trial_id))
    got = results(events)
    assert [r["i"] for r in got[:10]] == list(range(10))
    assert got[-1]["__duplicate__"] and len(got) == 11
    stop_and_wait(executor, wait_for, launch.trial_id)


def test_two_trials_run_side_by_side(executor, make_launch, wait_for):
    a = make_launch(Counter, {"stop_at": 50}, initial_credit=BIG)
    b = make_launch(Counter, {"stop_at": 30}, initial_credit=BIG)
    executor.start_trial(a)
    executor.start_trial(b)
    assert executor.num_running == 2
    events = wait_for(executor, lambda ev: done(a.trial_id)(ev) and done(b.trial_id)(ev))
    assert [r["count"] for r in results(events, a.trial_id)] == list(range(1, 51))
    assert [r["count"] for r in results(events, b.trial_id)] == list(range(1, 31))
    assert all(r["trial_id"] == b.trial_id for r in results(events, b.trial_id))


def test_done_result_stops_training(executor, make_launch, wait_for, tmp_path):
    log = tmp_path / "steps.log"
    launch = make_launch(Counter, {"stop_at": 3, "step_log": str(log)}, initial_credit=BIG)
    executor.start_trial(launch)
    events = wait_for(executor, done(launch.trial_id))
    executor.save_trial(launch.trial_id)
    events += wait_for(executor, has(TrialSaved, launch.trial_id))
    assert len(results(events)) == 3
    assert log.read_text().split() == ["1", "2", "3"]


# ---------------------------------------------------------------------- flow control
def test_a_trial_that_stops_when_done_needs_no_stop_command(executor, make_launch, wait_for):
    # What a run where nothing decides on results launches (local and Ray alike).
    launch = make_launch(Counter, {"stop_at": 3}, initial_credit=BIG, stop_when_done=True)
    executor.start_trial(launch)
    events = wait_for(executor, ended(launch.trial_id))  # stop_trial is never called
    assert [r["count"] for r in results(events)] == [1, 2, 3]
    assert of(events, TrialStopped, launch.trial_id) and not of(events, TrialFailed)


def test_credit_one_gives_one_result_then_waits(executor, make_launch, wait_for, tmp_path):
    log = tmp_path / "steps.log"
    launch = make_launch(Counter, {"step_log": str(log)}, initial_credit=1, lookahead_s=math.inf)
    executor.start_trial(launch)
    events = wait_for(executor, n_results(launch.trial_id, 1), ack=False)
    executor.save_trial(launch.trial_id)  # handled after any step the worker runs
    events += wait_for(executor, has(TrialSaved, launch.trial_id), ack=False)
    assert len(results(events)) == 1
    assert of(events, TrialSaved)[0].iteration == 1
    assert log.read_text().split() == ["1"]


def test_worker_never_runs_more_than_its_credit_ahead(executor, make_launch, wait_for, tmp_path):
    log = tmp_path / "steps.log"
    launch = make_launch(Counter, {"step_log": str(log)}, initial_credit=3, lookahead_s=math.inf)
    executor.start_trial(launch)
    events = wait_for(executor, n_results(launch.trial_id, 3), ack=False)
    executor.save_trial(launch.trial_id)
    events += wait_for(executor, has(TrialSaved, launch.trial_id), ack=False)
    assert len(log.read_text().split()) == 3
    executor.grant(launch.trial_id, 2)
    # counts new events only
    events += wait_for(executor, n_results(launch.trial_id, 2), ack=False)
    executor.save_trial(launch.trial_id)
    events += wait_for(executor, has(TrialSaved, launch.trial_id), ack=False)
    assert len(log.read_text().split()) == 5
    assert [r["count"] for r in results(events)] == [1, 2, 3, 4, 5]
    assert [s.iteration for s in of(events, TrialSaved)] == [3, 5]


def _stop_at_count(executor, trial_id: str, count: int, timeout: float = 15.0) -> list[Event]:
    """Drive a trial as the controller does: acknowledge each batch, or stop the trial
    once a result has ``count`` (before acknowledging it). Each decision takes 10 ms, so
    a worker that does not wait for it has time to start another iteration."""
    events: list[Event] = []
    stopping = False
    deadline = time.monotonic() + timeout
    while not ended(trial_id)(events):
        assert time.monotonic() < deadline, f"timed out; events so far: {events!r}"[:3000]
        polled = executor.poll(0.05)
        for event in of(polled, TrialResults, trial_id):
            if stopping:
                continue
            time.sleep(0.01)
            if event.results[-1]["count"] >= count:
                executor.stop_trial(trial_id)
                stopping = True
            else:
                executor.grant(trial_id, len(event.results))
        events += polled
    return events


def test_slow_iterations_wait_for_the_decision_on_each_result(executor, make_launch, tmp_path):
    log = tmp_path / "steps.log"
    config = {"sleep": 0.05, "step_log": str(log)}  # iterations over LOOKAHEAD_S
    launch = make_launch(Counter, config, initial_credit=BIG)
    executor.start_trial(launch)
    events = _stop_at_count(executor, launch.trial_id, 3)
    assert [r["count"] for r in results(events)] == [1, 2, 3]
    assert [len(e.results) for e in of(events, TrialResults)] == [1, 1, 1]
    assert log.read_text().split() == ["1", "2", "3"]  # not one iteration more


def test_fast_iterations_run_ahead_between_acknowledgements(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"stop_at": 2000}, initial_credit=64)
    executor.start_trial(launch)
    events = wait_for(executor, done(launch.trial_id))
    assert len(results(events)) == 2000
    # Ahead of the acknowledgements: many results a message (about 50 here).
    assert 2000 / len(of(events, TrialResults)) > 2


def test_a_waiting_grant_does_not_end_a_batch(executor, make_launch, wait_for):
    # wait_for answers every batch with a grant, as the controller does; were a waiting
    # grant to end the next batch, batches would shrink to a round trip's worth.
    config = {"stop_at": 2000}
    launch = make_launch(
        Counter, config, initial_credit=BIG, lookahead_s=math.inf, max_buffer_length=500,
        buffer_time_s=60.0,
    )  # fmt: skip
    executor.start_trial(launch)
    events = wait_for(executor, done(launch.trial_id))
    assert [len(e.results) for e in of(events, TrialResults)] == [500] * 4


def test_batches_respect_max_buffer_length(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"stop_at": 100}, initial_credit=BIG, max_buffer_length=7)
    executor.start_trial(launch)
    events = wait_for(executor, done(launch.trial_id))
    assert max(len(e.results) for e in of(events, TrialResults)) <= 7
    assert len(results(events)) == 100


def test_zero_buffer_time_sends_every_result_alone(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"stop_at": 20}, initial_credit=BIG, buffer_time_s=0.0)
    executor.start_trial(launch)
    events = wait_for(executor, done(launch.trial_id))
    assert [len(e.results) for e in of(events, TrialResults)] == [1] * 20


def test_reported_checkpoint_ends_a_batch(executor, make_launch, wait_for, tmp_path):
    config = {"n": 9, "checkpoint_every": 3, "scratch": str(tmp_path / "scratch")}
    launch = make_launch(wrap_function(counting_fn), config, initial_credit=BIG)
    executor.start_trial(launch)
    events = wait_for(executor, done(launch.trial_id))
    for event in of(events, TrialResults):
        marked = [i for i, r in enumerate(event.results) if r.get("checkpoint_dir_name")]
        assert marked in ([], [len(event.results) - 1])
    fresh = [r for r in results(events) if not r.get("__duplicate__")]
    names = [r["checkpoint_dir_name"] for r in fresh if r.get("checkpoint_dir_name")]
    assert len(names) == 3
    assert all(os.path.isdir(os.path.join(launch.trial_dir, n)) for n in names)


# ---------------------------------------------------------------------- checkpoints
def test_save_returns_a_checkpoint_directory(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"stop_at": 3}, initial_credit=BIG)
    executor.start_trial(launch)
    wait_for(executor, done(launch.trial_id))
    executor.save_trial(launch.trial_id)
    saved = of(wait_for(executor, has(TrialSaved, launch.trial_id)), TrialSaved)[0]
    assert saved.iteration == 3
    assert os.path.dirname(saved.checkpoint_path.rstrip("/")) == launch.trial_dir.rstrip("/")
    with open(os.path.join(saved.checkpoint_path, "count.txt")) as f:
        assert f.read() == "3"


def test_restore_path_restores_counters(executor, make_launch, wait_for):
    first = make_launch(Counter, {"stop_at": 3}, initial_credit=BIG)
    executor.start_trial(first)
    wait_for(executor, done(first.trial_id))
    executor.save_trial(first.trial_id)
    saved = of(wait_for(executor, has(TrialSaved, first.trial_id)), TrialSaved)[0]
    stop_and_wait(executor, wait_for, first.trial_id)

    second = make_launch(
        Counter, {"stop_at": 5}, restore_path=saved.checkpoint_path, initial_credit=BIG
    )
    executor.start_trial(second)
    events = wait_for(executor, done(second.trial_id))
    assert [r["count"] for r in results(events)] == [4, 5]
    assert [r["training_iteration"] for r in results(events)] == [4, 5]


def test_failed_save_is_reported(executor, make_launch, wait_for):
    launch = make_launch(Failing, {"fail_at": 100}, initial_credit=1)
    executor.start_trial(launch)
    wait_for(executor, n_results(launch.trial_id, 1))
    executor.save_trial(launch.trial_id)
    failed = of(wait_for(executor, ended(launch.trial_id)), TrialFailed)[0]
    assert failed.during == "save" and failed.exc_type == "NotImplementedError"
    assert executor.num_running == 0


# ---------------------------------------------------------------------- stopping
def test_stop_drops_results_produced_after_it(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"sleep": 0.001}, initial_credit=BIG, buffer_time_s=0.0)
    executor.start_trial(launch)
    wait_for(executor, n_results(launch.trial_id, 3))
    executor.stop_trial(launch.trial_id)
    after = wait_for(executor, ended(launch.trial_id))
    assert results(after) == []
    assert isinstance(after[-1], TrialStopped)
    assert executor.num_running == 0


def test_kill_trial_sends_no_event(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"sleep": 0.001}, initial_credit=BIG)
    other = make_launch(Counter, {"stop_at": 5}, initial_credit=BIG)
    executor.start_trial(launch)
    wait_for(executor, n_results(launch.trial_id, 1))
    executor.kill_trial(launch.trial_id)
    assert executor.num_running == 0
    executor.start_trial(other)
    events = wait_for(executor, done(other.trial_id))
    assert all(e.trial_id == other.trial_id for e in events)


def test_commands_for_unknown_trials_are_ignored(executor, make_launch, wait_for):
    executor.grant("nope", 3)
    executor.save_trial("nope")
    executor.stop_trial("nope")
    executor.kill_trial("nope")
    assert executor.poll(0) == []


def test_starting_a_running_trial_twice_is_refused(executor, make_launch, wait_for):
    launch = make_launch(Counter)
    executor.start_trial(launch)
    with pytest.raises(ValueError, match="already running"):
        executor.start_trial(launch)
    stop_and_wait(executor, wait_for, launch.trial_id)


def test_shutdown_stops_everything(executor, make_launch, wait_for):
    executor.start_trial(make_launch(Counter, {"sleep": 0.001}, initial_credit=BIG))
    executor.start_trial(make_launch(Counter, {"sleep": 0.001}, initial_credit=BIG))
    wait_for(executor, lambda ev: len(of(ev, TrialStarted)) == 2)
    executor.shutdown()
    assert executor.num_running == 0
    with pytest.raises(RuntimeError, match="shutdown"):
        executor.start_trial(make_launch(Counter))


# ---------------------------------------------------------------------- failures
def test_exception_in_step_reports_the_traceback(executor, make_launch, wait_for):
    launch = make_launch(Failing, {"fail_at": 3}, initial_credit=BIG)
    executor.start_trial(launch)
    events = wait_for(executor, ended(launch.trial_id))
    failed = events[-1]
    assert isinstance(failed, TrialFailed)
    assert failed.exc_type == "ValueError" and failed.during == "train"
    assert "Traceback" in failed.error and "boom at 3" in failed.error
    assert "_trainables.py" in failed.error  # the user's frame is in the text
    assert str(pickle.loads(failed.exception)) == "boom at 3"
    assert len(results(events)) == 2  # the results before the failure arrive
    assert executor.num_running == 0


def test_exception_in_function_reports_the_traceback(executor, make_launch, wait_for):
    launch = make_launch(wrap_function(failing_fn), initial_credit=BIG)
    executor.start_trial(launch)
    failed = wait_for(executor, ended(launch.trial_id))[-1]
    assert isinstance(failed, TrialFailed) and failed.exc_type == "ValueError"
    assert "failing_fn" in failed.error and "the function exploded" in failed.error


def test_unpicklable_exception_is_still_reported(executor, make_launch, wait_for):
    launch = make_launch(Failing, {"bad": True}, initial_credit=BIG)
    executor.start_trial(launch)
    failed = wait_for(executor, ended(launch.trial_id))[-1]
    assert isinstance(failed, TrialFailed)
    assert failed.exc_type == "BadError" and "bad-error" in failed.error
    assert failed.exception is None


def test_exception_in_setup_fails_during_start(executor, make_launch, wait_for):
    launch = make_launch(Failing, {"fail_in_setup": True})
    executor.start_trial(launch)
    events = wait_for(executor, ended(launch.trial_id))
    assert of(events, TrialStarted) == []
    assert events[-1].during == "start" and "setup exploded" in events[-1].error
    assert executor.num_running == 0


def test_bad_restore_path_fails_during_restore(executor, make_launch, wait_for, tmp_path):
    launch = make_launch(Counter, restore_path=str(tmp_path / "missing"))
    executor.start_trial(launch)
    failed = wait_for(executor, ended(launch.trial_id))[-1]
    assert isinstance(failed, TrialFailed) and failed.during == "restore"


# ---------------------------------------------------------------------- reuse
def _run_trials(executor, make_launch, wait_for, cls, n: int, **fields) -> list[dict]:
    """Run ``n`` trials one after another; return the first result of each."""
    firsts = []
    for _ in range(n):
        launch = make_launch(cls, {"stop_at": 2}, initial_credit=BIG, **fields)
        executor.start_trial(launch)
        events = wait_for(executor, done(launch.trial_id))
        events += stop_and_wait(executor, wait_for, launch.trial_id)
        assert isinstance(events[-1], TrialStopped)
        first = results(events)[0]
        first["reused"] = of(events, TrialStarted)[0].reused
        firsts.append(first)
    return firsts


def test_reuse_resets_the_live_trainable(executor, make_launch, wait_for):
    firsts = _run_trials(executor, make_launch, wait_for, Counter, 3, reuse=True)
    assert len({r["token"] for r in firsts}) == 1  # one Trainable, set up once
    assert [r["reused"] for r in firsts] == [False, True, True]
    assert [r["count"] for r in firsts] == [1, 1, 1]  # reset_config ran
    assert [r["trial_id"] for r in firsts] == [f"trial_{i}" for i in range(3)]


def test_reuse_without_reset_config_builds_fresh_trainables(
    executor, make_launch, wait_for, caplog
):
    with caplog.at_level(logging.WARNING):
        firsts = _run_trials(executor, make_launch, wait_for, NoReset, 3, reuse=True)
    assert len({r["token"] for r in firsts}) == 3
    assert [r["reused"] for r in firsts] == [False, False, False]
    warnings = [r for r in caplog.records if r.msg == RESET_WARNING]
    assert len(warnings) == 1 and "reset_config" in warnings[0].getMessage()


def test_without_reuse_every_trial_gets_a_fresh_trainable(executor, make_launch, wait_for):
    firsts = _run_trials(executor, make_launch, wait_for, Counter, 3)
    assert len({r["token"] for r in firsts}) == 3
    assert not any(r["reused"] for r in firsts)


def test_reuse_needs_the_same_trainable_key(executor, make_launch, wait_for):
    a = _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True, key="a")
    b = _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True, key="b")
    assert a[0]["token"] != b[0]["token"] and not b[0]["reused"]
