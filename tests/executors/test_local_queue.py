"""LocalExecutor: trials queued behind a running one (``Executor.queue_trial``)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time

import pytest

from fasttune.executors import (
    LocalExecutor,
    TrialFailed,
    TrialStarted,
    TrialStopped,
    TrialUnqueued,
)
from fasttune.executors.worker_commands import join_events, split_events
from tests.executors._trainables import Counter, Failing, GatedReset
from tests.executors.conformance import BIG, ended, has, n_results, of, results


@pytest.fixture
def executor():
    executor = LocalExecutor()
    yield executor
    executor.shutdown()


@pytest.fixture
def launch_of(make_launch):
    """A reusable Counter launch that stops by itself after ``stop_at`` iterations."""

    def make(stop_at: int | None = None, **config):
        if stop_at is not None:
            config["stop_at"] = stop_at
        return make_launch(
            Counter, config, initial_credit=BIG, reuse=True, stop_when_done=True, key="counter"
        )

    return make


def _stopped(events, trial_id: str) -> TrialStopped:
    (stopped,) = of(events, TrialStopped, trial_id)
    return stopped


def test_a_queued_trial_starts_on_the_worker_where_the_trial_ahead_stops(
    executor, launch_of, wait_for
):
    ahead, queued = launch_of(stop_at=3, sleep=0.05), launch_of(stop_at=2)
    executor.start_trial(ahead)
    assert executor.queue_trial(ahead.trial_id, queued)
    events = wait_for(executor, ended(queued.trial_id))
    assert _stopped(events, ahead.trial_id).successor == queued.trial_id
    assert _stopped(events, queued.trial_id).successor is None
    first = next(type(e) for e in events if e.trial_id == queued.trial_id)
    assert first is TrialStarted  # after the TrialStopped naming it
    assert events.index(_stopped(events, ahead.trial_id)) < events.index(
        of(events, TrialStarted, queued.trial_id)[0]
    )
    assert [r["count"] for r in results(events, queued.trial_id)] == [1, 2]
    pids = {r["worker_pid"] for r in results(events)}
    assert len(pids) == 1  # the same worker, its Trainable reset
    assert of(events, TrialStarted, queued.trial_id)[0].reused
    assert executor.num_running == 0


def test_a_queue_command_that_comes_after_the_trial_ahead_stopped_starts_it_there(
    executor, launch_of, wait_for
):
    ahead, queued = launch_of(stop_at=1), launch_of(stop_at=1)
    executor.start_trial(ahead)
    time.sleep(1.0)  # the trial ahead ends; its events wait, unread, in the pipe
    assert executor.queue_trial(ahead.trial_id, queued)
    events = wait_for(executor, ended(queued.trial_id))
    # The worker had no trial when the command came, so it started it at once: its
    # earlier TrialStopped is read as handing over, as if the worker had waited.
    assert _stopped(events, ahead.trial_id).successor == queued.trial_id
    assert [r["count"] for r in results(events, queued.trial_id)] == [1]
    assert executor.num_running == 0


def test_trials_queued_behind_one_start_in_turn_and_one_past_the_depth_is_refused(
    executor, launch_of, wait_for
):
    ahead = launch_of(stop_at=2, sleep=0.05)
    queued = [launch_of(stop_at=1) for _ in range(executor.queue_depth)]
    refused = launch_of(stop_at=1)
    executor.start_trial(ahead)
    for launch in queued:
        assert executor.queue_trial(ahead.trial_id, launch)
    assert not executor.queue_trial(ahead.trial_id, refused)
    events = wait_for(executor, ended(queued[-1].trial_id))
    chain = [ahead, *queued]
    for before, after in itertools.pairwise(chain):
        assert _stopped(events, before.trial_id).successor == after.trial_id
    assert _stopped(events, queued[-1].trial_id).successor is None
    assert not of(events, TrialStarted, refused.trial_id)


def test_a_trials_end_reaches_the_driver_before_the_next_trials_reset_config_returns(
    executor, make_launch, wait_for, tmp_path
):
    # A worker sends a trial's last results, its end and the next trial's start as one
    # message, but never holds them while user code runs: here the next trial's
    # reset_config waits until the driver has seen the first trial end.
    gate = tmp_path / "gate"
    ahead = make_launch(GatedReset, {"stop_at": 2}, initial_credit=BIG, reuse=True,
                        stop_when_done=True, key="gated")  # fmt: skip
    queued = make_launch(GatedReset, {"stop_at": 1, "gate": str(gate)}, initial_credit=BIG,
                         reuse=True, stop_when_done=True, key="gated")  # fmt: skip
    executor.start_trial(ahead)
    assert executor.queue_trial(ahead.trial_id, queued)
    events = wait_for(executor, ended(ahead.trial_id))
    assert [r["count"] for r in results(events, ahead.trial_id)] == [1, 2]
    assert _stopped(events, ahead.trial_id).successor == queued.trial_id
    assert not of(events, TrialStarted, queued.trial_id)  # still in reset_config
    gate.touch()
    events = wait_for(executor, ended(queued.trial_id))
    assert of(events, TrialStarted, queued.trial_id)[0].reused
    assert [r["count"] for r in results(events, queued.trial_id)] == [1]


def test_events_joined_in_one_message_come_apart_in_order():
    import pickle

    events = [TrialStopped("a", successor="b"), TrialStarted("b", reused=True)]
    pickled = [pickle.dumps(event, protocol=5) for event in events]
    assert split_events(join_events(pickled)) == events
    assert join_events(pickled[:1]) == pickled[0]  # one event travels as it is
    assert split_events(pickled[0]) == events[:1]


def test_a_trial_taken_back_from_behind_a_long_iteration_never_starts_there(
    executor, launch_of, wait_for
):
    ahead, queued = launch_of(stop_at=1, sleep=2.0), launch_of(stop_at=1)
    executor.start_trial(ahead)
    wait_for(executor, has(TrialStarted, ahead.trial_id))
    assert executor.queue_trial(ahead.trial_id, queued)
    started = time.monotonic()
    # The worker is inside its 2 s iteration and reads no command: taking the trial
    # back does not wait for it.
    assert executor.unqueue_trial(queued.trial_id)
    assert time.monotonic() - started < 0.5
    assert not executor.unqueue_trial(queued.trial_id)  # not queued any more
    events = wait_for(executor, ended(ahead.trial_id))
    assert _stopped(events, ahead.trial_id).successor is None
    assert not [e for e in events if e.trial_id == queued.trial_id]
    executor.start_trial(queued)  # it can run anywhere now
    assert [r["count"] for r in results(wait_for(executor, ended(queued.trial_id)))] == [1]


def test_a_trial_that_started_behind_its_trial_ahead_cannot_be_taken_back(
    executor, launch_of, wait_for
):
    ahead, queued = launch_of(stop_at=1), launch_of(sleep=0.01)
    executor.start_trial(ahead)
    assert executor.queue_trial(ahead.trial_id, queued)
    wait_for(executor, n_results(queued.trial_id, 1))
    assert not executor.unqueue_trial(queued.trial_id)
    executor.stop_trial(queued.trial_id)
    wait_for(executor, ended(queued.trial_id))


def test_a_trial_queued_behind_one_that_fails_is_given_back(executor, make_launch, wait_for):
    ahead = make_launch(Failing, {"fail_at": 2}, initial_credit=BIG, reuse=True, key="k")
    queued = make_launch(Failing, {"fail_at": 5}, initial_credit=BIG, reuse=True, key="k")
    executor.start_trial(ahead)
    assert executor.queue_trial(ahead.trial_id, queued)
    events = wait_for(executor, has(TrialUnqueued, queued.trial_id))
    assert isinstance(of(events, TrialFailed, ahead.trial_id)[0], TrialFailed)
    assert not of(events, TrialStarted, queued.trial_id)
    assert len(of(events, TrialUnqueued, queued.trial_id)) == 1


def test_a_trial_queued_behind_a_worker_that_dies_is_given_back(executor, launch_of, wait_for):
    ahead, queued = launch_of(sleep=0.01), launch_of(stop_at=1)
    executor.start_trial(ahead)
    pid = results(wait_for(executor, n_results(ahead.trial_id, 1)))[0]["worker_pid"]
    assert executor.queue_trial(ahead.trial_id, queued)
    os.kill(pid, signal.SIGKILL)
    events = wait_for(executor, has(TrialUnqueued, queued.trial_id))
    events += wait_for(executor, ended(ahead.trial_id)) if not ended(ahead.trial_id)(events) else []
    assert of(events, TrialFailed, ahead.trial_id)[0].exc_type == "WorkerDied"
    assert not of(events, TrialStarted, queued.trial_id)


def test_a_trial_is_queued_only_behind_a_reusable_trial_of_its_trainable(
    executor, make_launch, launch_of, wait_for
):
    ahead = launch_of(sleep=0.01)
    executor.start_trial(ahead)
    wait_for(executor, n_results(ahead.trial_id, 1))
    not_reused = make_launch(Counter, {}, reuse=False, key="counter")
    other_key = make_launch(Counter, {}, reuse=True, key="another")
    assert not executor.queue_trial(ahead.trial_id, not_reused)
    assert not executor.queue_trial(ahead.trial_id, other_key)
    assert not executor.queue_trial("no_such_trial", launch_of(stop_at=1))
    executor.stop_trial(ahead.trial_id)
    wait_for(executor, ended(ahead.trial_id))


def test_claim_folders_of_drivers_that_died_are_removed_by_the_next_one(tmp_path):
    from fasttune.executors import _claims

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"fasttune-claims-{dead.pid}-abc"
    live = tmp_path / f"fasttune-claims-{os.getpid()}-def"
    unrelated = tmp_path / "fasttune-claims-notapid"
    for folder in (stale, live, unrelated):
        folder.mkdir()
        (folder / "t_1.1").touch()
    _claims.remove_dead_drivers_claims(str(tmp_path))
    assert not stale.exists()
    assert live.exists() and unrelated.exists()
