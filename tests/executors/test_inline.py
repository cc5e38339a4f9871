"""InlineExecutor: the conformance suite, plus what only running in-process means."""

from __future__ import annotations

import math
import os

import pytest

from fasttune.executors import Allocation, InlineExecutor
from tests.executors._trainables import Counter
from tests.executors.conformance import *  # noqa: F403
from tests.executors.conformance import BIG, done, results


@pytest.fixture
def executor():
    executor = InlineExecutor()
    yield executor
    executor.shutdown()


def test_driver_directory_and_environment_are_left_alone(executor, make_launch, wait_for):
    before_cwd = os.getcwd()
    before_cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    launch = make_launch(
        Counter, {"stop_at": 1}, initial_credit=BIG, allocation=Allocation(gpu_ids=("7",))
    )
    executor.start_trial(launch)
    result = results(wait_for(executor, done(launch.trial_id)))[0]
    assert result["cwd"] == before_cwd == os.getcwd()
    assert result["cuda"] == before_cuda == os.environ.get("CUDA_VISIBLE_DEVICES")
    assert result["worker_pid"] == os.getpid()


def test_poll_without_trials_returns_at_once(executor):
    assert executor.poll(None) == []


def test_each_poll_trains_each_trial_one_batch(executor, make_launch):
    # No lookahead bound: a slow (preempted) first step must not end the batch.
    fields = {"initial_credit": BIG, "max_buffer_length": 4, "lookahead_s": math.inf}
    a = make_launch(Counter, **fields)
    b = make_launch(Counter, **fields)
    executor.start_trial(a)
    executor.start_trial(b)
    events = executor.poll(0)
    assert [type(e).__name__ for e in events] == ["TrialStarted", "TrialResults"] * 2
    assert [len(e.results) for e in events[1::2]] == [4, 4]
