"""RayExecutor: the conformance suite on a Ray cluster of this machine, plus actors."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'fasttune[ray]'")

import math  # noqa: E402
import os  # noqa: E402
import pickle  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

from fasttune.executors import TrialFailed, TrialStarted, TrialStopped  # noqa: E402
from fasttune.executors.ray_executor import RayExecutor  # noqa: E402
from fasttune.trainable import wrap_function  # noqa: E402
from tests.executors._trainables import (  # noqa: E402
    Counter,
    ThreadReporting,
    failing_fn,
    slow_cleanup_fn,
    thread_reporting_fn,
)
from tests.executors.conformance import *  # noqa: E402, F403
from tests.executors.conformance import (  # noqa: E402
    BIG,
    _run_trials,
    ended,
    has,
    n_results,
    of,
    results,
)


@pytest.fixture
def executor(ray_connected):
    executor = RayExecutor()
    yield executor
    executor.shutdown()


# ---------------------------------------------------------------------- actor deaths
def test_an_actor_killed_mid_trial_is_a_worker_died_event(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"sleep": 0.005}, initial_credit=BIG)
    executor.start_trial(launch)
    pid = results(wait_for(executor, n_results(launch.trial_id, 1)))[0]["worker_pid"]
    os.kill(pid, signal.SIGKILL)
    failed = wait_for(executor, ended(launch.trial_id))[-1]
    assert isinstance(failed, TrialFailed) and failed.exc_type == "WorkerDied"
    assert failed.during == "train" and "the Ray actor of trial" in failed.error
    # Ray's own error travels with it (Result.error, as in Ray Tune).
    assert isinstance(pickle.loads(failed.exception), ray.exceptions.RayActorError)
    assert executor.num_running == 0


def test_an_idle_actor_that_died_is_replaced_without_failing_the_next_trial(
    executor, make_launch, wait_for
):
    first = _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True)[0]
    os.kill(first["worker_pid"], signal.SIGKILL)  # it waits, idle, for the next trial
    time.sleep(0.5)
    second = _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True)[0]
    assert second["worker_pid"] != first["worker_pid"] and not second["reused"]


# ---------------------------------------------------------------------- where trials run
# A function trial that never waits for a decision (lookahead_s infinite: nothing on the
# driver decides per result) trains in a thread of the actor, on while Ray returns one
# call and starts the next; everything else runs in the actor's main thread, inside them.
NEVER_WAITS = {"initial_credit": BIG, "lookahead_s": math.inf, "stop_when_done": True}


def _threads(executor, make_launch, wait_for, trainable, config, **fields) -> set:
    launch = make_launch(trainable, config, **fields)
    executor.start_trial(launch)
    events = wait_for(executor, ended(launch.trial_id))
    assert isinstance(events[-1], TrialStopped), events[-1]
    return {(r["thread"], r["main_thread"]) for r in results(events)}


def test_a_function_trial_that_never_waits_trains_in_a_thread_of_its_actor(
    executor, make_launch, wait_for
):
    fn = wrap_function(thread_reporting_fn)
    for reuse in (False, True, True):  # a fresh actor, then one reused twice
        launch = make_launch(fn, {"n": 200}, reuse=reuse, **NEVER_WAITS)
        executor.start_trial(launch)
        events = wait_for(executor, ended(launch.trial_id))
        got = [r for r in results(events) if not r.get("__duplicate__")]
        assert [r["i"] for r in got] == list(range(200))  # every result, in order
        assert {(r["thread"], r["main_thread"]) for r in got} == {("fasttune-trial", False)}
        assert isinstance(events[-1], TrialStopped) and len(of(events, TrialStopped)) == 1
    assert executor.num_running == 0


def test_class_trials_and_trials_a_decision_may_stop_train_in_the_main_thread(
    executor, make_launch, wait_for
):
    main = {("MainThread", True)}
    assert (
        _threads(executor, make_launch, wait_for, ThreadReporting, {"n": 5}, **NEVER_WAITS) == main
    )
    fn = wrap_function(thread_reporting_fn)
    assert (
        _threads(
            executor, make_launch, wait_for, fn, {"n": 5}, initial_credit=BIG, stop_when_done=True
        )
        == main
    )


def test_a_function_trial_in_a_thread_fails_with_its_traceback(executor, make_launch, wait_for):
    launch = make_launch(wrap_function(failing_fn), **NEVER_WAITS)
    executor.start_trial(launch)
    failed = wait_for(executor, ended(launch.trial_id))[-1]
    assert isinstance(failed, TrialFailed) and "the function exploded" in failed.error
    assert failed.exc_type == "ValueError" and executor.num_running == 0


def test_a_function_trial_in_a_thread_stops_and_its_actor_shuts_down_mid_iteration(
    executor, make_launch, wait_for
):
    fn = wrap_function(thread_reporting_fn)
    stopped = make_launch(fn, {"n": 10**6, "sleep": 0.002}, **NEVER_WAITS)
    executor.start_trial(stopped)
    wait_for(executor, n_results(stopped.trial_id, 3))
    executor.stop_trial(stopped.trial_id)
    after = wait_for(executor, ended(stopped.trial_id))
    assert results(after) == [] and isinstance(after[-1], TrialStopped)
    # A trial in a long iteration when the run ends: shutdown() does not wait for it.
    busy = make_launch(fn, {"n": 2, "sleep": 600}, **NEVER_WAITS)
    executor.start_trial(busy)
    wait_for(executor, has(TrialStarted, busy.trial_id))
    executor.shutdown()
    assert executor.num_running == 0


def test_a_function_trial_in_a_thread_whose_actor_is_killed_is_a_worker_died_event(
    executor, make_launch, wait_for
):
    fn = wrap_function(thread_reporting_fn)
    launch = make_launch(fn, {"n": 10**6, "sleep": 0.005}, **NEVER_WAITS)
    executor.start_trial(launch)
    pid = results(wait_for(executor, n_results(launch.trial_id, 1)))[0]["worker_pid"]
    os.kill(pid, signal.SIGKILL)
    failed = wait_for(executor, ended(launch.trial_id))[-1]
    assert isinstance(failed, TrialFailed) and failed.exc_type == "WorkerDied"
    assert failed.during == "train" and executor.num_running == 0


def test_a_stop_reaches_its_end_when_the_trainable_cleans_up_slowly_in_its_thread(
    executor, make_launch, wait_for
):
    # The STOP call returns with the batch the stop interrupted; TrialStopped comes once
    # the function's cleanup is done: the driver keeps a call in flight to fetch it.
    launch = make_launch(wrap_function(slow_cleanup_fn), **NEVER_WAITS)
    executor.start_trial(launch)
    wait_for(executor, n_results(launch.trial_id, 3))
    executor.stop_trial(launch.trial_id)
    after = wait_for(executor, ended(launch.trial_id))
    assert isinstance(after[-1], TrialStopped) and executor.num_running == 0
