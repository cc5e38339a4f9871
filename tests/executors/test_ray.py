"""RayExecutor: the conformance suite on a Ray cluster of this machine, plus actors."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'fasttune[ray]'")

import os  # noqa: E402
import pickle  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

from fasttune.executors import TrialFailed  # noqa: E402
from fasttune.executors.ray_executor import RayExecutor  # noqa: E402
from tests.executors._trainables import Counter  # noqa: E402
from tests.executors.conformance import *  # noqa: E402, F403
from tests.executors.conformance import (  # noqa: E402
    BIG,
    _run_trials,
    ended,
    n_results,
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
