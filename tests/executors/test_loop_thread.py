"""A worker loop in a thread of its own (what a Ray actor runs a function trainable in),
fed by exchanges from another thread: no Ray needed."""

from __future__ import annotations

import math
import pickle
import threading

import pytest

from fasttune.executors import TrialFailed, TrialResults, TrialStarted, TrialStopped
from fasttune.executors._loop_thread import LoopThread, ThreadTransport
from fasttune.executors.worker_commands import GRANT, START, STOP
from fasttune.executors.worker_loop import WorkerLoop
from fasttune.trainable import wrap_function
from tests.executors._trainables import failing_fn, thread_reporting_fn

BIG = 10**9


@pytest.fixture
def loop_thread():
    # Not isolated: the loop leaves this process's directory and environment alone.
    made = LoopThread(lambda transport: WorkerLoop(transport, isolated=False), name="under-test")
    yield made
    made.stop(5.0)


def exchange_until(loop_thread: LoopThread, kind: type, commands=()) -> list:
    """Exchange until an event of ``kind`` came, returning every event."""
    events: list = []
    pending = list(commands)
    for _ in range(10_000):
        blobs, _ = loop_thread.exchange(pending)
        pending = []
        events += [pickle.loads(b) for b in blobs]
        if any(isinstance(e, kind) for e in events):
            return events
    raise AssertionError(f"no {kind.__name__} in {events!r}"[:2000])


def results(events: list) -> list[dict]:
    return [r for e in events if isinstance(e, TrialResults) for r in e.results]


def test_a_function_trial_runs_in_the_loop_thread_and_every_result_comes_back(
    loop_thread, make_launch
):
    launch = make_launch(
        wrap_function(thread_reporting_fn),
        {"n": 300},
        initial_credit=BIG,
        lookahead_s=math.inf,
        stop_when_done=True,
    )
    events = exchange_until(loop_thread, TrialStopped, [(START, launch)])
    assert isinstance(events[0], TrialStarted)
    got = [r for r in results(events) if not r.get("__duplicate__")]
    assert [r["i"] for r in got] == list(range(300))
    assert {r["thread"] for r in got} == {"under-test"} and not any(r["main_thread"] for r in got)
    assert isinstance(events[-1], TrialStopped)
    # Stopped, the loop waits for a command: an exchange answers at once that it cannot train.
    assert loop_thread.exchange([]) == ([], False)


def test_a_loop_out_of_credit_says_so_and_a_grant_lets_it_train_on(loop_thread, make_launch):
    launch = make_launch(
        wrap_function(thread_reporting_fn), {"n": 3}, initial_credit=1, lookahead_s=math.inf
    )
    events = exchange_until(loop_thread, TrialResults, [(START, launch)])
    assert [r["i"] for r in results(events)] == [0]
    assert loop_thread.exchange([]) == ([], False)  # one result run ahead: no more
    events = exchange_until(loop_thread, TrialResults, [(GRANT, 1)])
    assert [r["i"] for r in results(events)] == [1]


def test_a_stop_reaches_a_trial_training_in_the_thread(loop_thread, make_launch):
    launch = make_launch(
        wrap_function(thread_reporting_fn),
        {"n": 10**6, "sleep": 0.001},
        initial_credit=BIG,
        lookahead_s=math.inf,
    )
    exchange_until(loop_thread, TrialResults, [(START, launch)])
    events = exchange_until(loop_thread, TrialStopped, [(STOP, None)])
    assert isinstance(events[-1], TrialStopped)
    assert loop_thread.exchange([]) == ([], False)


def test_the_functions_error_fails_its_trial_and_ends_the_loop(loop_thread, make_launch):
    launch = make_launch(wrap_function(failing_fn), initial_credit=BIG, lookahead_s=math.inf)
    events = exchange_until(loop_thread, TrialFailed, [(START, launch)])
    assert "the function exploded" in events[-1].error
    assert loop_thread.exchange([]) == ([], False)  # retired: it hosts nothing more


def test_an_error_of_the_loop_itself_is_raised_by_the_next_exchange(loop_thread):
    with pytest.raises(RuntimeError, match="worker loop's thread failed") as caught:
        loop_thread.exchange([("no such command", None)])
    assert "unknown worker command" in str(caught.value.__cause__)


def test_stop_waits_for_the_loop_only_so_long(loop_thread, make_launch):
    launch = make_launch(
        wrap_function(thread_reporting_fn),
        {"n": 1, "sleep": 2},
        initial_credit=BIG,
        lookahead_s=math.inf,
    )
    exchange_until(loop_thread, TrialStarted, [(START, launch)])
    assert loop_thread.stop(0.1) is False  # still in its 2 s iteration
    assert loop_thread.stop(30) is True  # which it ends, then exits


def test_an_idle_loop_stops_at_once():
    transport_seen: list[ThreadTransport] = []

    def make(transport: ThreadTransport) -> WorkerLoop:
        transport_seen.append(transport)
        return WorkerLoop(transport, isolated=False)

    made = LoopThread(make, name="idle")
    assert made.exchange([]) == ([], False)
    assert made.stop(5.0) is True
    assert not any(t.name == "idle" for t in threading.enumerate())


def test_events_sent_before_the_loop_failed_come_back_before_its_error(loop_thread, make_launch):
    launch = make_launch(
        wrap_function(thread_reporting_fn), {"n": 5}, initial_credit=BIG, lookahead_s=math.inf
    )
    events: list = []
    with pytest.raises(RuntimeError, match="worker loop's thread failed"):
        pending = [(START, launch), ("no such command", None)]
        for _ in range(1000):
            blobs, can_train = loop_thread.exchange(pending)
            pending = []
            events += [pickle.loads(b) for b in blobs]
            assert can_train  # so that the driver calls again, and hears of the failure
    assert isinstance(events[0], TrialStarted)
